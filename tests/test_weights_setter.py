"""The in-engine actors' weight update (addons/rl_sync/weights_setter.gd): a game that compiled policy B and is sent
policy A's weights message (engine/policy_weights.flat_weights, the wire's order) computes what A computes, to
float32 precision, for discrete, continuous (its log-std included) and hybrid heads, with and without observation
normalisation, for a network split into several scripts and one whose rows are summed by parts; a message of the
wrong size is refused in one line, and so is an LSTM policy. Real Godot (`godot3-server -s tests/weights_parity.gd`)."""

import json
import struct
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as nn

from python_trainer.base import paths
from python_trainer.engine.policy_file import PolicyFileError, policy_dict, with_log_std
from python_trainer.engine.policy_weights import agent_weights, flat_weights, weight_count

GODOT = "godot3-server"
POOL_REAL_ARRAY = 22  # Godot's Variant type of PoolRealArray (var2bytes' header)
HEADS = {
    "discrete": [{"key": "move", "action_type": "discrete", "size": 3}, {"key": "turn", "action_type": "discrete",
                                                                          "size": 3}],
    "continuous": [{"key": "move", "action_type": "continuous", "size": 2}],
    "hybrid": [{"key": "move", "action_type": "continuous", "size": 2}, {"key": "jump", "action_type": "discrete",
                                                                           "size": 3}],
}


def mlp_policy(seed: int, sizes: list, keys: list, normalize: bool) -> dict:
    """A policy dict (policy_file.policy_dict) of a tanh MLP of ``sizes`` with random weights, random log-stds for the
    continuous keys and, with ``normalize``, random observation statistics."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    modules = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        modules += [nn.Linear(n_in, n_out), nn.Tanh()]
    actor = nn.Sequential(*modules[:-1])
    with torch.no_grad():
        for module in actor:
            if isinstance(module, nn.Linear):
                module.bias.uniform_(-0.5, 0.5)
    n_continuous = sum(k["size"] for k in keys if k["action_type"] == "continuous")
    keys = with_log_std(keys, torch.tensor(rng.uniform(-1.5, 0.5, n_continuous)) if n_continuous else None)
    stats = {"mean": rng.uniform(-1, 1, sizes[0]), "var": rng.uniform(0.2, 3.0, sizes[0]), "epsilon": 1e-8,
             "clip": 10.0} if normalize else None
    return policy_dict(actor, stats, keys, env="test", source={}, where="test")


def numpy_forward(policy: dict, obs: np.ndarray) -> np.ndarray:
    x = np.asarray(obs, np.float64)
    norm = policy["obs_normalization"]
    if norm is not None:
        x = np.clip((x - norm["mean"]) / np.sqrt(np.asarray(norm["var"]) + norm["epsilon"]), -norm["clip"], norm["clip"])
    for layer in policy["layers"]:
        x = x @ np.asarray(layer["weight"]).T + np.asarray(layer["bias"])
        x = np.tanh(x) if layer["activation"] == "tanh" else x
    return x


def message(values) -> bytes:
    """A weights message's body as the trainer sends it: var2bytes(PoolRealArray)."""
    values = np.asarray(values, "<f4")
    return struct.pack("<II", POOL_REAL_ARRAY, values.size) + values.tobytes()


def run_case(tmp_path, target: dict, source, values, observations, settable: bool = True) -> dict:
    """weights_parity.gd on policy B (``target``) set from ``values``; A (``source``, or None) run by itself too.
    ``settable``: B is loaded with its weights setter, as the in-engine actors load it (playback does not)."""
    (tmp_path / "b.json").write_text(json.dumps(target))
    if source is not None:
        (tmp_path / "a.json").write_text(json.dumps(source))
    (tmp_path / "weights.bin").write_bytes(message(values))
    case = {"target": str(tmp_path / "b.json"), "source": str(tmp_path / "a.json") if source is not None else None,
            "buffer": str(tmp_path / "weights.bin"), "observations": np.asarray(observations).tolist(),
            "settable": settable}
    (tmp_path / "case.json").write_text(json.dumps(case))
    proc = subprocess.run(
        [GODOT, "--path", str(paths.GODOT_PROJECT), "-s", "tests/weights_parity.gd",
         f"--weights_case={tmp_path / 'case.json'}"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0 and "SCRIPT ERROR" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))


def check_set(tmp_path, sizes: list, keys: list, normalize: bool) -> None:
    a, b = mlp_policy(1, sizes, keys, normalize), mlp_policy(2, sizes, keys, normalize)
    values = flat_weights(a)
    assert values.dtype == np.float32 and values.size == weight_count(a) == weight_count(b)
    obs = np.random.default_rng(3).uniform(-2, 2, (8, sizes[0]))
    result = run_case(tmp_path, b, a, values, obs)
    assert result["error"] == "" and result["count"] == values.size, result["error"]
    outputs, own = np.array(result["outputs"]), np.array(result["source_outputs"])
    expected = numpy_forward(a, obs)
    assert np.abs(expected - numpy_forward(b, obs)).max() > 0.1, "A and B should compute different things"
    assert np.abs(outputs - own).max() < 1e-5, np.abs(outputs - own).max()
    assert np.abs(outputs - expected).max() < 2e-5, np.abs(outputs - expected).max()
    log_std = [v for k in a["action_keys"] if k["action_type"] == "continuous" for v in k["log_std"]]
    assert np.allclose(result["log_std"], log_std, atol=1e-7), (result["log_std"], log_std)


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalised"])
def test_a_compiled_policy_given_another_policys_weights_computes_what_that_policy_does(tmp_path, head, normalize):
    check_set(tmp_path, [26, 64, 64, sum(k["size"] for k in HEADS[head])], HEADS[head], normalize)


@pytest.mark.parametrize("sizes", [[26, 256, 256, 6], [4, 6200, 3]], ids=["rows-split-among-scripts", "rows-in-parts"])
def test_a_network_of_several_scripts_or_parts_takes_new_weights_too(tmp_path, sizes):
    """256 x 256 is 7,396 blocks, its rows split among scripts; a row of 6,200 inputs is 2,067 blocks, summed by parts
    (block_compiler.gd's BLOCKS_PER_SCRIPT is 2,048): each script and part sets its own members."""
    keys = HEADS["discrete"] if sizes[-1] == 6 else HEADS["discrete"][:1]
    check_set(tmp_path, sizes, keys, normalize=True)


def test_a_weights_message_of_the_wrong_size_is_refused_in_one_line_and_changes_nothing(tmp_path):
    keys = HEADS["hybrid"]
    a, b = mlp_policy(1, [26, 64, 5], keys, True), mlp_policy(2, [26, 64, 5], keys, True)
    obs = np.random.default_rng(3).uniform(-2, 2, (2, 26))
    values = flat_weights(a)
    result = run_case(tmp_path, b, None, values[:-1], obs)
    error = result["error"]
    assert f"holds {values.size - 1} values, but this policy takes {values.size}" in error and "\n" not in error, error
    assert np.abs(np.array(result["outputs"]) - numpy_forward(b, obs)).max() < 2e-5  # still B's own weights


def test_a_policy_loaded_for_playback_has_no_setter_and_says_so(tmp_path):
    """--policy playback compiles no setter (it would cost the load about 4x its time): set_weights refuses."""
    a, b = mlp_policy(1, [26, 64, 6], HEADS["discrete"], False), mlp_policy(2, [26, 64, 6], HEADS["discrete"], False)
    obs = np.random.default_rng(3).uniform(-2, 2, (2, 26))
    result = run_case(tmp_path, b, None, flat_weights(a), obs, settable=False)
    assert "compiled without its weights setter" in result["error"] and "\n" not in result["error"], result["error"]
    assert np.abs(np.array(result["outputs"]) - numpy_forward(b, obs)).max() < 2e-5


def test_the_game_refuses_weights_for_an_lstm_policy_in_one_line(tmp_path):
    from test_reliability_games import lstm_policy

    result = run_case(tmp_path, lstm_policy(), None, np.zeros(10, np.float32), np.zeros((1, 6)))
    assert "in-engine actors take MLP policies; this one has an LSTM" in result["error"], result["error"]
    assert "\n" not in result["error"]


def test_python_refuses_to_flatten_an_lstm_policy_or_a_continuous_key_without_its_log_std():
    policy = mlp_policy(1, [4, 8, 2], HEADS["continuous"], False)
    assert weight_count(policy) == 4 * 8 + 8 + 8 * 2 + 2 + 2
    del policy["action_keys"][0]["log_std"]
    with pytest.raises(PolicyFileError, match="re-export"):
        flat_weights(policy)
    with pytest.raises(PolicyFileError, match="MLP policies"):
        flat_weights({**policy, "lstm": {"after_layer": 1}})


def test_the_agents_own_weights_are_the_flat_weights_of_its_policy_dict():
    """agent_weights (the message after every update, no dict built) equals flat_weights of the policy dict that
    policy_file.game_policy makes of the same agent and normaliser, for a hybrid agent (two continuous keys of 1 and 2
    values: their log-stds, two discrete keys) with normalised observations."""
    import gymnasium as gym

    from python_trainer.agent import Agent
    from python_trainer.normalization import Normalizer

    space = gym.spaces.Dict({"aim": gym.spaces.Box(-1.0, 1.0, (1,), np.float32), "jump": gym.spaces.Discrete(3),
                             "move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(2)})
    torch.manual_seed(0)
    agent = Agent(12, space)
    with torch.no_grad():
        agent.actor_logstd.uniform_(-1, 0)
    normalizer = Normalizer(12, 4, 0.99, norm_obs=True, norm_reward=False)
    normalizer.normalize_obs(np.random.default_rng(0).normal(2.0, 3.0, (4, 12)))
    keys = [{"key": "aim", "action_type": "continuous", "size": 1}, {"key": "move", "action_type": "continuous",
            "size": 2}, {"key": "jump", "action_type": "discrete", "size": 3},
            {"key": "mode", "action_type": "discrete", "size": 2}]  # the agent's output order (policy_file.action_keys)
    policy = policy_dict(agent.policy_parts()["actor"], normalizer.obs_statistics(),
                         with_log_std(keys, agent.actor_logstd), env="test", source={}, where="test")
    expected = flat_weights(policy)
    got = agent_weights(agent, normalizer)
    assert got.dtype == np.float32 and got.shape == expected.shape and np.array_equal(got, expected)
