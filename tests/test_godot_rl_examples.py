"""godot-rl 0.8.2's own documented entry points train our export unchanged.

godot_rl_agents documents three ways to train an exported game, and each launches the binary itself
(godot_rl.core.godot_env.GodotEnv._launch_env) with nothing but its own flags, never --env:

* examples/stable_baselines3_example.py --env_path=BIN
    StableBaselinesGodotEnv(env_path, show_window=False, seed=0, n_parallel=1, speedup=1) wrapped in VecMonitor,
    then SB3 PPO("MultiInputPolicy", ent_coef=0.0001, n_steps=32):
    BIN --port=11008 --env_seed=0 --disable-render-loop --headless --speedup=1
* examples/clean_rl_example.py --env_path=BIN
    CleanRLGodotEnv(env_path, show_window=False, speedup=8, seed=1, n_parallel=1), actions from an unclipped Normal:
    BIN --port=11008 --env_seed=1 --disable-render-loop --headless --speedup=8
* gdrl --env=gdrl --env_path=BIN (the deprecated console script; SB3 path of godot_rl/main.py). Its own --env is
    swallowed by parse_known_args and never reaches the game, and it always trains 200,000 steps (no option changes
    that); only --speedup and --viz change what the binary gets:
    BIN --port=11008 --env_seed=0 --disable-render-loop --headless --speedup=S

So the export must run its default game (ball_chase: 16 agents, 12 observations, one continuous action "move" of
size 2) when started without --env. The example scripts are not shipped in the godot-rl wheel (nor may we copy
them), so the SB3 and CleanRL tests build the wrappers exactly as the scripts do; gdrl runs its console script's
main() with its command line as docs/protocol.md shows. Each test gives godot-rl a free port in place of its fixed
11008 (the wrappers take port=; gdrl reads GodotEnv.DEFAULT_PORT), so two test runs on one machine never cross-connect,
and gdrl trains fewer steps than its fixed 200,000 (the default of its training function).

Sample Factory, godot-rl's fourth backend, is not tested: its last release needs gymnasium<1.0, which cannot
share this environment (we pin gymnasium==1.0.0).
"""

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest

from helpers import descendants, free_port, wait_for, wait_gone

N_AGENTS = 16
OBS_SIZE = 12
ACTION_SIZE = 2
EPISODE_LIMIT = 1000  # ball_chase's max_episode_steps (decision steps)
# gdrl's training: 4 of its SB3 rollouts (32 steps x 16 agents) in place of its fixed 200,000 steps (~80 s alone on
# 2 CPUs; its imports take 10 to 30 s more); the deadline stays under pytest's 300 s per test so the test itself ends
# gdrl and its game.
GDRL_STEPS = 4 * 32 * N_AGENTS
GDRL_DEADLINE = 120
# What the gdrl console script runs (godot_rl.main:main), with a free port and GDRL_STEPS (see the docstring).
GDRL = """import sys
from godot_rl.core.godot_env import GodotEnv
from godot_rl.main import main
from godot_rl.wrappers import stable_baselines_wrapper
GodotEnv.DEFAULT_PORT = {port}
stable_baselines_wrapper.stable_baselines_training.__defaults__ = ({steps},)
sys.exit(main())
"""


def _kill(pids) -> None:
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


@pytest.fixture
def own_games():
    """Fails the test if a process started during it (the games GodotEnv launches are our children) outlives it,
    and kills such a process so none is ever left running."""
    me = os.getpid()
    before = set(descendants(me))
    yield
    started = [p for p in descendants(me) if p not in before]
    left = wait_gone(started, timeout=15)
    _kill(left)
    assert left == [], f"processes left running after the test: {left}"


def _assert_game_quit(godot_env) -> None:
    """After env.close() the game quits by itself (godot-rl only sends "close"; it never waits or kills)."""
    pid = godot_env.proc.pid
    assert wait_gone([pid], timeout=15) == [], "the game did not quit after godot-rl's close message"
    assert godot_env.proc.wait(timeout=5) == 0


@pytest.mark.slow
def test_stable_baselines3_example_trains_the_default_game(headless_export, own_games):
    """examples/stable_baselines3_example.py --env_path=exports/headless/rl_games.x86_64, short budget."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import KVWriter, Logger
    from stable_baselines3.common.vec_env.vec_monitor import VecMonitor

    from godot_rl.wrappers.stable_baselines_wrapper import StableBaselinesGodotEnv

    class Capture(KVWriter):
        def __init__(self):
            self.rows = []

        def write(self, key_values, key_excluded, step=0):
            self.rows.append(dict(key_values))

        def close(self):
            pass

    # As the example builds it with its defaults (no --viz, --seed 0, --n_parallel 1, --speedup 1).
    venv = StableBaselinesGodotEnv(env_path=str(headless_export), show_window=False, seed=0, n_parallel=1, speedup=1,
                                   port=free_port())
    godot_env = venv.envs[0]
    try:
        assert venv.num_envs == N_AGENTS
        assert godot_env.action_spaces[0] == gym.spaces.Dict({"move": gym.spaces.Box(-1.0, 1.0, shape=(ACTION_SIZE,))})
        assert venv.action_space.shape == (ACTION_SIZE,)
        assert venv.observation_space["obs"].shape == (OBS_SIZE,)
        env = VecMonitor(venv)
        # The example's PPO (verbose and tensorboard aside), for 4 rollouts of 32 steps x 16 agents. No seed=:
        # PPO would call VecEnv.seed(), which godot-rl's wrapper does not implement.
        model = PPO("MultiInputPolicy", env, ent_coef=0.0001, n_steps=32, learning_rate=0.0003, verbose=0)
        capture = Capture()
        model.set_logger(Logger(folder=None, output_formats=[capture]))
        model.learn(total_timesteps=4 * 32 * N_AGENTS)
        assert model.num_timesteps == 4 * 32 * N_AGENTS
        losses = [row for row in capture.rows if "train/loss" in row] + [dict(model.logger.name_to_value)]
        assert len(losses) == 4  # one training phase per rollout
        for row in losses:
            for key in ("train/loss", "train/value_loss", "train/policy_gradient_loss", "train/entropy_loss",
                        "train/approx_kl"):
                assert math.isfinite(row[key]), (key, row)
        assert all(np.isfinite(p.detach().numpy()).all() for p in model.policy.parameters())
        assert all(math.isfinite(ep["r"]) for ep in model.ep_info_buffer)
        obs = env.reset()
        action, _ = model.predict(obs, deterministic=True)
        assert action.shape == (N_AGENTS, ACTION_SIZE) and np.isfinite(action).all()
    finally:
        venv.close()
    _assert_game_quit(godot_env)


@pytest.mark.slow
def test_clean_rl_example_env_runs_the_default_game(headless_export, own_games):
    """The env of examples/clean_rl_example.py --env_path=exports/headless/rl_games.x86_64, random actions."""
    from godot_rl.wrappers.clean_rl_wrapper import CleanRLGodotEnv

    # As the example builds it with its defaults (no --viz, --speedup 8, --seed 1, --n_parallel 1).
    envs = CleanRLGodotEnv(env_path=str(headless_export), show_window=False, speedup=8, seed=1, n_parallel=1,
                           port=free_port())
    godot_env = envs.envs[0]
    try:
        assert envs.num_envs == N_AGENTS
        assert envs.single_observation_space.shape == (OBS_SIZE,)
        assert envs.single_action_space.shape == (ACTION_SIZE,)
        obs, infos = envs.reset(seed=1)
        assert obs.shape == (N_AGENTS, OBS_SIZE) and np.isfinite(obs).all() and len(infos) == N_AGENTS
        rng = np.random.default_rng(1)
        terminated_total = truncated_total = 0
        # Random actions barely reach a wall, so run to ball_chase's time limit (1000 decision steps): every
        # episode that did not end at a wall ends there.
        for _ in range(EPISODE_LIMIT):
            # The example samples from Normal(mean, std) and sends the samples unclipped, as float32.
            action = rng.normal(0.0, 1.0, size=(N_AGENTS, ACTION_SIZE)).astype(np.float32)
            obs, reward, terminated, truncated, infos = envs.step(action)
            assert obs.shape == (N_AGENTS, OBS_SIZE) and np.isfinite(obs).all()
            assert len(reward) == N_AGENTS and all(math.isfinite(r) for r in reward)
            assert len(terminated) == len(truncated) == len(infos) == N_AGENTS
            assert all(isinstance(d, bool) for d in terminated + truncated)
            for i in np.flatnonzero(np.logical_or(terminated, truncated)):
                assert len(infos[i]["terminal_observation"]["obs"]) == OBS_SIZE
                if infos[i]["TimeLimit.truncated"]:
                    truncated_total += 1
                else:
                    terminated_total += 1
        assert truncated_total + terminated_total >= N_AGENTS, "not every agent's first episode ended"
        assert truncated_total > 0, f"no episode reached the {EPISODE_LIMIT}-step time limit"
    finally:
        envs.close()
    _assert_game_quit(godot_env)


@pytest.mark.slow
def test_gdrl_console_script_trains_the_export(headless_export, tmp_path):
    """`gdrl --env=gdrl --env_path=exports/headless/rl_games.x86_64` as docs/protocol.md shows, headless (no --viz).

    The console script's main() with its command line, on a free port and for GDRL_STEPS (no flag of gdrl's sets
    either)."""
    gdrl = Path(sys.executable).parent / "gdrl"
    assert gdrl.is_file(), f"{gdrl} is missing: pip install -e '.[test]' installs godot-rl and stable-baselines3"
    assert "from godot_rl.main import main" in gdrl.read_text()  # what GDRL runs
    log = tmp_path / "gdrl.log"
    cmd = [sys.executable, "-c", GDRL.format(port=free_port(), steps=GDRL_STEPS), "--env=gdrl",
           f"--env_path={headless_export}", "--experiment_name=test", "--speedup=32"]
    games = set()
    with open(log, "wb") as out:
        # gdrl writes its tensorboard logs under ./logs/sb3: run it in the temp folder.
        # One torch thread: on 2 shared cores, SB3's default thread pool spins against the game for a 64-64 MLP.
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        # The game is gdrl's child (in its own session) until gdrl exits; note every one it starts.
        wait_for(lambda: games.update(descendants(proc.pid)) or proc.poll() is not None, GDRL_DEADLINE, "end of gdrl",
                 poll=0.1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        left = wait_gone(list(games), timeout=15)
        _kill(left)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text[-3000:]
    assert games, "gdrl started no game process"
    assert left == [], f"gdrl left the game running: {left}"
    steps = [int(line.split("|")[2]) for line in text.splitlines() if line.startswith("|    total_timesteps")]
    assert steps and steps[-1] >= GDRL_STEPS, text[-3000:]
    assert list((tmp_path / "logs" / "sb3").glob("test_*")), "gdrl wrote no tensorboard run"
    assert "rl_sync: warning: unknown flag" not in text  # godot-rl's flags are in the contract as godot-rl's
