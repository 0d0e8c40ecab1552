"""Camera policies inside the engine (issue 35, part 5): the policy file's version 4 ("image", "cnn":
engine/policy_cnn.py) written from a CnnEncoder and an actor and read back, its shapes checked on both sides in one
line, MLP files unchanged; the GDScript CNN (addons/rl_sync/conv_network.gd) against torch over 1,000 frames with
the engine's own frame stack; the ONNX export by observation keys against onnxruntime, and its import refused."""

import base64
import json
import subprocess

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

from python_trainer.base import paths
from python_trainer.engine import onnx_import, onnx_policy
from python_trainer.engine.policy_file import (PolicyFileError, game_policy, policy_dict, policy_json, read_policy,
                                               write_policy)
from python_trainer.envs.images import ImageLayout
from python_trainer.variants.cnn import CnnEncoder
from python_trainer.variants.recurrent import LSTMCore

KEYS = [{"key": "move", "action_type": "discrete", "size": 3}]
MLP_KEYS = ["format", "version", "env", "observation_size", "action_keys", "action_rule", "obs_normalization", "layers",
            "lstm", "source"]


def camera_parts(shape=(20, 20, 3), frame_stack=2, vector=3, seed=0, lstm=False):
    """(encoder, actor, layout, lstm weights or None, normaliser statistics) as cnn_agent.py's policy_parts() gives
    them: the simple encoder, a 64-64 tanh actor (agent.py's) or an LSTM of 16 and a linear head. The weights are
    moved off their init (zero biases, orthogonal) so that every one of them matters."""
    torch.manual_seed(seed)
    layout = ImageLayout("camera_2d", *shape, vector, frame_stack=frame_stack)
    encoder = CnnEncoder(layout.shape)
    n_in = encoder.out_features + vector
    core = LSTMCore(n_in, 16) if lstm else None
    actor = nn.Sequential(nn.Linear(16, 3)) if lstm else \
        nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))
    with torch.no_grad():
        for p in list(encoder.parameters()) + (list(core.parameters()) if core else []):
            p.add_(torch.randn_like(p) * 0.05)
    rng = np.random.default_rng(seed)
    stats = {"mean": rng.normal(size=vector), "var": rng.uniform(0.5, 2, vector), "epsilon": 1e-8, "clip": 5.0}
    return encoder, actor, layout, core, stats


def camera_policy(parts) -> dict:
    encoder, actor, layout, core, stats = parts
    return policy_dict(actor, stats, KEYS, env="forager", source={}, where="test", encoder=encoder, image=layout,
                       lstm=None if core is None else core.export_weights())


def reference(parts, vectors, frames, dones) -> np.ndarray:
    """torch's outputs over one agent's steps, stacking frames as training does: the K newest on the channels, oldest
    first, zeros before an episode's first."""
    encoder, actor, layout, core, stats = parts
    k = layout.frame_stack
    stack, state, out = np.zeros((k,) + frames.shape[1:], np.float32), None, []
    with torch.no_grad():
        for t in range(len(frames)):
            if dones[t]:
                stack[:], state = 0, None
            stack = np.concatenate([stack[1:], frames[t][None].astype(np.float32)])
            image = torch.from_numpy(np.concatenate(list(stack), axis=-1)[None])
            vector = np.clip((vectors[t] - stats["mean"]) / np.sqrt(stats["var"] + stats["epsilon"]), -5, 5)
            x = torch.cat([encoder(image), torch.tensor(vector[None], dtype=torch.float32)], dim=1)
            if core is not None:
                x, state = core.lstm(x.view(1, 1, -1), state)
            out.append(actor(x.view(1, -1))[0].numpy())
    return np.array(out)


def run_engine(tmp_path, policy_path, vectors, frames, dones):
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"key": "camera_2d", "vectors": vectors.tolist(), "dones": [bool(d) for d in dones],
                                "frames": [base64.b64encode(f.tobytes()).decode() for f in frames]}))
    return subprocess.run([paths.godot_server(), "--path", str(paths.GODOT_PROJECT), "-s", "tests/cnn_parity.gd",
                           f"--cnn_policy={policy_path}", f"--cnn_case={case}"],
                          capture_output=True, text=True, timeout=120)


def steps(n, shape, vector, seed=1):
    """n random frames (uint8), vectors, and episode starts at 0 and every ~60 steps."""
    rng = np.random.default_rng(seed)
    dones = np.zeros(n, bool)
    dones[::61] = True
    return rng.normal(size=(n, vector)), rng.integers(0, 256, (n,) + shape, dtype=np.uint8), dones


# ---------------------------------------------------------------------------------------------- the file, in Python
def test_a_camera_policy_file_round_trips_and_an_mlp_file_keeps_its_keys(tmp_path):
    parts = camera_parts()
    policy = camera_policy(parts)
    path = write_policy(tmp_path / "policy.json", policy)
    assert read_policy(path) == json.loads(json.dumps(policy)) and path.read_text() == policy_json(policy)
    assert policy["version"] == 4 and policy["observation_size"] == 3
    assert policy["image"] == {"key": "camera_2d", "size": [20, 20, 3], "frame_stack": 2}
    assert policy["vector_keys"] == [{"key": "obs", "size": 3}]
    convs = policy["cnn"]["convs"]
    assert [(c["kernel"], c["stride"], len(c["weight"]), len(c["weight"][0])) for c in convs] == [(8, 4, 16, 6), (4, 2, 32, 16)]
    assert np.array_equal(np.array(convs[0]["weight"], np.float32), parts[0].convs[0].weight.detach().numpy())
    assert len(policy["cnn"]["dense"]["weight"][0]) == 32 and len(policy["layers"][0]["weight"][0]) == 256 + 3
    assert len(policy["obs_normalization"]["mean"]) == 3  # the vector columns only
    mlp = policy_dict(nn.Sequential(nn.Linear(6, 2)), None, KEYS[:0] + [{"key": "m", "action_type": "continuous",
                      "size": 2}], env="e", source={}, where="test")
    assert list(mlp) == MLP_KEYS and mlp["version"] == 3


def test_a_whole_rows_statistics_are_cut_to_the_vector_columns():
    encoder, actor, layout, _, stats = camera_parts(vector=2)
    row = {**stats, "mean": np.arange(layout.row_size, dtype=float), "var": np.ones(layout.row_size)}
    policy = policy_dict(actor, row, KEYS, env="forager", source={}, where="t", encoder=encoder, image=layout)
    assert policy["obs_normalization"]["mean"] == [0.0, 1.0]


def _broken(policy: dict, case: str) -> dict:
    policy = json.loads(json.dumps(policy))
    cnn = policy["cnn"]
    if case == "channels":
        cnn["convs"][1]["weight"] = [row[:-1] for row in cnn["convs"][1]["weight"]]
    elif case == "kernel":
        policy["image"]["size"] = [6, 20, 3]
    elif case == "dense":
        cnn["dense"]["weight"] = [row[:-1] for row in cnn["dense"]["weight"]]
    elif case == "layers":
        policy["observation_size"] = 4
        policy["obs_normalization"] = None
        policy["vector_keys"] = [{"key": "obs", "size": 4}]
    elif case == "no_cnn":
        del policy["cnn"]
    return policy


BROKEN = {
    "channels": "convolution 1 takes 15 input channels, but convolution 0 gives 16",
    "kernel": "convolution 0's 8 x 8 kernel does not fit the 6 x 20 it is given",
    "dense": "its dense layer takes 31 inputs, but the last convolution gives 32 x 1 x 1 = 32",
}


@pytest.mark.parametrize("case", ["channels", "kernel", "dense", "no_cnn"])
def test_shapes_that_do_not_chain_are_refused_in_one_line(tmp_path, case):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(camera_policy(camera_parts()), case)))
    with pytest.raises(PolicyFileError) as error:
        read_policy(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message
    assert BROKEN.get(case, 'needs both "image" and "cnn"') in message


def test_export_builds_the_file_from_the_agents_policy_parts():
    """game_policy, as export-policy and training call it: cnn_agent.py's policy_parts() (encoder, actor, image),
    checked against the game's env_info (one frame per row: the agent's row holds K), vector keys from the game."""
    encoder, actor, layout, _, stats = camera_parts()
    env_info = {"env": "forager", "n_agents": 1, "action_space": {"move": {"size": 3, "action_type": "discrete"}},
                "observation_space": {"obs": {"size": [3], "space": "box"},
                                      "camera_2d": {"size": [20, 20, 3], "space": "box"}}}

    class Agent:
        obs_dim = layout.row_size

        def policy_parts(self):
            return {"encoder": encoder, "actor": actor, "image": layout}

    class Normalizer:
        def obs_statistics(self):
            return stats

    policy = game_policy(Agent(), Normalizer(), gym.spaces.Discrete(3), env_info, env_id="forager", source={},
                         where="test")
    assert policy == json.loads(json.dumps(camera_policy(camera_parts())))


# ---------------------------------------------------------------------------------------------- the engine
@pytest.mark.slow
@pytest.mark.parametrize("shape, frame_stack, vector, n, lstm", [
    ((20, 20, 3), 2, 3, 1000, False),  # RGB, 2 frames, beside a vector: 1,000 frames
    ((24, 20, 1), 4, 0, 150, False),  # grayscale, 4 frames, the image alone, not square
    ((20, 20, 3), 1, 2, 120, True),  # the CNN under an LSTM (--cnn with --lstm)
])
def test_the_engine_cnn_matches_torch_over_recorded_frames(tmp_path, shape, frame_stack, vector, n, lstm):
    parts = camera_parts(shape, frame_stack, vector, lstm=lstm)
    path = write_policy(tmp_path / "policy.json", camera_policy(parts))
    vectors, frames, dones = steps(n, shape, vector)
    result = run_engine(tmp_path, path, vectors, frames, dones)
    assert result.returncode == 0 and "SCRIPT ERROR" not in result.stderr, result.stderr[-3000:]
    outputs = np.array(json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))["outputs"])
    expected = reference(parts, vectors, frames, dones)
    assert outputs.shape == expected.shape and np.abs(outputs - expected).max() <= 1e-4
    # the stack and its resets mattered: without the reset at step 61 the steps after it would differ
    if frame_stack > 1 or lstm:
        no_reset = dones.copy()
        no_reset[61] = False
        assert np.abs(reference(parts, vectors, frames, no_reset)[61] - expected[61]).max() > 1e-4


@pytest.mark.slow
def test_the_game_refuses_shapes_that_do_not_chain_in_one_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(camera_policy(camera_parts()), "channels")))
    result = run_engine(tmp_path, path, *steps(1, (20, 20, 3), 3))
    errors = [line for line in result.stderr.splitlines() if line.startswith("cnn_parity: error: ")]
    assert result.returncode == 1 and errors, result.stderr[-2000:]
    assert str(path) in errors[0] and BROKEN["channels"] in errors[0]


# ---------------------------------------------------------------------------------------------- ONNX
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:You are using the legacy TorchScript")
def test_the_onnx_export_takes_its_observations_by_key_and_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    parts = camera_parts(frame_stack=2)
    path = onnx_policy.write_onnx(tmp_path / "policy.onnx", camera_policy(parts))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = [(i.name, i.shape, i.type) for i in session.get_inputs()]
    assert inputs == [("obs", ["batch_size", 3], "tensor(float)"),
                      ("camera_2d", ["batch_size", 20, 20, 6], "tensor(uint8)"),
                      ("state_ins", ["batch_size"], "tensor(float)")]
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (1000, 20, 20, 6), dtype=np.uint8)
    vectors = rng.normal(size=(1000, 3)).astype(np.float32)
    output, _ = session.run(None, {"obs": vectors, "camera_2d": images, "state_ins": np.zeros(1000, np.float32)})
    encoder, actor, _, _, stats = parts
    with torch.no_grad():
        vector = np.clip((vectors - stats["mean"]) / np.sqrt(stats["var"] + 1e-8), -5, 5).astype(np.float32)
        expected = actor(torch.cat([encoder(torch.from_numpy(images)), torch.from_numpy(vector)], dim=1)).numpy()
    assert np.abs(output - expected).max() <= 1e-5
    with pytest.raises(PolicyFileError, match=r"convolutions or an image input \(a camera policy\); import-policy "
                                              "maps MLP policies only"):
        onnx_import.import_policy(path)
