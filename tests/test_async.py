"""--async (issue 37): the next rollout is collected, in a child process, while the learner updates. Real runs of
`godot-ppo train` on the ball_chase export and on CartPole-v1; every wait polls against a deadline."""

import os
import signal
import subprocess
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from helpers import (REPO, communicate_after_signal, descendants, read_line, read_scalars, run_dirs, train_argv,
                     train_child, train_run, wait_for, wait_gone)
from python_trainer import cli
from python_trainer.base import bounds
from python_trainer.checkpoint import load_checkpoint
from python_trainer.envs.gym_env import GymVecEnv
from python_trainer.agent import Agent
from python_trainer.envs.game import resolve_env
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer, collect_rollout
from python_trainer.run import learners, train
from python_trainer.variants import async_rollouts
from python_trainer.variants.recurrent import RecurrentAgent
from python_trainer.variants.trained_agent import make_agent

# ball_chase, 2 instances x 4 agents x 32 steps = 256 steps an update, collected step by step in a child process
# (at 4 agents per instance the default would run in the engine: tests/test_engine_actors.py)
BALL_CHASE = ["--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "4", "--num-steps", "32",
              "--num-minibatches", "2", "--update-epochs", "2", "--no-in-engine"]


def _collector_pid(text: str) -> int:
    """The collector's pid, from the startup line ("asynchronous collection in process PID ...")."""
    return int(text.split("asynchronous collection in process ")[1].split()[0])


@pytest.mark.slow
def test_an_async_run_trains_logs_its_policy_lag_and_leaves_no_process(tmp_path, headless_export):
    out = train_child(tmp_path, *BALL_CHASE, "--total-timesteps", str(256 * 40), "--eval-episodes", "2", "--async")
    (run_dir,) = run_dirs(tmp_path)
    collector = _collector_pid(out.stdout)
    assert wait_gone([collector], timeout=10) == [], "the collector process outlived the run"
    scalars = read_scalars(run_dir)
    lags = [v for _, v in scalars["charts/policy_lag"]]
    assert lags[0] == 0 and set(lags[1:]) == {1}, lags  # the first rollout: the initial weights; then one update old
    assert [v for _, v in scalars["charts/policy_lag_max"]][-1] == 1
    assert load_checkpoint(run_dir / "model.pt")["global_step"] == 256 * 40
    rows = np.loadtxt(run_dir / "episodes.csv", delimiter=",", skiprows=1, ndmin=2)
    assert len(rows) >= 8 and (np.diff(rows[:, 0]) >= 0).all()  # every env's episodes, at their global steps
    assert "eval: deterministic policy, 2 episodes" in out.stdout
    # the time line: acting and waiting for the games are shares of the collection's own time, which ran beside
    # the learner's update (as shares of the learner's time they could add up to more than its wait)
    (time_line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("time: ")]
    assert time_line.startswith("time: waiting for the collection "), time_line
    acting, waiting = (int(time_line.split(k)[1].split("%")[0]) for k in ("beside them: acting ", "waiting for the envs "))
    assert 0 < acting and 0 < waiting and acting + waiting <= 100, time_line


@pytest.mark.slow
def test_a_deeper_lag_is_kept_within_max_policy_lag(tmp_path):
    run_dir = train_run(tmp_path, "--env-id", "CartPole-v1", "--total-timesteps", str(512 * 12), "--eval-episodes", "0",
                        "--async", "--max-policy-lag", "3")
    lags = [v for _, v in read_scalars(run_dir)["charts/policy_lag"]]
    assert lags[:4] == [0, 1, 2, 3] and set(lags[3:]) == {3}, lags  # three rollouts asked for ahead, each kept


def _niceness(pid: int) -> list:
    """The niceness of each of ``pid``'s threads (Linux's nice is a thread's own), those that ended meanwhile left out."""
    seen = set()
    for thread in psutil.Process(pid).threads():
        try:
            seen.add(psutil.Process(thread.id).nice())
        except psutil.NoSuchProcess:
            pass
    return sorted(seen)


def _stopped_run(tmp_path, stop, seen=None, extra=()) -> tuple:
    """An --async ball_chase training (``extra``: more flags), in a session of its own, stopped by ``stop(pid,
    collector pid)`` once it trains; (its exit status, its stderr, the collector's pid, every pid that was below it,
    the seconds from ``stop`` to its end). ``seen``, a dict, gets the niceness of the learner's threads and of every
    process below it while it trains."""
    argv = train_argv(tmp_path, *BALL_CHASE, "--total-timesteps", str(256 * 2000), "--checkpoint-every", "0",
                      "--eval-episodes", "0", "--async", *extra)
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        collector = _collector_pid(read_line(proc, b"game ball_chase", timeout=90).decode())
        read_line(proc, b"global_step=", timeout=90)
        below = descendants(proc.pid)  # the collector, its two games (and multiprocessing's resource tracker)
        assert collector in below and len(below) >= 3, below
        if seen is not None:
            seen.update({"learner": _niceness(proc.pid), "below": {pid: _niceness(pid) for pid in below}})
        stopped = time.monotonic()
        stop(proc.pid, collector)
        _, err = communicate_after_signal(proc)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in descendants(proc.pid) if proc.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
    return proc.returncode, err.decode(errors="replace"), collector, below, took


@pytest.mark.slow
def test_ctrl_c_checkpoints_and_ends_the_collector_and_its_games(tmp_path, headless_export):
    """Ctrl-C reaches the terminal's whole process group, the collector included: it ignores it, and ends once the
    learner has written its checkpoint. While it trains, the learner's threads are at --learner-nice's 10 and the
    collector and its games at the priority they started with (pytest's)."""
    seen: dict = {}
    code, err, _, below, _ = _stopped_run(tmp_path, lambda pid, _: os.killpg(pid, signal.SIGINT), seen)
    mine = max(10, os.nice(0))  # (a test run under `nice` starts everything nicer)
    assert seen["learner"] == [mine], seen
    assert all(nice == [os.nice(0)] for nice in seen["below"].values()), seen
    assert code == 130, err
    assert "interrupted by SIGINT" in err and "godot-ppo train --resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path)
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["global_step"] >= 256 * 20 and ckpt["global_step"] == 256 * ckpt["update"]
    assert wait_gone(below, timeout=10) == [], "a process outlived the stopped training"


@pytest.mark.slow
def test_a_killed_collector_stops_the_run_with_a_checkpoint_naming_it(tmp_path, headless_export):
    code, err, collector, below, _ = _stopped_run(tmp_path, lambda _, collector: os.kill(collector, signal.SIGKILL))
    assert code == 1, err
    (error,) = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert f"collector process {collector} ended" in error and "SIGKILL" in error, error
    assert "godot-ppo train --resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 256 * 20
    assert wait_gone(below, timeout=10) == [], "a game outlived its collector"


@pytest.mark.parametrize("flags, says", [
    (["--async", "--self-play"], "--async does not swap --self-play's opponents"),
    (["--async", "--editor"], "--editor trains the game the editor runs"),
    (["--max-policy-lag", "2"], "--max-policy-lag is for asynchronous collection: add --async"),
    (["--async", "--max-policy-lag", "0"], "--max-policy-lag"),
    (["--async", "--max-policy-lag", str(bounds.POLICY_LAG.value + 1)],
     f"--max-policy-lag {bounds.POLICY_LAG.value + 1} is not valid: give an integer from 1 to 8"),
])
def test_what_async_cannot_do_is_refused_in_one_line(tmp_path, capsys, flags, says):
    assert cli.main(["train", "--env-id", "CartPole-v1", *flags, "--run-dir-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert says in line and "Traceback" not in err
    assert run_dirs(tmp_path) == []


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "lstm"])
def test_the_learners_critic_values_the_rollout_again_as_collection_did_with_the_same_weights(monkeypatch, recurrent):
    """refresh_values (--async: the rollout valued by the learner's critic, not the collector's older one) gives, for
    unchanged weights, the values the rollout stored: every env's steps in order, an LSTM replayed from the
    rollout's initial state across its episode starts, in blocks of whole envs (here 2 of 3 envs, then 1)."""
    monkeypatch.setattr(async_rollouts, "REFRESH_ROWS", 2 * 12)
    torch.manual_seed(0)
    agent = RecurrentAgent(4, gym.spaces.Discrete(2), 16) if recurrent else Agent(4, gym.spaces.Discrete(2))
    envs = GymVecEnv("CartPole-v1", num_envs=3, seed=0, max_episode_steps=5)
    normalizer, buf = Normalizer(4, 3, 0.99, norm_obs=True, norm_reward=False), RolloutBuffer(12, 3, 4, agent)
    buf.next_obs[:] = normalizer.normalize_obs(envs.reset(seed=0)[0])
    collect_rollout(envs, agent, normalizer, buf, pipeline=True)  # a first rollout: the LSTM's memory is not zero
    collect_rollout(envs, agent, normalizer, buf, pipeline=True)
    envs.close()
    collected = buf.values.copy()
    buf.values[:] = np.nan
    async_rollouts.refresh_values(agent, buf)
    assert buf.dones[1:].any() and (not recurrent or buf.initial_state.h.abs().sum() > 0)
    np.testing.assert_allclose(buf.values, collected, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_a_stopped_collector_is_named_after_step_timeout_and_the_run_ends_with_its_checkpoint(tmp_path, headless_export):
    """SIGSTOP of the collector: it sends no heartbeat, so the learner's wait ends --step-timeout after the last word
    heard, with one line naming the collector and what the learner waited for; the collector (stopped) is ended."""
    code, err, collector, below, took = _stopped_run(
        tmp_path, lambda _, collector: os.kill(collector, signal.SIGSTOP), extra=("--step-timeout", "2"))
    assert code == 1, err
    (error,) = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert f"the collector process {collector} said nothing for 2 s while the learner waited" in error, error
    assert "stopped or stuck" in error and "godot-ppo train --resume" in err and "Traceback" not in err, err
    assert took < 2 + 15, took  # the wait, then the checkpoint and the kill of a stopped collector
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 256
    assert wait_gone(below, timeout=10) == [], "a process outlived the stopped collector"


@pytest.mark.slow
def test_sigterm_while_the_collector_is_stopped_ends_the_run_promptly_with_its_checkpoint(tmp_path, headless_export):
    def stop(pid, collector):
        os.kill(collector, signal.SIGSTOP)
        wait_for(lambda: psutil.Process(collector).status() == psutil.STATUS_STOPPED, 10, "the collector stopped")
        os.kill(pid, signal.SIGTERM)

    code, err, _, below, took = _stopped_run(tmp_path, stop)
    assert code == 143, err
    assert "interrupted by SIGTERM" in err and "godot-ppo train --resume" in err and "Traceback" not in err, err
    assert took < 12, took  # (was 44 s: the stopped collector was drained for 30 s, then terminated for 10 s)
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 256
    assert wait_gone(below, timeout=10) == [], "a process outlived the stopped collector"


@pytest.mark.slow
def test_a_collector_killed_before_its_first_answer_is_one_line_with_its_signal(tmp_path, headless_export):
    argv = train_argv(tmp_path, *BALL_CHASE, "--total-timesteps", "2560", "--async")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def collector():
            for pid in descendants(proc.pid):
                try:
                    if "spawn_main" in " ".join(psutil.Process(pid).cmdline()):
                        return pid
                except psutil.Error:
                    pass
        pid = wait_for(collector, 60, "the collector process", proc, poll=0.005)
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"godot-ppo train: error: the collector process {pid} ended before its games started (killed "
                     "by signal SIGKILL (exit code -9))"], err  # no traceback, no hint, no folder that is gone


def _push_left(obs, done=None):
    return np.zeros(len(obs), dtype=np.int64)


def _rollouts(tmp_path, num_steps=2048, depth=bounds.POLICY_LAG.value):
    """LocalAsyncRollouts on CartPole (4 envs), with an agent, a normaliser and a buffer to collect into."""
    args = train.Args(env_id="CartPole-v1", num_envs=4, num_steps=num_steps, async_rl=True, max_policy_lag=depth)
    game = resolve_env("CartPole-v1")
    rollouts = async_rollouts.LocalAsyncRollouts(game, learners.env_kwargs(args, game, 0, tmp_path), args, depth)
    from dataclasses import asdict

    agent = make_agent(4, rollouts.single_action_space, asdict(args), None)
    return rollouts, agent, Normalizer(4, 4, 0.99, False, False), RolloutBuffer(num_steps, 4, 4, agent)


def test_the_rollouts_asked_ahead_are_dropped_not_collected_before_an_evaluation_and_at_close(tmp_path):
    """--max-policy-lag 8: an evaluation right after the rollouts were asked for ahead waits for the one begun
    only (the collector drops the others unbegun), and so does closing."""
    rollouts, agent, normalizer, buf = _rollouts(tmp_path)
    try:
        start = time.monotonic()
        rollouts.collect(agent, normalizer, buf)  # the first rollout (asked now), then 8 asked ahead
        one = time.monotonic() - start
        assert len(rollouts.ahead.asked) == bounds.POLICY_LAG.value
        assert rollouts._drop() >= bounds.POLICY_LAG.value - 2  # the one begun (and one more on a slow machine)
        returns = rollouts.evaluate(_push_left, 1, seed=0)
        assert len(returns) == 1
        start = time.monotonic()
        rollouts.collect(agent, normalizer, buf)
        # A rollout's time, as slow as the machine is now: a run beside the tests can make the second one much slower.
        one = max(one, time.monotonic() - start)
        start = time.monotonic()
    finally:
        rollouts.close()
    assert time.monotonic() - start < 4 * one + 2, (time.monotonic() - start, one)  # collecting 8 takes 8 x one
    assert not rollouts._proc.is_alive()
