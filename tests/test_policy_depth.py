"""No policy file takes the engine more than a second or two to load: a file deeper than MAX_LAYERS (its dense layers
and a camera policy's convolutions together; policy_format.py, block_compiler.gd) is refused in one line by Python
(read_policy) and by the game (--policy=FILE),"""

import json

import pytest

from test_reliability_games import lstm_policy, run_with_peak_rss
from python_trainer.engine.policy_file import PolicyFileError, read_policy
from python_trainer.engine.policy_format import MAX_LAYERS


def deep_policy(depth: int, width: int = 2) -> dict:
    """The small recurrent policy (2 actions) with square layers appended until it has ``depth`` layers."""
    policy = lstm_policy()
    policy["layers"][-1]["activation"] = "tanh"
    extra = depth - len(policy["layers"])
    sizes = [2] + [width] * (extra - 1) + [2]
    for n_in, n_out in zip(sizes, sizes[1:]):
        policy["layers"].append({"weight": [[0.1] * n_in for _ in range(n_out)], "bias": [0.0] * n_out,
                                 "activation": "tanh"})  # fmt: skip
    policy["layers"][-1]["activation"] = "linear"
    return policy


def test_python_refuses_a_policy_deeper_than_max_layers(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(deep_policy(MAX_LAYERS)))
    assert len(read_policy(path)["layers"]) == MAX_LAYERS
    path.write_text(json.dumps(deep_policy(MAX_LAYERS + 1)))
    with pytest.raises(PolicyFileError) as e:
        read_policy(path)
    assert f"it has {MAX_LAYERS + 1} layers" in str(e.value) and "\n" not in str(e.value), str(e.value)


def _play(headless_export, path):
    cmd = [str(headless_export), "--env=memory", "--agents=2", f"--policy={path}", "--eval_episodes=1",
           "--fixed-fps", "60"]  # fmt: skip
    return run_with_peak_rss(cmd, timeout=60)


@pytest.mark.slow
def test_the_game_refuses_a_policy_deeper_than_max_layers_in_one_line(tmp_path, headless_export):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(deep_policy(MAX_LAYERS + 1)))
    code, out, err, seconds, _ = _play(headless_export, path)
    errors = [line for line in err.splitlines() if line.startswith("rl_sync: error: ")]
    assert code == 1 and len(errors) == 1, err[-3000:]
    assert f"it has {MAX_LAYERS + 1} layers" in errors[0] and seconds < 10, (errors[0], seconds)

