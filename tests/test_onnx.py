"""Policies travel both ways (onnx_policy.py, docs/onnx.md): `export-policy --format onnx` writes godot-rl's ONNX
convention and onnxruntime agrees with the engine's --policy_forward; `import-policy` turns ONNX MLP policies
(godot-rl's export of SB3's PPO, hand-made graphs with the normaliser, ReLU, Sigmoid, Slice, Softmax) into policy
files the engine plays with the same numbers; bad models are refused in one line with nothing written."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import REPO, free_port, godot_ppo_child
from python_trainer import cli
from python_trainer.engine import onnx_import, onnx_policy
from python_trainer.engine.in_engine import evaluate_in_engine, policy_forward
from python_trainer.engine.policy_file import PolicyFileError, write_policy

ort = pytest.importorskip("onnxruntime")
# Our exports and the hand-made graphs here use torch's TorchScript exporter, which says it is legacy (godot-rl's
# exporters use torch's default one, with onnxscript).
pytestmark = pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export",
                                        "ignore:The feature will be removed:DeprecationWarning")
POLICIES = REPO / "exports" / "policies"
N = 1000  # observations compared per model


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _observations(n_obs, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, (N, n_obs)).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ball_chase", "cart_pole", "jumper"])  # continuous, discrete, hybrid
def test_exported_mlp_agrees_with_the_engine(headless_export, tmp_path, name):
    out = tmp_path / f"{name}.onnx"
    result = godot_ppo_child("export-policy", str(POLICIES / f"{name}_model.pt"), "--format", "onnx", "-o", str(out))
    assert result.returncode == 0, result.stderr
    model = _session(out)
    assert [i.name for i in model.get_inputs()] == ["obs", "state_ins"]
    assert [o.name for o in model.get_outputs()] == ["output", "state_outs"]
    assert model.get_inputs()[0].shape[0] == "batch_size"  # the batch axis is dynamic
    policy = json.loads((POLICIES / f"{name}.json").read_text())
    obs = _observations(policy["observation_size"])
    output, state = model.run(None, {"obs": obs, "state_ins": np.zeros(N, np.float32)})
    engine, _ = policy_forward(POLICIES / f"{name}.json", obs)
    assert np.abs(output - engine).max() < 1e-5
    assert (state == 0).all() and state.shape == (N,)
    import onnx

    meta = onnx_policy.policy_from_metadata(onnx.load(str(out)))
    keys = [{k: v for k, v in key.items() if k != "log_std"} for key in meta["action_keys"]]  # a version 5 file's
    assert meta["env"] == name and keys == policy["action_keys"]


@pytest.mark.slow
def test_exported_lstm_carries_its_state_and_agrees_with_the_engine_over_resets(headless_export, tmp_path):
    policy_path = POLICIES / "memory_lstm.json"
    out = tmp_path / "memory.onnx"
    # a policy file converts too
    assert godot_ppo_child("export-policy", str(policy_path), "-o", str(out)).returncode == 0
    policy = json.loads(policy_path.read_text())
    hidden = policy["lstm"]["hidden_size"]
    obs = _observations(policy["observation_size"])
    dones = np.random.default_rng(2).random(N) < 0.04
    dones[0] = True
    model, state, outputs = _session(out), np.zeros((1, 2 * hidden), np.float32), []
    for x, done in zip(obs, dones):
        if done:  # an episode starts: zeros, as docs/onnx.md says
            state[:] = 0
        output, state = model.run(None, {"obs": x[None], "state_ins": state})
        outputs.append(output[0])
    engine, _ = policy_forward(policy_path, obs, dones=dones)
    assert np.abs(np.array(outputs) - engine).max() < 1e-5


@pytest.mark.slow
def test_sb3_ppo_exported_by_godot_rl_plays_in_the_engine_as_sb3_acts(headless_export, tmp_path):
    """A short SB3 PPO training through godot-rl's StableBaselinesGodotEnv on our export, exported by godot-rl's
    export_model_as_onnx as it comes (torch 2.13's default exporter, with onnxscript), then imported: the engine's
    actions equal SB3's deterministic predictions."""
    from stable_baselines3 import PPO

    from godot_rl.wrappers.onnx.stable_baselines_export import export_model_as_onnx
    from godot_rl.wrappers.stable_baselines_wrapper import StableBaselinesGodotEnv
    from test_playback import python_returns

    env = StableBaselinesGodotEnv(env_path=str(headless_export), show_window=False, seed=0, n_parallel=1, speedup=8,
                                  port=free_port())
    try:
        torch.manual_seed(0)  # not PPO(seed=): it would call VecEnv.seed, which godot-rl's wrapper does not implement
        model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=128, n_epochs=2, verbose=0)
        model.learn(total_timesteps=2 * 32 * env.num_envs)
    finally:
        env.close()
    export_model_as_onnx(model, str(tmp_path / "sb3.onnx"))  # it verifies itself against SB3 (10 observations)
    result = godot_ppo_child("import-policy", str(tmp_path / "sb3.onnx"), "--env-id", "ball_chase", "-o",
                             str(tmp_path / "p.json"))
    assert result.returncode == 0, result.stderr
    obs = _observations(12)
    sb3_actions, _ = model.predict({"obs": obs}, deterministic=True)
    _, engine_actions = policy_forward(tmp_path / "p.json", obs)
    engine = np.array([a["move"] for a in engine_actions])
    assert np.abs(engine - sb3_actions).max() < 1e-5
    # the same seed, SB3 acting from Python and the imported policy inside the engine: the same returns. Actions equal
    # to 1e-6 still part after many steps (an agent that grazes a wall in one and not the other: -1), so the episodes
    # are short and many, where one such parting moves the mean by 1/128.
    in_engine = evaluate_in_engine(tmp_path / "p.json", "ball_chase", episodes=128, seed=11, agents=16,
                                            timeout=90, max_episode_steps=100)
    from_python, _ = python_returns(lambda o: model.predict({"obs": o}, deterministic=True)[0], 128, 16, seed=11,
                                    max_episode_steps=100)
    e, p = np.mean(in_engine["returns"]), np.mean(from_python)
    assert abs(e - p) <= max(0.05 * abs(p), 0.1), (in_engine["returns"], from_python)


class _Spaces(gym.Env):
    """A gymnasium env with the given spaces (SB3 needs one to build a policy; nothing is stepped)."""

    def __init__(self, n_obs, action_space):
        self.observation_space = gym.spaces.Dict({"obs": gym.spaces.Box(-1.0, 1.0, (n_obs,), np.float32)})
        self.action_space = action_space

    def reset(self, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("sizes", [[2], [3, 2]])  # one discrete key, two (godot-rl makes them a MultiDiscrete)
def test_sb3_discrete_and_multi_key_models_import(headless_export, tmp_path, sizes):
    from stable_baselines3 import PPO

    from godot_rl.wrappers.onnx.stable_baselines_export import export_model_as_onnx

    torch.manual_seed(1)
    model = PPO("MultiInputPolicy", _Spaces(5, gym.spaces.MultiDiscrete(sizes)), n_steps=64, verbose=0)
    export_model_as_onnx(model, str(tmp_path / "m.onnx"))
    keys = {f"key{i}": {"action_type": "discrete", "size": n} for i, n in enumerate(sizes)}
    game = {"env": "g", "n_agents": 1, "observation_space": {"obs": {"size": [5], "space": "box"}}, "action_space": keys}
    write_policy(tmp_path / "m.json", onnx_import.import_policy(tmp_path / "m.onnx", game))
    obs = _observations(5, seed=4)
    sb3_actions, _ = model.predict({"obs": obs}, deterministic=True)
    _, engine = policy_forward(tmp_path / "m.json", obs)
    assert np.array([[a[k] for k in keys] for a in engine]).tolist() == sb3_actions.tolist()


@pytest.mark.slow
def test_a_model_exported_as_godot_rls_cleanrl_example_exports_it_imports(headless_export, tmp_path):
    """godot-rl's examples/clean_rl_example.py --onnx_export_path: its actor's mean (64-64 tanh) behind a module that
    passes state_ins through, exported with torch.onnx.export as it comes (the default exporter: onnxscript), opset
    15 and a dynamic batch; imported for ball_chase, the engine's outputs are the actor's."""

    class OnnxPolicy(nn.Module):  # as the example writes it
        def __init__(self, actor_mean):
            super().__init__()
            self.actor_mean = actor_mean

        def forward(self, obs, state_ins):
            return self.actor_mean(obs), state_ins

    torch.manual_seed(2)
    actor_mean = nn.Sequential(nn.Linear(12, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)).eval()
    batch = {name: {0: "batch_size"} for name in ("obs", "state_ins", "output", "state_outs")}
    policy = OnnxPolicy(actor_mean).eval()
    torch.onnx.export(policy, args=(torch.zeros(1, 12), torch.zeros(1)), f=str(tmp_path / "c.onnx"), opset_version=15,
                      input_names=["obs", "state_ins"], output_names=["output", "state_outs"], dynamic_axes=batch)
    assert cli.main(["import-policy", str(tmp_path / "c.onnx"), "--env-id", "ball_chase", "-o",
                     str(tmp_path / "c.json")]) == 0
    obs = _observations(12, seed=5)
    engine, _ = policy_forward(tmp_path / "c.json", obs)
    with torch.no_grad():
        assert np.abs(actor_mean(torch.from_numpy(obs)).numpy() - engine).max() < 1e-5


class _Normalised(nn.Module):
    """A hand-made policy with the operators of other exporters: the normaliser as Sub/Div/Clip, ReLU and Sigmoid
    layers, a Slice of the output rows, a final Softmax (optional)."""

    def __init__(self, softmax=False):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.mean, self.std = torch.randn(6, generator=gen), torch.rand(6, generator=gen) + 0.5
        self.l1, self.l2, self.l3 = nn.Linear(6, 16), nn.Linear(16, 8), nn.Linear(8, 7)
        self.softmax = softmax

    def forward(self, obs, state_ins):
        x = torch.clamp((obs - self.mean) / self.std, -5.0, 5.0)
        x = torch.relu(self.l1(x))
        x = torch.sigmoid(self.l2(x)) * 2.0 - 1.0
        out = self.l3(x)[:, 1:6]  # 5 of the 7 rows: a discrete key of 3 and one of 2
        return (torch.softmax(out, dim=1) if self.softmax else out), state_ins


def _export(module, path):
    with torch.no_grad():
        torch.onnx.export(module, (torch.zeros(1, 6), torch.zeros(1)), str(path), dynamo=False, opset_version=17,
                          input_names=["obs", "state_ins"], output_names=["output", "state_outs"],
                          dynamic_axes={"obs": {0: "batch"}, "state_ins": {0: "batch"}})


GAME = {"env": "hand_made", "n_agents": 1, "observation_space": {"obs": {"size": [6], "space": "box"}},
        "action_space": {"turn": {"action_type": "discrete", "size": 3}, "fire": {"action_type": "discrete", "size": 2}}}


def test_imported_operators_play_with_the_same_numbers(headless_export, tmp_path):
    _export(_Normalised(), tmp_path / "m.onnx")
    policy = onnx_import.import_policy(tmp_path / "m.onnx", GAME)
    assert [layer["activation"] for layer in policy["layers"]] == ["relu", "sigmoid", "linear"]
    assert policy["obs_normalization"]["clip"] == 5.0 and policy["version"] == 3
    write_policy(tmp_path / "m.json", policy)
    obs = _observations(6, seed=3)
    output, _ = _session(tmp_path / "m.onnx").run(None, {"obs": obs, "state_ins": np.zeros(N, np.float32)})
    engine, actions = policy_forward(tmp_path / "m.json", obs)
    assert np.abs(output - engine).max() < 1e-5
    assert [a["turn"] for a in actions] == output[:, :3].argmax(1).tolist()
    assert [a["fire"] for a in actions] == output[:, 3:].argmax(1).tolist()
    # a final Softmax is dropped: the engine's argmax of the logits picks what the probabilities' argmax picks
    _export(_Normalised(softmax=True), tmp_path / "s.onnx")
    write_policy(tmp_path / "s.json", onnx_import.import_policy(tmp_path / "s.onnx", GAME))
    probabilities, _ = _session(tmp_path / "s.onnx").run(None, {"obs": obs, "state_ins": np.zeros(N, np.float32)})
    _, actions = policy_forward(tmp_path / "s.json", obs)
    assert [a["turn"] for a in actions] == probabilities[:, :3].argmax(1).tolist()


class _TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 5)

    def forward(self, obs, other, state_ins):
        return self.l1(obs + other), state_ins


class _Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 5)

    def forward(self, obs, state_ins):
        return torch.nn.functional.elu(self.l1(obs)), state_ins


def test_bad_models_are_refused_in_one_line_and_nothing_is_written(headless_export, tmp_path, monkeypatch, capsys):
    (tmp_path / "text.onnx").write_text("not a model\n")
    _export(_Unsupported(), tmp_path / "elu.onnx")
    _export(_Normalised(), tmp_path / "m.onnx")
    with torch.no_grad():
        torch.onnx.export(_TwoInputs(), (torch.zeros(1, 6), torch.zeros(1, 6), torch.zeros(1)),
                          str(tmp_path / "two.onnx"), dynamo=False, opset_version=17,
                          input_names=["obs", "other", "state_ins"], output_names=["output", "state_outs"])
    cases = [
        (["two.onnx", "--env-id", "ball_chase"], "2 inputs besides state_ins (obs, other)"),
        (["text.onnx", "--env-id", "ball_chase"], "not an ONNX model"),
        (["elu.onnx", "--env-id", "ball_chase"], "Elu node"),
        (["m.onnx", "--env-id", "ball_chase"], "the model takes 6 observations, but ball_chase gives 12"),
        (["m.onnx"], "name the game with --env-id"),
        (["missing.onnx", "--env-id", "ball_chase"], "no such file"),
    ]
    monkeypatch.chdir(tmp_path)
    for args, message in cases:
        assert cli.main(["import-policy", *args, "-o", str(tmp_path / "out.json")]) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
        assert not (tmp_path / "out.json").exists()
    with pytest.raises(PolicyFileError, match="mixes continuous and discrete"):
        onnx_import.import_policy(tmp_path / "m.onnx", {**GAME, "action_space": {
            "move": {"action_type": "continuous", "size": 3}, "fire": {"action_type": "discrete", "size": 2}}})
