"""`godot-ppo train --watch`: one windowed game outside the training batch plays RUN_DIR/policy.json and reloads it
at every checkpoint, and ends with the training run. Every test runs under an Xvfb our code starts (DISPLAY unset);
the half-written file case is also covered without a window by godot_project/tests/test_policy_reloader.gd."""

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from helpers import (REPO, communicate_after_signal, end, no_display_env, processes_mentioning, train_argv, wait_for,
                     wait_gone, xvfb_pid)
from python_trainer import cli
from python_trainer.envs import xvfb
from python_trainer.engine.watcher import start_policy_watcher
from python_trainer.base.files import write_atomic
from python_trainer.envs.game import GodotGame, Program, godot_game

COMMITTED_POLICY = REPO / "exports" / "policies" / "ball_chase.json"


def _train_cmd(tmp_path: Path, total: int) -> list:
    return train_argv(tmp_path, "--env-id", "ball_chase", "--num-instances", "1", "--agents-per-instance", "4",
                      "--num-steps", "32", "--checkpoint-every", "1", "--total-timesteps", str(total),
                      "--eval-episodes", "0", "--watch", "--in-engine")  # the games act for themselves (issue 58)


def _reloads(log: Path) -> list:
    text = log.read_text(errors="replace") if log.is_file() else ""
    return [int(m) for m in re.findall(r"^rl_sync: policy reloaded \(global step (\d+)", text, re.MULTILINE)]


@pytest.mark.slow
def test_watch_window_reloads_newer_policies_and_ends_with_training(tmp_path, headless_export, windowed_export):
    proc = subprocess.Popen(_train_cmd(tmp_path, 12288), cwd=REPO, env=no_display_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        games = wait_for(lambda: processes_mentioning(f"--policy={tmp_path}"), 60, "watched game process", proc)
        out, err = proc.communicate(timeout=120)
    finally:
        end(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "watching: a window plays" in err and "actors: in the engine (--in-engine)" in out
    (log,) = tmp_path.glob("*/logs/watch.log")
    steps = _reloads(log)
    # (the end writes policy.json twice at the same global step: with checkpoint.pt, then with model.pt)
    assert len(set(steps)) >= 2, f"the window reloaded {len(steps)} policies:\n{log.read_text()[-3000:]}"
    assert steps == sorted(steps), f"reloads not of ever newer policies: {steps}"
    assert "--max_fps=30" in log.read_text() and "--policy_reload" in log.read_text()
    assert wait_gone(games + [xvfb_pid(err)], timeout=10) == [], "the watched window or its Xvfb outlived training"
    assert processes_mentioning(f"--policy={tmp_path}") == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_watch_window_ends_when_training_is_stopped_or_killed(tmp_path, headless_export, windowed_export, sig):
    proc = subprocess.Popen(_train_cmd(tmp_path, 10**8), cwd=REPO, env=no_display_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        log = wait_for(lambda: next(iter(tmp_path.glob("*/logs/watch.log")), None), 60, "watch.log", proc)
        wait_for(lambda: _reloads(log), 60, "policy reload", proc)
        games = processes_mentioning(f"--policy={tmp_path}")  # the watched game
        assert games
        proc.send_signal(sig)
        _, err = communicate_after_signal(proc) if sig == signal.SIGTERM else proc.communicate(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == (128 + sig if sig == signal.SIGTERM else -sig), err[-3000:]
    assert wait_gone(games + [xvfb_pid(err)], timeout=10) == [], "a game or Xvfb outlived the training run"


def _policy_text(global_step: int) -> str:
    policy = json.loads(COMMITTED_POLICY.read_text())
    policy["source"] = dict(policy.get("source") or {}, global_step=global_step)
    return json.dumps(policy)


@pytest.mark.slow
def test_watcher_keeps_playing_through_a_half_written_policy(tmp_path, windowed_export, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    path = tmp_path / "policy.json"
    path.write_text(_policy_text(1))
    said = []
    watcher = start_policy_watcher(path, godot_game("ball_chase"), log_dir=tmp_path / "logs", say=said.append)
    assert watcher is not None, said
    try:
        # Until the game has started, a new file is simply its first policy: rewrite until one is reloaded. These
        # versions are written whole (atomically, as the trainer writes them): a game that starts while a half file
        # is on disk rightly refuses it as its first policy, and only the half file below is the test's.
        versions = iter(range(2, 10**6))

        def reloaded_or_rewritten():
            if _reloads(watcher.log_path):
                return True
            assert watcher.proc.poll() is None, watcher.log_path.read_text()[-3000:]
            write_atomic(path, _policy_text(next(versions)))

        wait_for(reloaded_or_rewritten, 60, "first policy reload", poll=0.5)
        full = _policy_text(10**6)
        path.write_text(full[: len(full) // 2])  # not atomically, as a user's editor or copy might
        wait_for(lambda: "policy not reloaded" in watcher.log_path.read_text(), 10, "refusal of the half file")
        assert watcher.proc.poll() is None, watcher.log_path.read_text()[-3000:]  # the game plays on
        path.write_text(full)
        wait_for(lambda: 10**6 in _reloads(watcher.log_path), 10, "reload of the completed file")
        assert watcher.reloads()[-1][0] == 10**6
        assert watcher.log_path.read_text().count("policy not reloaded") == 1
        game, xvfb = watcher.proc.pid, watcher.xvfb.pid
    finally:
        watcher.close()
    assert wait_gone([game, xvfb], timeout=10) == []
    assert not [m for m in said if "warning" in m], said  # closing it is not the window ending by itself


def test_watch_needs_a_godot_game(tmp_path):
    assert cli.main(["train", "--env-id", "CartPole-v1", "--watch", "--run-dir-root", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


def test_a_window_that_cannot_start_is_a_warning(tmp_path, monkeypatch):
    policy = tmp_path / "policy.json"
    policy.write_text(_policy_text(1))
    # No display and no Xvfb: no window, one warning, no exception.
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(xvfb, "xvfb_binary", lambda: None)
    said = []
    game = GodotGame(Program((str(tmp_path / "no_such_game"),)), "ball_chase")
    assert start_policy_watcher(policy, game, log_dir=tmp_path / "logs", say=said.append) is None
    assert len(said) == 1 and "warning: --watch: the window did not start" in said[0], said
    # A display, but a game that exits at once: one warning when it ends, while training would go on.
    monkeypatch.setenv("DISPLAY", ":9999")
    said.clear()
    watcher = start_policy_watcher(policy, game, log_dir=tmp_path / "logs", say=said.append)
    try:
        if watcher is not None:
            wait_for(lambda: [m for m in said if "warning" in m], 10, "warning about the window's end")
    finally:
        if watcher is not None:
            watcher.close()
    warnings = [m for m in said if "warning" in m]
    assert len(warnings) == 1 and "training goes on" in warnings[0], said
