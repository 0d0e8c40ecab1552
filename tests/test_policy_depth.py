"""No policy file takes the engine more than a second or two to load: a file deeper than MAX_LAYERS (its dense layers
and a camera policy's convolutions together; policy_format.py, block_compiler.gd) is refused in one line by Python
(read_policy) and by the game (--policy=FILE), and a wide network is compiled as several scripts (a script's compile
time grows with the square of its size) that compute what one would, a row too wide for one script as parts that
each sum a share of it. A file over the engine's bounds (its bytes, a layer's inputs, its weights: bounds.py) is
refused in one line before it is read or built. The load times are scripts/bench_policy_load.py's."""

import json

import numpy as np
import pytest
import torch
import torch.nn as nn

from test_cnn_playback import camera_policy, reference, run_engine, steps
from test_reliability_games import KEYS, lstm_policy, run_with_peak_rss
from python_trainer.base import bounds
from python_trainer.engine import in_engine
from python_trainer.engine.policy_file import PolicyFileError, policy_dict, read_policy
from python_trainer.engine.policy_format import MAX_FILE_BYTES, MAX_LAYERS
from python_trainer.envs.images import ImageLayout
from python_trainer.variants.recurrent import LSTMCore


def deep_policy(depth: int, width: int = 2) -> dict:
    """The small recurrent policy (2 actions) with square layers appended until it has ``depth`` layers."""
    policy = lstm_policy()
    policy["layers"][-1]["activation"] = "tanh"
    extra = depth - len(policy["layers"])
    sizes = [2] + [width] * (extra - 1) + [2]
    for n_in, n_out in zip(sizes, sizes[1:]):
        policy["layers"].append({"weight": [[0.1] * n_in for _ in range(n_out)], "bias": [0.0] * n_out,
                                 "activation": "tanh"})
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
           "--fixed-fps", "60"]
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
              for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]
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


# ---------------------------------------------------------------------------------------------- rows wider than a script
def test_an_mlp_whose_rows_are_wider_than_one_script_gives_torchs_outputs(tmp_path, headless_export):
    """12 -> 16,384 -> 2: each output of the second layer sums 5,462 blocks, past one script's 2,048
    (BLOCKS_PER_SCRIPT), so its row is summed by parts (block_compiler.gd's row_terms)."""
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(12, 16384), nn.Tanh(), nn.Linear(16384, 2))
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(policy_dict(actor, None, KEYS, env="memory", source={}, where="test")))
    obs = np.random.default_rng(0).uniform(-2, 2, (10, 12))
    outputs, _ = in_engine.policy_forward(path, obs)
    with torch.no_grad():
        expected = actor(torch.tensor(obs, dtype=torch.float32)).numpy()
    assert np.abs(expected).max() > 0.1, "the test network should give outputs that matter"
    assert np.abs(outputs - expected).max() < 1e-4, np.abs(outputs - expected).max()


def test_an_lstm_whose_gate_rows_are_wider_than_one_script_gives_torchs_outputs(tmp_path, headless_export):
    """An LSTM of 6,200 inputs and 4 states: each gate row sums 2,069 blocks, so by parts; over resets."""
    torch.manual_seed(1)
    encoder, core, actor = nn.Sequential(nn.Linear(12, 6200), nn.Tanh()), LSTMCore(6200, 4), nn.Linear(4, 2)
    path = tmp_path / "wide_lstm.json"
    path.write_text(json.dumps(policy_dict(nn.Sequential(actor), None, KEYS, env="memory", source={}, where="test",
                                           encoder=encoder, lstm=core.export_weights())))
    obs = np.random.default_rng(1).uniform(-2, 2, (12, 12))
    dones = np.zeros(12, bool)
    dones[[0, 7]] = True
    outputs, _ = in_engine.policy_forward(path, obs, dones=dones)
    expected, state = [], None
    with torch.no_grad():
        for x, done in zip(torch.tensor(obs, dtype=torch.float32), dones):
            h, state = core.lstm(encoder(x).view(1, 1, -1), None if done else state)
            expected.append(actor(h.view(-1)).numpy())
    assert np.abs(outputs - np.array(expected)).max() < 1e-4, np.abs(outputs - np.array(expected)).max()


class WideEncoder(nn.Module):
    """A camera encoder whose dense rows are wider than one script: one 2 x 2 convolution of stride 2 (4 filters) on a
    100 x 100 gray image gives 10,000 features, 5,000 blocks a row (the parts of conv_compiler.gd's dense layer)."""

    kind = None

    def __init__(self):
        super().__init__()
        self.conv, self.dense = nn.Conv2d(1, 4, 2, 2), nn.Sequential(nn.Linear(4 * 50 * 50, 4))
        self.out_features = 4

    def conv_layers(self):
        return [(self.conv, 2)]

    def forward(self, image):  # (B, H, W, C) bytes, as variants/cnn.py's CnnEncoder takes them
        x = torch.relu(self.conv(image.permute(0, 3, 1, 2).float() / 255))
        return torch.relu(self.dense(x.flatten(1)))


def test_a_camera_whose_dense_rows_are_wider_than_one_script_gives_torchs_outputs(tmp_path):
    torch.manual_seed(2)
    encoder, layout = WideEncoder(), ImageLayout("camera_2d", 100, 100, 1, 2, frame_stack=1)
    with torch.no_grad():
        encoder.dense[0].weight.mul_(20)  # features of order 1 after the ReLU
    rng = np.random.default_rng(2)
    stats = {"mean": rng.normal(size=2), "var": rng.uniform(0.5, 2, 2), "epsilon": 1e-8, "clip": 5.0}
    parts = (encoder, nn.Sequential(nn.Linear(6, 3)), layout, None, stats)
    path = tmp_path / "wide_camera.json"
    path.write_text(json.dumps(camera_policy(parts)))
    vectors, frames, dones = steps(8, (100, 100, 1), 2)
    result = run_engine(tmp_path, path, vectors, frames, dones)
    assert result.returncode == 0 and "SCRIPT ERROR" not in result.stderr, result.stderr[-3000:]
    outputs = np.array(json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))["outputs"])
    expected = reference(parts, vectors, frames, dones)
    with torch.no_grad():
        features = encoder(torch.from_numpy(frames[:1]))
    assert features.abs().max() > 0.1, "the features should matter"
    assert outputs.shape == expected.shape and np.abs(outputs - expected).max() <= 1e-4


# ---------------------------------------------------------------------------------------------- over the bounds
def _over_bound(tmp_path, case: str):
    """A file over one of the engine's bounds, and the words of its refusal."""
    path = tmp_path / f"{case}.json"
    if case == "bytes":  # a sparse file: no byte of it is ever read
        with open(path, "wb") as f:
            f.truncate(MAX_FILE_BYTES + 1)
        return path, f"the file holds {MAX_FILE_BYTES + 1} bytes, beyond the engine's {MAX_FILE_BYTES}"
    if case == "weights":  # 257 rows of 65,536 declared (its first row), counted before any row is checked
        policy = memory_mlp(0, 0, sizes=[4, 3])
        policy["layers"] = [{"weight": [[0.0] * 4] * 65536, "bias": [0.0] * 65536, "activation": "tanh"},
                            {"weight": [[0.0] * 65536] + [[]] * 256, "bias": [0.0] * 257, "activation": "tanh"},
                            {"weight": [[0.0] * 257] * 3, "bias": [0.0] * 3, "activation": "linear"}]
        path.write_text(json.dumps(policy))
        weights = 4 * 65536 + 257 * 65536 + 3 * 257
        return path, f"it holds {weights} weights, beyond the engine's {bounds.POLICY_WEIGHTS.value}"
    # a 512 x 512 camera whose one 1 x 1 filter gives the dense layer 262,144 features
    policy = {**memory_mlp(0, 0, sizes=[5, 3]), "version": 4,
              "image": {"key": "camera_2d", "size": [512, 512, 1], "frame_stack": 1},
              "cnn": {"convs": [{"weight": [[[[0.5]]]], "bias": [0.0], "kernel": 1, "stride": 1}],
                      "dense": {"weight": [[0.0] * 512 * 512], "bias": [0.0], "activation": "relu"}}}
    path.write_text(json.dumps(policy))
    return path, f"the CNN's dense layer takes {512 * 512} inputs, beyond the engine's {bounds.LAYER_SIZE.value}"


@pytest.mark.parametrize("case", ["bytes", "weights", "camera"])
def test_the_game_refuses_a_policy_over_its_bounds_in_one_line_at_once(tmp_path, headless_export, case):
    path, words = _over_bound(tmp_path, case)
    code, out, err, seconds, peak_mb = _play(headless_export, path)
    errors = [line for line in err.splitlines() if line.startswith("rl_sync: error: ")]
    assert code == 1 and len(errors) == 1, err[-3000:]
    assert words in errors[0] and "train a smaller network" in errors[0], errors[0]
    assert seconds < 10 and peak_mb < 500, (seconds, peak_mb)
    with pytest.raises(PolicyFileError) as e:
        read_policy(path)
    assert "\n" not in str(e.value) and (case == "weights" or words in str(e.value)), str(e.value)
