"""In-engine policy playback: export, GDScript/PyTorch parity, in-engine evaluation, watching and recording under
Xvfb, and the game's refusal of bad policy files. Every test runs the real exported game."""

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from helpers import REPO, processes_mentioning, wait_for, wait_gone, xvfb_pid
from python_trainer.engine import in_engine, policy_file, recording
from python_trainer.tools import policy_export
from python_trainer.run import train
from python_trainer.agent import Agent
from python_trainer.checkpoint import save_checkpoint
from python_trainer.normalization import Normalizer
from python_trainer.run.train import Args
from python_trainer.variants.trained_agent import load_agent

POLICIES = REPO / "exports" / "policies"
COMMITTED_POLICY = POLICIES / "ball_chase.json"
COMMITTED_MODEL = POLICIES / "ball_chase_model.pt"
OBS_DIM = 12


def make_checkpoint(path: Path, action_space: gym.Space, seed: int = 0) -> Path:
    """A checkpoint with non-trivial weights (outputs of order 1, not ~0) and normalisation statistics that
    shift, scale and clip (some variances are tiny, so normalised values hit the +-10 clip)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    agent = Agent(OBS_DIM, action_space)
    for module in agent.actor:
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.orthogonal_(module.weight, 1.5)
            torch.nn.init.normal_(module.bias, 0.0, 0.3)
    normalizer = Normalizer(OBS_DIM, 1, 0.99, norm_obs=True, norm_reward=False)
    normalizer.obs_rms.mean = rng.normal(0.0, 0.3, OBS_DIM)
    normalizer.obs_rms.var = rng.uniform(1e-3, 2.0, OBS_DIM)
    optimizer = torch.optim.Adam(agent.parameters())
    obs_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    save_checkpoint(path, agent=agent, optimizer=optimizer, normalizer=normalizer, args=Args(env_id="ball_chase"),
                    global_step=1234, update=1, observation_space=obs_space, action_space=action_space)
    return path


def env_info(action_space: dict) -> dict:
    return {
        "type": "env_info", "n_agents": 1, "env": "parity_test",
        "observation_space": [{"obs": {"size": [OBS_DIM], "space": "box"}}],
        "action_space": [action_space],
    }


def torch_outputs(checkpoint, obs):
    loaded = load_agent(checkpoint)
    x = torch.from_numpy(loaded.normalizer.normalize_obs(obs, update=False))
    with torch.no_grad():
        return loaded.agent.actor(x).numpy().astype(np.float64), loaded


# ---------------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize(
    "kind, space, godot_actions",
    [
        ("discrete", gym.spaces.Discrete(3), {"choice": {"size": 3, "action_type": "discrete"}}),
        # two continuous keys: the network's outputs are laid out in sorted key order (move, then turn)
        ("continuous", gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
         {"turn": {"size": 1, "action_type": "continuous"}, "move": {"size": 2, "action_type": "continuous"}}),
        # keys of both kinds, a discrete one with 3 choices: outputs are the continuous means (aim, move), then the
        # discrete keys' logits (jump, then mode)
        ("hybrid", gym.spaces.Dict({"aim": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                                    "jump": gym.spaces.Discrete(3), "mode": gym.spaces.Discrete(2),
                                    "move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}),
         {"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 3, "action_type": "discrete"},
          "aim": {"size": 1, "action_type": "continuous"}, "mode": {"size": 2, "action_type": "discrete"}}),
    ],
)
def test_gdscript_forward_matches_pytorch(headless_export, tmp_path, kind, space, godot_actions):
    checkpoint = make_checkpoint(tmp_path / "model.pt", space)
    policy_path = policy_export.export_policy(checkpoint, env_info=env_info(godot_actions))
    assert policy_path == tmp_path / "model.policy.json"
    policy = json.loads(policy_path.read_text())
    assert policy["format"] == "godot-ppo-policy" and policy["version"] == (3 if kind == "discrete" else 5)  # log_std
    assert policy["action_rule"] == {"discrete": "argmax", "continuous": "clipped_mean", "hybrid": "per_key"}[kind]
    if kind == "hybrid":
        assert [k["key"] for k in policy["action_keys"]] == ["aim", "move", "jump", "mode"]
    else:
        assert [k["key"] for k in policy["action_keys"]] == sorted(godot_actions)

    obs = np.random.default_rng(1).uniform(-1.5, 1.5, (300, OBS_DIM)).astype(np.float32)
    outputs, actions = in_engine.policy_forward(policy_path, obs)
    expected, loaded = torch_outputs(checkpoint, obs)
    assert outputs.shape == expected.shape
    assert np.abs(expected).max() > 0.5, "the test network should give outputs of order 1"
    assert np.abs(outputs - expected).max() < 1e-5

    python_actions = loaded.act(obs, deterministic=True)
    if kind == "discrete":
        godot = np.array([a["choice"] for a in actions])
        top2 = np.sort(expected, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-5  # ties closer than the tolerance may go either way
        assert clear.mean() > 0.95
        np.testing.assert_array_equal(godot[clear], python_actions[clear])
        assert len(set(godot.tolist())) == 3, "every action should be chosen somewhere"
    elif kind == "continuous":
        godot = np.array([a["move"] + a["turn"] for a in actions])
        np.testing.assert_allclose(godot, python_actions, atol=1e-5, rtol=0)
        saturated = np.abs(expected) > 1.0 + 1e-5
        assert saturated.any() and (~saturated).any(), "the test should exercise the clip and the linear range"
        np.testing.assert_array_equal(godot[saturated], np.sign(expected[saturated]))
    else:  # the clipped mean per continuous key, the argmax per discrete key, each against the Python agent's
        assert set(python_actions) == {"aim", "move", "jump", "mode"}
        for key in ("aim", "move"):
            godot = np.array([a[key] for a in actions])
            np.testing.assert_allclose(godot, python_actions[key], atol=1e-5, rtol=0)
        means = expected[:, :3]
        saturated = np.abs(means) > 1.0 + 1e-5
        assert saturated.any() and (~saturated).any(), "the test should exercise the clip and the linear range"
        for key, (start, end) in (("jump", (3, 6)), ("mode", (6, 8))):
            godot = np.array([a[key] for a in actions])
            top2 = np.sort(expected[:, start:end], axis=1)[:, -2:]
            clear = top2[:, 1] - top2[:, 0] > 1e-5
            assert clear.mean() > 0.95
            np.testing.assert_array_equal(godot[clear], python_actions[key][clear])
            assert len(set(godot.tolist())) == end - start, f"every choice of {key} should be made somewhere"


def test_export_refuses_nan_weights(tmp_path):
    checkpoint = make_checkpoint(tmp_path / "model.pt", gym.spaces.Discrete(3))
    state = torch.load(checkpoint, weights_only=True)
    state["model"]["actor.2.weight"][3, 5] = float("nan")
    torch.save(state, checkpoint)
    with pytest.raises(in_engine.PlaybackError, match=r"layer 1 holds 1 NaN/inf weights"):
        policy_export.export_policy(checkpoint, env_info=env_info({"choice": {"size": 3, "action_type": "discrete"}}))
    assert not (tmp_path / "model.policy.json").exists()


def test_export_checks_the_game_spaces(tmp_path):
    checkpoint = make_checkpoint(tmp_path / "model.pt", gym.spaces.Discrete(3))
    with pytest.raises(in_engine.PlaybackError, match=r"the actor's action space is Discrete\(3\), but parity_test's "
                       r"action keys \[choice \(discrete, 4\)\] make Discrete\(4\)"):
        policy_export.export_policy(checkpoint, env_info=env_info({"choice": {"size": 4, "action_type": "discrete"}}))
    hybrid = make_checkpoint(tmp_path / "hybrid.pt", gym.spaces.Dict(
        {"jump": gym.spaces.Discrete(2), "move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}))
    with pytest.raises(in_engine.PlaybackError, match=r"action keys \[jump \(discrete, 3\), move \(continuous, 2\)\]"):
        policy_export.export_policy(hybrid, env_info=env_info({"move": {"size": 2, "action_type": "continuous"},
                                                          "jump": {"size": 3, "action_type": "discrete"}}))


@pytest.mark.slow
def test_policy_written_by_training_equals_the_export_of_its_checkpoint(headless_export, tmp_path):
    # training writes RUN_DIR/policy.json from the actor in memory; exporting the checkpoint file must give the same
    argv = ["--env-id", "ball_chase", "--agents-per-instance", "2", "--num-steps", "32", "--total-timesteps", "128",
            "--eval-episodes", "0", "--checkpoint-every", "1", "--run-dir-root", str(tmp_path / "runs")]
    assert train.main(argv) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    written = policy_file.read_policy(run_dir / "policy.json")
    exported = policy_file.read_policy(policy_export.export_policy(run_dir / "model.pt", tmp_path / "exported.json"))
    assert written["source"].pop("created") and exported["source"].pop("created")
    assert written == exported
    assert written["source"]["checkpoint"] == "model.pt" and written["source"]["global_step"] == 128
    assert written["obs_normalization"] is not None  # continuous actions: normalised observations, statistics saved


def test_export_policy_command_without_checkpoint(tmp_path):
    result = subprocess.run([sys.executable, "-m", "python_trainer", "export-policy", str(tmp_path)],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert "godot-ppo export-policy: error:" in result.stderr
    assert str(tmp_path) in result.stderr and "model.pt" in result.stderr and "checkpoint.pt" in result.stderr


# ---------------------------------------------------------------------------------------------- the committed policy
def python_returns(policy, episodes, agents, seed, max_episode_steps=None):
    """Per-agent-quota episode returns from Python, with ``policy(obs) -> actions``; also the observations seen."""
    from python_trainer import make_vec_env

    envs = make_vec_env("ball_chase", num_instances=1, agents_per_instance=agents, seed=seed,
                        max_episode_steps=max_episode_steps)
    quota = episodes // agents
    per_agent = [[] for _ in range(agents)]
    seen = []
    try:
        obs, _ = envs.reset(seed=seed)
        for step in range(20_000):
            if step % 20 == 0:
                seen.append(obs.copy())
            obs, _, _, _, infos = envs.step(policy(obs))
            if "_episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    if len(per_agent[i]) < quota:
                        per_agent[i].append(float(infos["episode"]["r"][i]))
            if all(len(r) >= quota for r in per_agent):
                break
    finally:
        envs.close()
    return [r for rs in per_agent for r in rs], np.concatenate(seen)


@pytest.mark.slow
def test_committed_policy_scores_the_same_with_1_and_16_arenas(headless_export):
    """The physics world does not depend on how many arenas an instance lays out (nor on the view)."""
    one = in_engine.evaluate_in_engine(COMMITTED_POLICY, agents=1, episodes=8, seed=0, timeout=90)
    sixteen = in_engine.evaluate_in_engine(COMMITTED_POLICY, agents=16, episodes=32, seed=0, timeout=90)
    assert one["mean_return"] > 20, one  # it plays well in both...
    assert abs(one["mean_return"] - sixteen["mean_return"]) < 0.1 * sixteen["mean_return"], (one, sixteen)


@pytest.mark.slow
def test_committed_policy_in_engine_matches_python(headless_export):
    assert COMMITTED_POLICY.is_file() and COMMITTED_MODEL.is_file()
    loaded = load_agent(COMMITTED_MODEL)
    # 32 episodes cut to 300 steps (5 s of game time; the trained agent never ends one earlier), 2 per agent.
    agents, episodes, steps = 16, 32, 300

    engine = in_engine.evaluate_in_engine(COMMITTED_POLICY, "ball_chase", episodes=episodes, seed=11, agents=agents,
                                         timeout=90, max_episode_steps=steps)
    assert engine["episodes"] == episodes and len(engine["returns"]) == episodes
    python, seen = python_returns(lambda o: loaded.act(o, deterministic=True), episodes, agents, seed=5,
                                  max_episode_steps=steps)
    rng = np.random.default_rng(0)
    random, _ = python_returns(lambda o: rng.uniform(-1, 1, (len(o), 2)).astype(np.float32), episodes, agents, seed=5,
                               max_episode_steps=steps)

    e, p, r = np.array(engine["returns"]), np.array(python), np.array(random)
    # Same policy, different random arenas: the means agree within noise (4 standard errors, plus 2%).
    se = np.sqrt(e.var(ddof=1) / len(e) + p.var(ddof=1) / len(p))
    assert abs(e.mean() - p.mean()) < 4 * se + 0.02 * abs(p.mean()), (e.mean(), p.mean(), se)
    assert e.mean() > r.mean() + 5, (e.mean(), r.mean())  # about 10 against 0 in these 300 steps

    # The committed file is the committed model: GDScript on observations of a real game matches PyTorch.
    outputs, _ = in_engine.policy_forward(COMMITTED_POLICY, seen[:400])
    expected, _ = torch_outputs(COMMITTED_MODEL, seen[:400].astype(np.float32))
    assert np.abs(outputs - expected).max() < 1e-5


# ---------------------------------------------------------------------------------------------- watching, recording
def _read_until(proc, marker: str, timeout: float) -> str:
    """stdout of ``proc`` up to and including the line holding ``marker``, within ``timeout`` seconds."""
    import selectors
    import time

    text, deadline = "", time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while marker not in text:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {marker!r} line within {timeout}s; got {text!r}"
            if sel.select(timeout=remaining):
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, f"play exited ({proc.wait()}) before printing {marker!r}: {text!r} {proc.stderr.read()!r}"
                text += chunk.decode(errors="replace")
    return text


@pytest.mark.slow
def test_play_records_a_gif_under_xvfb(windowed_export, tmp_path, monkeypatch):
    from PIL import Image

    monkeypatch.delenv("DISPLAY", raising=False)
    gif = tmp_path / "clip.gif"
    seed = 424242 + os.getpid() % 1000  # marks our game process (--env_seed=...) among other helpers'
    cmd = [sys.executable, "-m", "python_trainer", "play", str(COMMITTED_POLICY), "--seconds", "3", "--seed", str(seed),
           "--record", str(gif), "--record-seconds", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    assert wait_gone([xvfb_pid(result.stdout)], timeout=5) == []
    assert wait_gone(processes_mentioning(f"--env_seed={seed}"), timeout=5) == []

    with Image.open(gif) as im:
        assert im.n_frames >= 20  # 2 s at 15 fps = 30
        assert im.width == recording.GIF_WIDTH
        im.seek(im.n_frames // 2)
        frame = np.asarray(im.convert("RGB")).astype(np.int32)
    luminance = frame.mean(axis=2)
    assert luminance.std() > 10, "a frame should show arenas, not a uniform image"
    overlay = luminance[: frame.shape[0] // 10, : frame.shape[1] // 3]
    assert (overlay > 120).sum() > 30, "the overlay text (top left) should be visible"


@pytest.mark.slow
def test_play_watch_under_xvfb_ends_cleanly(windowed_export, tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    seed = 525252 + os.getpid() % 1000
    cmd = [sys.executable, "-m", "python_trainer", "play", str(COMMITTED_POLICY), "--seconds", "1", "--agents", "2",
           "--seed", str(seed)]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "played" in result.stdout
    assert wait_gone([xvfb_pid(result.stdout)], timeout=5) == []
    assert wait_gone(processes_mentioning(f"--env_seed={seed}"), timeout=5) == []


def test_play_keeps_the_first_script_error_of_the_game_it_follows(tmp_path):
    """play fails (exit 1) after a game that raised a script error: Godot goes on after one, and the person watched
    a broken game. Its follower shows the error and keeps it for that line."""
    from python_trainer.envs.logs import CappedLog
    from python_trainer.tools.play import _follow

    proc = subprocess.Popen(["sh", "-c", "echo 'SCRIPT ERROR: _physics_process: Invalid get index' >&2; "
                                         "echo '   At: res://player.gd:9.' >&2; echo '{\"other\": 1}'"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    errors: list = []
    log = CappedLog(tmp_path / "play.log")
    try:
        assert _follow(proc, log, None, lambda line: None, None, errors) is False
    finally:
        proc.wait(timeout=10)
        log.close()
    assert errors == ["SCRIPT ERROR: _physics_process: Invalid get index"]


# ---------------------------------------------------------------------------------------------- bad policy files
def _first_number_after(text: str, key: str):
    i = text.index(key) + len(key)
    j = min(text.index(",", i), text.index("]", i))
    return i, j


def _bad_files(tmp: Path) -> dict:
    text = COMMITTED_POLICY.read_text()
    good = json.loads(text)

    def write(name, content):
        path = tmp / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    other_game = dict(good, env="cart_pole")
    layers = json.loads(text)
    layers["layers"][1]["weight"] = [row[:-1] for row in layers["layers"][1]["weight"]]
    i, j = _first_number_after(text, '"weight":[[')
    bi, bj = _first_number_after(text, '"bias":[')
    return {
        "missing": (tmp / "missing.json", "does not exist"),
        "truncated": (write("truncated", text[: len(text) // 2]), "not valid JSON"),
        "not_json": (write("not_json", "this is not a policy\n"), "not valid JSON"),
        "other_game": (write("other_game", other_game), 'trained on "cart_pole", not "ball_chase"'),
        "layer_sizes": (write("layer_sizes", layers), "layer 1 expects 64 inputs"),
        "nan_weight": (write("nan_weight", text[:i] + "NaN" + text[j:]), "NaN"),
        "inf_bias": (write("inf_bias", text[:bi] + "-1e999" + text[bj:]), "not a finite number"),
        "version": (write("version", dict(good, version=6)), "unknown policy file version 6"),
    }


@pytest.mark.parametrize("case", ["missing", "truncated", "not_json", "other_game", "layer_sizes", "nan_weight",
                                  "inf_bias", "version"])
def test_game_refuses_bad_policy_files(headless_export, tmp_path, case):
    path, expected = _bad_files(tmp_path)[case]
    cmd = [str(headless_export), "--env=ball_chase", "--agents=2", f"--policy={path}", "--eval_episodes=1",
           "--fixed-fps", "60"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("rl_sync: error: policy file")]
    assert errors, result.stderr
    assert str(path) in errors[0] and expected in errors[0], errors[0]
    assert '"eval"' not in result.stdout


def test_evaluate_in_engine_reports_the_game_error(headless_export, tmp_path):
    path, _ = _bad_files(tmp_path)["other_game"]
    with pytest.raises(in_engine.PlaybackError, match="trained on"):
        in_engine.evaluate_in_engine(path, "ball_chase", episodes=1, agents=1, timeout=20)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["engine", "python"])
def test_play_ctrl_c_ends_everything(windowed_export, monkeypatch, mode):
    monkeypatch.delenv("DISPLAY", raising=False)
    seed = 626262 + 2 * (os.getpid() % 1000) + (mode == "python")
    src = COMMITTED_MODEL if mode == "python" else COMMITTED_POLICY
    cmd = [sys.executable, "-m", "python_trainer", "play", str(src), "--agents", "2", "--seed", str(seed)]
    proc = subprocess.Popen(cmd + (["--python"] if mode == "python" else []), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        xvfb = xvfb_pid(_read_until(proc, "playing", timeout=30))
        games = wait_for(lambda: processes_mentioning(f"--env_seed={seed}"), 30, "game process", proc)
        proc.send_signal(2)  # SIGINT, as Ctrl-C in a terminal
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:  # the test failed half-way: SIGTERM lets play end the game and Xvfb itself
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                for pid in processes_mentioning(f"--env_seed={seed}"):
                    psutil.Process(pid).kill()
    assert wait_gone(games + [xvfb], timeout=5) == []
