"""No policy file takes the engine more than a second or two to load: a file deeper than MAX_LAYERS (its dense layers
and a camera policy's convolutions together; policy_format.py, block_compiler.gd) is refused in one line by Python
(read_policy) and by the game (--policy=FILE), and a wide network is compiled as several scripts (a script's compile
time grows with the square of its size) that compute what one would. The load times are scripts/bench_policy_load.py's."""

import json

import numpy as np
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




def memory_mlp(depth: int, width: int, sizes=None, rng=None) -> dict:
    """A version 3 MLP for memory (4 observations, one discrete key of 3) of ``depth`` layers ``width`` wide, or of
    the layer sizes ``sizes`` (4 first, 3 last); ``rng``: random weights instead of a pattern."""
    from python_trainer.engine.policy_file import FORMAT, MLP_VERSION, action_rule

    keys, sizes = [{"key": "move", "action_type": "discrete", "size": 3}], sizes or [4] + [width] * (depth - 1) + [3]
    layers = [{"weight": rng.uniform(-0.3, 0.3, (n_out, n_in)).tolist() if rng else
                         [[0.01 * ((i + j + k) % 7 - 3) for k in range(n_in)] for j in range(n_out)],
               "bias": rng.uniform(-0.3, 0.3, n_out).tolist() if rng else [0.0] * n_out,
               "activation": "tanh" if i < len(sizes) - 2 else "linear"}
              for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]  # fmt: skip
    return {"format": FORMAT, "version": MLP_VERSION, "env": "memory", "observation_size": 4, "action_keys": keys,
            "action_rule": action_rule(keys), "obs_normalization": None, "layers": layers, "lstm": None}


@pytest.mark.slow
def test_a_network_compiled_as_several_scripts_computes_what_numpy_does(tmp_path, headless_export):
    """150 x 150 layers hold 2,500 blocks, more than one script's 2,048 (block_compiler.gd's BLOCKS_PER_SCRIPT): each
    is split by output rows between two scripts; the layers around them share scripts."""
    from python_trainer.engine import in_engine

    rng = np.random.default_rng(0)
    policy = memory_mlp(0, 0, sizes=[4, 150, 150, 150, 30, 30, 3], rng=rng)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(policy))
    obs = rng.uniform(-1, 1, (20, 4))
    outputs, _ = in_engine.policy_forward(path, obs)
    expected = obs
    for layer in policy["layers"]:
        expected = expected @ np.array(layer["weight"]).T + np.array(layer["bias"])
        expected = np.tanh(expected) if layer["activation"] == "tanh" else expected
    assert np.abs(expected).max() > 0.3, "the test network should give outputs of order 1"
    assert np.abs(outputs - expected).max() < 2e-5, np.abs(outputs - expected).max()


@pytest.mark.slow
def test_the_game_loads_a_policy_of_max_layers_64_wide_in_seconds(tmp_path, headless_export):
    path = tmp_path / "deepest.json"
    path.write_text(json.dumps(memory_mlp(MAX_LAYERS, 64)))
    assert len(read_policy(path)["layers"]) == MAX_LAYERS
    code, out, err, seconds, _ = _play(headless_export, path)
    assert code == 0 and seconds < 5, (code, seconds, err[-2000:])  # 32 layers 64 wide: about 1 s here
