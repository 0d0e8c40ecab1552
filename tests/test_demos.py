"""Demonstrations (issue 25): the file format both ways (ours and godot_rl_agents' demo.json), every bad input in one
line, behavioural cloning under every action space (and --lstm), the cloning loss in PPO's auxiliary slot with its
TensorBoard tags, --total-timesteps 0, and the addon's recorder in the real engine: a --policy driver, appending and
refusing, an unwritable path, and the keyboard in the windowed export under Xvfb driven by xdotool."""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import read_scalars, run_dirs, wait_for, wait_gone
from python_trainer import cli
from python_trainer.variants import cloning
from python_trainer.run import train
from python_trainer.agent import Agent
from python_trainer.demos import DemoError, episode, load_demos, write_demos
from python_trainer.normalization import Normalizer
from python_trainer.variants.recurrent import RecurrentAgent

HYBRID = {"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 2, "action_type": "discrete"}}
HYBRID_SPACE = gym.spaces.Dict({"jump": gym.spaces.Discrete(2), "move": gym.spaces.Box(-1, 1, (2,), np.float32)})


# ---------------------------------------------------------------------------------------------------------------------
# The format: theirs and ours, every space, every bad input
# ---------------------------------------------------------------------------------------------------------------------
def test_godot_rl_agents_shape_loads(tmp_path):
    """Their recorder's file: [[observations, actions], ...], one more observation than actions, each action a flat
    list (a bare number accepted), no meta."""
    path = tmp_path / "demo.json"
    path.write_text(json.dumps([[[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], [[1], [2]]], [[[0, 0], [1, 1]], [0]]]))
    demos = load_demos([path], 2, gym.spaces.Discrete(3))
    assert demos.steps == 3 and demos.episodes == 2
    assert demos.actions.tolist() == [1, 2, 0] and demos.actions.dtype == np.int64
    np.testing.assert_allclose(demos.obs, [[0.1, 0.2], [0.3, 0.4], [0, 0]], rtol=1e-6)
    assert demos.starts.tolist() == [True, False, True] and demos.returns == [None, None]


def test_every_space_maps_to_the_agents_layout(tmp_path):
    """A row in the file's key order (meta's action_keys) becomes the agent's row: continuous keys first, then one
    index per discrete key (agent.action_heads)."""
    obs = [[0.0], [1.0]]
    cases = [  # (declared, gym space, row in the file, agent's row)
        ({"move": {"size": 2, "action_type": "continuous"}}, gym.spaces.Box(-1, 1, (2,)), [0.5, 2.0], [0.5, 1.0]),
        ({"a": {"size": 3, "action_type": "discrete"}, "b": {"size": 2, "action_type": "discrete"}},
         gym.spaces.MultiDiscrete([3, 2]), [2, 1], [2, 1]),
        (HYBRID, HYBRID_SPACE, [1, 0.25, -0.5], [0.25, -0.5, 1]),
    ]
    for declared, space, row, expected in cases:
        keys = sorted([k, v["action_type"], v["size"]] for k, v in declared.items())
        write_demos(tmp_path / "d.json", [episode(obs, [row], game="g", action_space=declared, action_keys=keys,
                                                   rewards=[1.0], truncated=False)])
        demos = load_demos([tmp_path / "d.json"], 1, space, declared, "g")
        np.testing.assert_allclose(demos.actions, [expected])
        assert demos.returns == [1.0]


def _bad(tmp_path, content, obs_dim=2, space=gym.spaces.Discrete(3), declared=None, env_id=None):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DemoError) as e:
        load_demos([path], obs_dim, space, declared, env_id)
    message = str(e.value)
    assert "\n" not in message and str(path) in message
    return message


def test_bad_files_say_the_file_the_episode_and_the_fix(tmp_path):
    good = [[[0, 0], [1, 1]], [[1]]]
    assert "empty" in _bad(tmp_path, "")
    assert "truncated" in _bad(tmp_path, json.dumps([good, good])[:-5])
    assert "not valid JSON" in _bad(tmp_path, "obs,actions\n1,2")
    assert "episode 1: 3 observations for 1 actions" in _bad(tmp_path, [good, [[[0, 0], [1, 1], [2, 2]], [[1]]]])
    assert "episode 0: observation 1 holds nan" in _bad(tmp_path, '[[[[0, 0], [NaN, 1]], [[1]]]]')
    assert "episode 0: observation 0 has 3 values, not 2" in _bad(tmp_path, [[[[0, 0, 0], [1, 1, 1]], [[1]]]])
    assert "key 'None' is 5, not an index in [0, 3)" in _bad(tmp_path, [[[[0, 0], [1, 1]], [[5]]]])
    meta = {"game": "pong", "action_space": {"move": {"size": 3, "action_type": "discrete"}}}
    assert "episode 0: recorded in the game 'pong', not 'sparse_goal'" in _bad(
        tmp_path, [[[[0, 0], [1, 1]], [[1]], meta]], env_id="sparse_goal")
    declared = {"move": {"size": 5, "action_type": "discrete"}}
    assert "episode 0: its action keys" in _bad(tmp_path, [[[[0, 0], [1, 1]], [[1]], {**meta, "game": "g"}]],
                                                declared=declared, env_id="g")
    assert "cannot read" in str(pytest.raises(DemoError, load_demos, [tmp_path / "none.json"], 2,
                                              gym.spaces.Discrete(3)).value)


# ---------------------------------------------------------------------------------------------------------------------
# Behavioural cloning: every space, --lstm
# ---------------------------------------------------------------------------------------------------------------------
def _synthetic(space, n=400, seed=0):
    """Demonstrations whose action is a function of the observation (the sign of its coordinates)."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    if isinstance(space, gym.spaces.Discrete):
        actions = (obs[:, 0] > 0).astype(np.int64)
    elif isinstance(space, gym.spaces.Box):
        actions = np.sign(obs).astype(np.float32) * 0.5
    elif isinstance(space, gym.spaces.MultiDiscrete):
        actions = (obs > 0).astype(np.float32)
    else:  # hybrid: move (2 continuous) then jump (an index)
        actions = np.concatenate([np.sign(obs) * 0.5, (obs[:, :1] > 0)], axis=1).astype(np.float32)
    starts = np.zeros(n, bool)
    starts[::20] = True
    from python_trainer.demos import Demos
    return Demos(obs, actions, starts, [None] * int(starts.sum()))


@pytest.fixture
def one_thread():
    """One torch thread, as `godot-ppo train` runs (two threads on a loaded 2-core machine wait on each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("space, recurrent", [
    (gym.spaces.Discrete(2), False), (gym.spaces.Box(-1, 1, (2,)), False), (gym.spaces.MultiDiscrete([2, 2]), False),
    (HYBRID_SPACE, False), (gym.spaces.Discrete(2), True), (HYBRID_SPACE, True),
], ids=["discrete", "box", "multidiscrete", "hybrid", "lstm-discrete", "lstm-hybrid"])
def test_pretraining_clones_the_demonstrations(space, recurrent, one_thread):
    torch.manual_seed(0)
    agent = RecurrentAgent(2, space, 16) if recurrent else Agent(2, space)
    demos = _synthetic(space)
    normalizer = Normalizer(2, 1, 0.99, True, False)
    cloning.seed_normalizer(normalizer, demos)
    assert normalizer.obs_rms.count > 400
    args = cloning.CloningArgs(bc_epochs=40 if recurrent else 60, bc_batch_size=128 if recurrent else 64,
                               bc_learning_rate=3e-3)
    before = cloning.DemoBatches(agent, demos).fit(np.arange(cloning.DemoBatches(agent, demos).units), normalizer)
    fit = cloning.pretrain(agent, normalizer, demos, args, seed=0, log=lambda _: None)
    assert fit["demos/log_likelihood"] > before["demos/log_likelihood"] + 0.5
    if "demos/accuracy" in fit:
        assert fit["demos/accuracy"] > 0.9
    if "demos/action_error" in fit:
        assert fit["demos/action_error"] < 0.2


def test_the_cloning_loss_anneals_to_zero():
    agent = Agent(2, gym.spaces.Discrete(2))
    loss = cloning.CloningLoss(agent, Normalizer(2, 1, 0.99, False, False), _synthetic(gym.spaces.Discrete(2)),
                               cloning.CloningArgs(bc_coef=0.4, bc_anneal_steps=1000), seed=0)
    assert loss.weight(0) == pytest.approx(0.4) and loss.weight(500) == pytest.approx(0.2) and loss.weight(2000) == 0
    assert isinstance(loss.loss(agent, 0), torch.Tensor) and loss.loss(agent, 1000) == 0.0
    assert {"losses/bc_loss", "charts/bc_coef", "demos/accuracy", "demos/log_likelihood"} <= set(loss.scalars(agent, 0))


# ---------------------------------------------------------------------------------------------------------------------
# godot-ppo train --demos (CartPole-v1: no engine needed for the loop)
# ---------------------------------------------------------------------------------------------------------------------
def _cartpole_demos(path, episodes=4, seed=0):
    """CartPole demonstrations from the textbook controller (push toward the pole's lean), in godot_rl_agents' shape."""
    env = gym.make("CartPole-v1")
    out = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        observations, actions = [obs.tolist()], []
        for _ in range(200):
            a = int(obs[2] + 0.5 * obs[3] > 0)
            obs, _, terminated, truncated, _ = env.step(a)
            observations.append(obs.tolist())
            actions.append([a])
            if terminated or truncated:
                break
        out.append([observations, actions])
    write_demos(path, out)
    return path


@pytest.mark.slow
def test_train_with_demos_logs_cloning_and_total_timesteps_zero_needs_demos(tmp_path, capsys):
    demos = _cartpole_demos(tmp_path / "demo.json")
    root = tmp_path / "runs"
    argv = ["--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "128", "--eval-episodes", "2",
            "--run-dir-root", str(root), "--demos", str(demos), "--bc-epochs", "60"]
    assert train.main(argv + ["--total-timesteps", "512"]) == 0
    (run_dir,) = run_dirs(root)
    scalars = read_scalars(run_dir)
    for tag in ("losses/bc_loss", "demos/accuracy", "demos/log_likelihood", "charts/bc_coef"):
        assert tag in scalars, tag
    assert scalars["demos/accuracy"][0][0] == 0 and scalars["demos/accuracy"][0][1] > 0.8  # the clone, before PPO
    out = capsys.readouterr().out
    assert "demonstrations: 4 demonstration episodes" in out and "behavioural cloning: epoch 60/60" in out

    assert train.main(argv + ["--total-timesteps", "0", "--lstm", "--num-minibatches", "2"]) == 0  # the clone alone
    clone = [d for d in run_dirs(root) if d != run_dir][0]
    assert (clone / "model.pt").exists() and "eval: deterministic policy, 2 episodes" in capsys.readouterr().out

    assert cli.main(["train", "--env-id", "CartPole-v1", "--total-timesteps", "0", "--run-dir-root", str(root)]) == 2
    assert "--total-timesteps 0 trains nothing: give --demos" in capsys.readouterr().err
    assert cli.main(["train", "--env-id", "CartPole-v1", "--bc-coef", "1", "--run-dir-root", str(root)]) == 2
    assert "--bc-coef is for behavioural cloning: add --demos" in capsys.readouterr().err
    (tmp_path / "cut.json").write_text(demos.read_text()[:-3])
    assert cli.main(["train", *argv[:-4], "--demos", str(tmp_path / "cut.json"), "--total-timesteps", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'cut.json'}: not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_a_cloning_loss_that_becomes_nan_stops_the_run_in_one_line_and_saves_no_model(tmp_path, capsys):
    demos = _cartpole_demos(tmp_path / "demo.json", episodes=1)
    root = tmp_path / "runs"
    argv = ["train", "--env-id", "CartPole-v1", "--num-envs", "2", "--demos", str(demos), "--bc-epochs", "3",
            "--bc-learning-rate", "1e39", "--total-timesteps", "0", "--run-dir-root", str(root)]
    assert cli.main(argv) == 2  # before: exit 0, and a model.pt of NaN
    err = capsys.readouterr().err.strip()
    assert err.startswith("godot-ppo train: error: behavioural cloning diverged: the ") and "\n" not in err
    assert "nothing was saved. Lower --bc-learning-rate (now 1e+39)" in err
    assert not list(root.glob("*/model.pt")) and not list(root.glob("*/checkpoint.pt"))
    assert not root.exists() or not list(root.iterdir())  # a new run that never trained leaves no folder


# ---------------------------------------------------------------------------------------------------------------------
# The addon's recorder, in the engine
# ---------------------------------------------------------------------------------------------------------------------
def _game(binary, *args, timeout=90):
    return subprocess.run([str(binary), *args, "--fixed-fps", "60"], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_policy_driven_recording_trains_a_clone_that_plays_in_the_engine(headless_export, tmp_path):
    """jumper (hybrid actions) driven by --policy=random: the recorded file loads, a clone trains from it with
    --total-timesteps 0, and its policy.json plays in the engine; a second recording appends, another game's refuses
    and leaves the file as it was, an unwritable path fails at the start, in one line each."""
    out = tmp_path / "demos.json"
    args = ["--env=jumper", "--policy=random", f"--record_demos={out}", "--record_episodes=2", "--max_episode_steps=30"]
    result = _game(headless_export, *args)
    assert result.returncode == 0, result.stderr
    episodes = json.loads(out.read_text())
    assert len(episodes) == 2
    for obs, actions, meta in episodes:
        assert len(obs) == len(actions) + 1 == 31 and len(meta["rewards"]) == 30
        assert meta["game"] == "jumper" and meta["truncated"] and not meta["terminated"]
        assert meta["action_keys"] == [["jump", "discrete", 2], ["move", "continuous", 2]]
        assert all(a[0] in (0, 1) and len(a) == 3 for a in actions)
    assert _game(headless_export, *args[:-2], "--record_episodes=1", "--max_episode_steps=30").returncode == 0
    assert len(json.loads(out.read_text())) == 3  # appended

    before = out.read_bytes()
    refused = _game(headless_export, "--env=sparse_goal", "--policy=random", f"--record_demos={out}")
    assert refused.returncode == 1 and out.read_bytes() == before
    assert f"--record_demos={out}: episode 0 is of the game 'jumper', not 'sparse_goal'" in refused.stderr
    unwritable = _game(headless_export, "--env=jumper", "--policy=random", f"--record_demos={tmp_path}/no/such/d.json")
    assert unwritable.returncode == 1 and "cannot be written" in unwritable.stderr
    benchmark = _game(headless_export, "--env=jumper", "--benchmark_steps=10", f"--record_demos={tmp_path}/b.json")
    assert benchmark.returncode == 1 and "--record_demos records the keyboard or a --policy" in benchmark.stderr

    theirs = write_demos(tmp_path / "theirs.json", [[obs, actions] for obs, actions, _ in json.loads(out.read_text())])
    root = tmp_path / "runs"  # ours and godot_rl_agents' shape (no meta: the env_info's key order) in one run
    assert train.main(["--env-path", str(headless_export), "--env-id", "jumper", "--demos", str(out), str(theirs),
                       "--total-timesteps", "0", "--bc-epochs", "5", "--eval-episodes", "0",
                       "--run-dir-root", str(root)]) == 0
    (run_dir,) = run_dirs(root)
    several = subprocess.run([sys.executable, "-m", "python_trainer", "train", "--env-path", str(headless_export),
                              "--env-id", "tag", "--demos", str(out), "--total-timesteps", "0", "--run-dir-root",
                              str(tmp_path / "tag")], capture_output=True, text=True, timeout=120)
    assert several.returncode == 2 and "--demos clones one policy; tag's agents play 2" in several.stderr, several.stderr
    played = _game(headless_export, "--env=jumper", f"--policy={run_dir / 'policy.json'}", "--eval_episodes=2",
                   "--max_episode_steps=30")
    assert played.returncode == 0, played.stderr
    assert json.loads(next(line for line in played.stdout.splitlines() if line.startswith('{"eval"')))["eval"]["episodes"] == 2


def test_record_refuses_without_a_display(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    result = subprocess.run([sys.executable, "-m", "python_trainer", "record", "--env-id", "sparse_goal", "--out",
                             str(tmp_path / "d.json")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and not (tmp_path / "d.json").exists()
    assert result.stderr.strip().startswith("godot-ppo record: error: no display ($DISPLAY is not set)")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xdotool") is None, reason="needs xdotool (make test installs it)")
def test_keyboard_recording_under_xvfb_with_xdotool(windowed_export, tmp_path):
    """`godot-ppo record` in the windowed export under Xvfb, played by xdotool: Right held makes an episode of
    action 4 (sparse_goal's right); Backspace drops the last episode; the run ends after --episodes."""
    from python_trainer.envs.xvfb import Xvfb

    xvfb = Xvfb(tmp_path / "xvfb.log")
    display = xvfb.start()
    env = {**os.environ, "DISPLAY": display, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    # The server answers a client before the game opens its window (once, on CI, the game found no display).
    wait_for(lambda: subprocess.run(["xdotool", "getdisplaygeometry"], env=env, capture_output=True,
                                    timeout=10).returncode == 0, 10, f"Xvfb on {display} answering xdotool")
    out = tmp_path / "kb.json"
    proc = subprocess.Popen([sys.executable, "-m", "python_trainer", "record", "--env-path", str(windowed_export),
                             "--env-id", "sparse_goal", "--out", str(out), "--episodes", "6",
                             "--max-episode-steps", "20"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)

    lines = []  # the command's output, read as it comes (the recorder says what it did)
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()

    def xdo(*args):
        subprocess.run(["xdotool", *args], env=env, check=True, timeout=10)

    def poll(what, until, timeout=30.0):
        def reached():
            value = until()
            if not value and proc.poll() is not None:
                reader.join(10)
                log = next((line.rsplit("its output is in ", 1)[1].strip() for line in lines
                            if "its output is in " in line), None)
                raise AssertionError(f"record ended early while waiting for {what}: {lines}; the game's output: "
                                     f"{Path(log).read_text()[-3000:] if log and Path(log).exists() else None}; "
                                     f"Xvfb's log: {xvfb.log_path.read_text()[-2000:]}")
            return value

        try:
            return wait_for(reached, timeout, what)
        except AssertionError as e:
            raise AssertionError(f"{e}: {lines}") from None

    def episodes():
        try:
            return json.loads(out.read_text())
        except (OSError, ValueError):
            return []

    try:
        poll("game window", lambda: subprocess.run(["xdotool", "search", "--name", "Godot"], env=env,
                                                   capture_output=True, timeout=10).stdout.strip())
        xdo("keydown", "Right")
        poll("episode played with Right held", lambda: any(all(a == [4] for a in ep[1]) for ep in episodes()))
        xdo("keyup", "Right")
        xdo("keydown", "BackSpace")
        poll("dropped episode", lambda: any("dropped the last episode" in line for line in lines))
        xdo("keyup", "BackSpace")
        assert proc.wait(timeout=60) == 0, lines
        reader.join(10)
        final = episodes()
        assert any(line.startswith("recorded 6 episodes, ") for line in lines), lines
        assert len(final) == 6  # --episodes counts the episodes kept: one more was played, then dropped
        for obs, actions, meta in final:
            assert len(obs) == len(actions) + 1 and meta["game"] == "sparse_goal" and len(meta["rewards"]) == len(actions)
    finally:
        subprocess.run(["xdotool", "keyup", "Right", "BackSpace"], env=env, timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        xvfb.stop()
        assert not wait_gone([proc.pid], 10)
