"""Reliability of the trainer's side (issue 13, items 1, 4, 6, 9, 10): no lost training, no leftover folder or
process, no traceback from bad input. Real processes where it matters (`godot-ppo train` on CartPole-v1 or on the
real ball_chase export, `godot-ppo launch`/`profile`); every wait polls against a deadline."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from helpers import REPO, communicate_after_signal, descendants, read_line, run_dirs, wait_for, wait_gone
from python_trainer import cli
from python_trainer.run import learners, run_folder, train
from python_trainer.checkpoint import load_checkpoint
from python_trainer.engine.policy_file import PolicyFileError, read_policy

TRAIN = [sys.executable, "-m", "python_trainer", "train"]
# ball_chase, 4 agents x 32 steps = 128 steps an update, 400 updates: a status line every 20 updates (2560 steps),
# and many seconds of training left after the first one.
BALL_CHASE = ["--env-id", "ball_chase", "--agents-per-instance", "4", "--num-steps", "32", "--num-minibatches", "1",
              "--update-epochs", "1", "--total-timesteps", str(128 * 400), "--checkpoint-every", "0",
              "--eval-episodes", "0"]
# CartPole-v1, 4 envs x 128 steps = 512 steps an update
CARTPOLE = ["--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "128", "--eval-episodes", "0"]


def _start(argv, **kw):
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _finish(proc, timeout=60):
    """(returncode, stderr text); kills the process if it outlives ``timeout``."""
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err.decode(errors="replace") if isinstance(err, bytes) else (err or "")


def _finish_after_signal(proc):
    """(returncode, stderr text) of a command sent an ending signal; a stuck stop fails with its threads' stacks."""
    _, err = communicate_after_signal(proc)
    return proc.returncode, err.decode(errors="replace")


def _games(pid):
    """The Godot processes below ``pid`` (profile runs other short-lived tools too)."""
    found = []
    for child in descendants(pid):
        try:
            if "rl_games" in " ".join(psutil.Process(child).cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


# ======================================================================================================================
# 1. One signal policy for every command
# ======================================================================================================================
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_training_like_ctrl_c(tmp_path, headless_export, sig):
    proc = _start([*TRAIN, *BALL_CHASE, "--run-dir-root", str(tmp_path)])
    try:
        read_line(proc, b"global_step=", timeout=90)  # 20 updates done; nothing on disk yet (--checkpoint-every 0)
        games = descendants(proc.pid)
        assert games, "the trainer started no game"
        proc.send_signal(sig)
        code, err = _finish_after_signal(proc)
    finally:
        _finish(proc, timeout=1)
    assert code == 128 + sig, err
    assert f"interrupted by {sig.name}" in err and "godot-ppo train --resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path)
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["global_step"] >= 128 * 20 and ckpt["global_step"] == 128 * ckpt["update"]
    assert not (run_dir / "train.lock").exists()  # a training stopped like Ctrl-C leaves no lock file
    assert wait_gone(games, timeout=10) == [], "a Godot process outlived the stopped training"


@pytest.mark.slow
def test_an_ignored_sigint_stays_ignored_and_sigterm_still_checkpoints(tmp_path):
    """`godot-ppo train ... &` from a script runs with SIGINT ignored: a SIGINT must not stop it."""
    proc = _start([*TRAIN, *CARTPOLE, "--total-timesteps", str(10**9), "--checkpoint-every", "1",
                   "--run-dir-root", str(tmp_path)],
                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 60, "first checkpoint", proc)
        ckpt_path = next(tmp_path.glob("*/checkpoint.pt"))
        proc.send_signal(signal.SIGINT)
        seen = {os.stat(ckpt_path).st_ino}  # each checkpoint is a new file renamed over the old one

        def two_more_checkpoints():
            seen.add(os.stat(ckpt_path).st_ino)
            return len(seen) >= 3

        wait_for(two_more_checkpoints, 60, "two more checkpoints after SIGINT", proc)
        proc.send_signal(signal.SIGTERM)
        code, err = _finish_after_signal(proc)
    finally:
        _finish(proc, timeout=1)
    assert code == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM" in err and "--resume" in err
    assert load_checkpoint(ckpt_path)["update"] >= 3


# A driver for the two racy moments: a signal in the middle of a checkpoint's write, or in the middle of an update.
_DRIVER = r"""
import os, signal, sys, torch
from python_trainer import ppo
from python_trainer import cli
where, argv = sys.argv[1], sys.argv[2:]
calls = {"save": 0, "clip": 0}
real_save, real_clip = torch.save, ppo.clip_grad_norm

def save(obj, f, *a, **k):
    calls["save"] += 1
    if where == "checkpoint" and calls["save"] == 2:  # the periodic checkpoint of update 2, half written
        f.write(b"PK\x03\x04 half a checkpoint")
        os.kill(os.getpid(), signal.SIGTERM)
    if calls["save"] == 3:  # the checkpoint written on the way out
        os.kill(os.getpid(), signal.SIGHUP)  # a second signal must not cut it short
    return real_save(obj, f, *a, **k)

def clip(*a, **k):
    calls["clip"] += 1
    if where == "update" and calls["clip"] == 2 * 4 + 2:  # the 2nd minibatch of update 3 (4 per update)
        os.kill(os.getpid(), signal.SIGTERM)
    return real_clip(*a, **k)

torch.save, ppo.clip_grad_norm = save, clip
sys.exit(cli.main(["train", *argv]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["checkpoint", "update"])
def test_a_signal_while_writing_a_checkpoint_or_updating_corrupts_nothing(tmp_path, where):
    argv = [*CARTPOLE, "--total-timesteps", str(512 * 50), "--checkpoint-every", "1", "--num-minibatches", "4",
            "--update-epochs", "1", "--run-dir-root", str(tmp_path)]
    code, err = _finish(_start([sys.executable, "-c", _DRIVER, where, *argv]))
    assert code == 128 + signal.SIGTERM, err
    assert "SIGHUP received: already stopping" in err and "--resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path)
    assert not list(run_dir.glob(".*tmp*")), "a temporary file was left"
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert (ckpt["update"], ckpt["global_step"]) == (2, 1024)  # the last completed update
    code, err = _finish(_start([*TRAIN, "--resume", str(run_dir), "--total-timesteps", "2048"]))
    assert code == 0, err
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == 2048


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_launch_ends_cleanly_on_sigterm_and_sighup(headless_export, sig):
    proc = _start([sys.executable, "-m", "python_trainer", "launch", "--env-id", "ball_chase", "--instances", "1",
                   "--agents", "2"])  # the older names of --num-instances and --agents-per-instance
    try:
        read_line(proc, b"launched", timeout=60)
        games = descendants(proc.pid)
        assert games
        proc.send_signal(sig)
        code, err = _finish(proc, timeout=30)
    finally:
        _finish(proc, timeout=1)
    assert code == 0, err  # launch's own Ctrl-C status: the usual way to stop it
    assert "interrupted: closing the instances" in err and "Traceback" not in err
    assert wait_gone(games, timeout=10) == []


@pytest.mark.slow
def test_profile_ends_cleanly_on_sigterm(tmp_path, headless_export):
    out = tmp_path / "profile"
    proc = subprocess.Popen([sys.executable, "-m", "python_trainer", "profile", "--env-id", "ball_chase", "--modes",
                             "headless", "--instances", "1", "--agents", "2", "--seconds", "60",
                             "--no-engine-benchmark", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        read_line(proc, b"profiling 1 configuration", timeout=60)  # then it launches the instance it measures
        wait_for(lambda: _games(proc.pid), 60, "game process", proc)
        games = _games(proc.pid)
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    finally:
        _finish(proc, timeout=1)
    assert proc.returncode == 128 + signal.SIGTERM, output  # profile's Ctrl-C status is 130
    assert "interrupted: writing what was measured so far" in output and "Traceback" not in output
    assert json.loads((out / "profile.json").read_text())["interrupted"] is True
    assert wait_gone(games, timeout=10) == []


# ======================================================================================================================
# 4. One lock per run folder
# ======================================================================================================================
@pytest.mark.slow
def test_resume_of_a_run_still_training_is_refused_naming_its_pid(tmp_path):
    holder = _start([*TRAIN, *CARTPOLE, "--total-timesteps", str(10**9), "--checkpoint-every", "1",
                     "--run-dir-root", str(tmp_path)])
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 60, "first checkpoint", holder)
        (run_dir,) = run_dirs(tmp_path)
        step = load_checkpoint(run_dir / "checkpoint.pt")["global_step"]
        code, err = _finish(_start([*TRAIN, "--resume", str(run_dir), "--total-timesteps", str(step + 1024)]))
        assert code == 2, err
        (line,) = err.strip().splitlines()
        assert line.startswith("godot-ppo train: error: --resume") and f"process {holder.pid}" in line
        assert holder.poll() is None  # the training it protects goes on
        holder.kill()  # SIGKILL: no clean-up at all, and still no stale lock
        holder.wait(timeout=10)
    finally:
        _finish(holder, timeout=1)
    assert (run_dir / "train.lock").exists()  # the file stays after SIGKILL, but the kernel dropped its lock
    step = load_checkpoint(run_dir / "checkpoint.pt")["global_step"]
    code, err = _finish(_start([*TRAIN, "--resume", str(run_dir), "--total-timesteps", str(step + 1024)]))
    assert code == 0, err
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == step + 1024
    assert not (run_dir / "train.lock").exists()


def test_a_run_without_env_id_is_named_for_the_default_game_and_resumes_with_it(tmp_path):
    """No --env-id and no --env-path trains CleanRL's CartPole-v1: the folder and the checkpoint say so (not None)."""
    argv = ["--num-envs", "4", "--num-steps", "128", "--eval-episodes", "0", "--run-dir-root", str(tmp_path)]
    assert train.main([*argv, "--total-timesteps", "512"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    assert run_dir.name.startswith("CartPole-v1__ppo__1__"), run_dir.name
    assert not (run_dir / "train.lock").exists()  # a finished training leaves no lock file
    assert train.main(["--resume", str(run_dir), "--env-id", "CartPole-v1", "--total-timesteps", "1024"]) == 0
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == 1024
    assert not (run_dir / "train.lock").exists()


def test_the_lock_file_goes_with_its_training_and_still_locks_out_a_second_one(tmp_path, monkeypatch):
    first = run_folder.RunLock(tmp_path)
    with pytest.raises(run_folder.TrainError, match=f"is still being trained by process {os.getpid()}"):
        run_folder.RunLock(tmp_path)
    first.release()
    assert not (tmp_path / "train.lock").exists()
    # A training that opened the file just before its holder removed it and ended: it holds a file that is gone, so
    # it locks the one at the path instead, and a third training is refused.
    first = run_folder.RunLock(tmp_path)
    real_flock = fcntl.flock

    def flock(fd, op):
        if not first.file.closed:
            first.release()  # between the second training's open and its flock
        return real_flock(fd, op)

    monkeypatch.setattr(run_folder.fcntl, "flock", flock)
    second = run_folder.RunLock(tmp_path)
    assert os.stat(tmp_path / "train.lock").st_ino == os.fstat(second.file.fileno()).st_ino
    with pytest.raises(run_folder.TrainError, match="is still being trained"):
        run_folder.RunLock(tmp_path)
    second.release()


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(run_folder.time, "time", lambda: 1_700_000_000.0)
    made, start = [], threading.Barrier(8)

    def new():
        start.wait()
        made.append(run_folder.new_run_dir(tmp_path, "CartPole-v1", "ppo", 1))

    threads = [threading.Thread(target=new) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(set(made)) == 8 and all(p.is_dir() for p in made)
    assert {p.name for p in made} == {"CartPole-v1__ppo__1__1700000000"} | {
        f"CartPole-v1__ppo__1__1700000000_{k}" for k in range(2, 9)}


# ======================================================================================================================
# 6. Crash paths keep the model
# ======================================================================================================================
@pytest.mark.slow
def test_an_instance_out_of_restarts_ends_with_a_checkpoint_and_the_resume_hint(tmp_path, headless_export):
    proc = _start([*TRAIN, *BALL_CHASE, "--max-restarts", "0", "--step-timeout", "20", "--run-dir-root", str(tmp_path)])
    try:
        read_line(proc, b"global_step=", timeout=90)
        games = descendants(proc.pid)
        os.kill(games[0], signal.SIGKILL)  # the game crashes; no restart allowed
        code, err = _finish(proc)
    finally:
        _finish(proc, timeout=1)
    assert code == 1, err
    assert "Traceback" not in err
    error = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert len(error) == 1 and "--max-restarts" in error[0] and "giving up" in error[0]
    assert "godot-ppo train --resume" in err
    (run_dir,) = run_dirs(tmp_path)
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["global_step"] >= 128 * 20 and ckpt["args"]["max_restarts"] == 0
    assert wait_gone(games, timeout=10) == []


@pytest.mark.slow
def test_a_closed_stdout_ends_with_a_checkpoint_and_the_resume_hint(tmp_path):
    """`godot-ppo train | head -1`: the next line written to stdout meets a closed pipe."""
    proc = _start([*TRAIN, *CARTPOLE, "--total-timesteps", str(512 * 400), "--checkpoint-every", "0",
                   "--run-dir-root", str(tmp_path)])
    try:
        read_line(proc, b"global_step=", timeout=60)  # update 20 of 400; the next status line comes at update 40
        proc.stdout.close()
        code, err = _finish(proc)
    finally:
        _finish(proc, timeout=1)
    assert code == 1, err
    assert "broken pipe" in err and "godot-ppo train --resume" in err
    assert "Traceback" not in err and "Exception ignored" not in err
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 512 * 20


def test_an_unexpected_error_keeps_the_model_and_its_traceback(tmp_path, monkeypatch, capsys):
    real_progress = run_folder.RunLog.progress

    def progress(self, global_step, iteration, sps, *more):
        if iteration == 3:
            raise RuntimeError("a bug in the logging")
        return real_progress(self, global_step, iteration, sps, *more)

    monkeypatch.setattr(run_folder.RunLog, "progress", progress)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    argv = [*CARTPOLE, "--total-timesteps", str(512 * 10), "--checkpoint-every", "0", "--run-dir-root", str(tmp_path)]
    assert cli.main(["train", *argv]) == 1
    err = capsys.readouterr().err
    assert "godot-ppo train: error: RuntimeError: a bug in the logging" in err and "--resume" in err
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["update"] == 3
    assert "Traceback" in (run_dir / "error.log").read_text()
    assert not (run_dir / "train.lock").exists()  # a crash that kept the model leaves no lock file
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # the policy is undone when main returns


def test_max_restarts_and_step_timeout_reach_the_env(tmp_path, monkeypatch, capsys, headless_export):
    from python_trainer.envs import vec_env

    seen = {}

    def make_vec_env(game, **kw):
        seen.update(kw)
        raise vec_env.GameError("stop here")

    monkeypatch.setattr(learners, "make_vec_env", make_vec_env)  # the train command's envs come from it
    argv = ["--env-id", "ball_chase", "--max-restarts", "5", "--step-timeout", "7.5", "--run-dir-root", str(tmp_path)]
    assert cli.main(["train", *argv]) == 2 and "stop here" in capsys.readouterr().err
    assert (seen["max_restarts"], seen["step_timeout"]) == (5, 7.5)


# ======================================================================================================================
# 9 and 10. Bounds and values checked before any game starts; clear messages
# ======================================================================================================================
@pytest.fixture
def no_game(monkeypatch):
    """Fails the test if anything tries to start an environment."""
    from python_trainer.envs import vec_env

    def refuse(*a, **k):
        raise AssertionError("an environment was started for a setting that could be checked first")

    monkeypatch.setattr(vec_env, "make_vec_env", refuse)


@pytest.mark.parametrize("flag, value", [
    ("--agents-per-instance", "100000"), ("--num-instances", "1000"), ("--speedup", "-1"), ("--action-repeat", "0"),
    ("--learning-rate", "nan"), ("--learning-rate", "0"), ("--gamma", "1.5"), ("--gamma", "0"), ("--gae-lambda", "2"),
    ("--clip-coef", "inf"), ("--ent-coef", "-0.01"), ("--vf-coef", "nan"), ("--max-grad-norm", "0"),
    ("--target-kl", "nan"), ("--max-restarts", "-1"), ("--step-timeout", "0"), ("--checkpoint-every", "-1"),
])
def test_bad_values_are_refused_before_any_game_starts(tmp_path, capsys, no_game, headless_export, flag, value):
    assert cli.main(["train", "--env-id", "ball_chase", flag, value, "--run-dir-root", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"godot-ppo train: error: {flag} ") and f"e.g. {flag} " in line
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # no run folder left behind


def test_the_env_refuses_unbounded_instances_before_starting_any(monkeypatch):
    from python_trainer.envs import vec_env

    monkeypatch.setattr(vec_env, "InstanceLauncher", lambda *a, **k: pytest.fail("instances were started"))
    for kw, word in [({"num_instances": 1000}, "num_instances"), ({"agents_per_instance": 100000}, "agents"),
                     ({"speedup": -1.0}, "speedup"), ({"action_repeat": 0}, "action_repeat")]:
        with pytest.raises(ValueError, match=word):
            vec_env.make_vec_env("ball_chase", **kw)


def test_an_empty_or_truncated_checkpoint_says_what_it_is(tmp_path, capsys):
    assert train.main([*CARTPOLE, "--total-timesteps", "512", "--checkpoint-every", "1",
                     "--run-dir-root", str(tmp_path)]) == 0
    (run_dir,) = run_dirs(tmp_path)
    data = (run_dir / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    for content, words in [(b"", "empty file"), (data[: len(data) // 2], "truncated"), (b"hello", "not a checkpoint")]:
        (run_dir / "checkpoint.pt").write_bytes(content)
        assert cli.main(["train", "--resume", str(run_dir)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert words in line and "()" not in line, line


def test_a_deeply_nested_policy_file_is_a_clean_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PolicyFileError, match="nested too deeply"):
        read_policy(deep)
    result = subprocess.run([sys.executable, "-m", "python_trainer", "play", str(deep)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "nested too deeply" in result.stderr and "Traceback" not in result.stderr


def test_a_peer_sending_invalid_utf8_or_deep_json_gets_a_clear_connection_error():
    import socket

    from python_trainer.envs.protocol import GodotConnection, GodotConnectionError, decode_body

    with pytest.raises(ValueError, match="not UTF-8 text \\(byte 0xff at offset 1\\)"):
        decode_body(b"{\xff}")
    a, b = socket.socketpair()
    try:
        conn = GodotConnection(a, label="instance 0", timeout=5)
        body = b"[" * 100_000 + b"]" * 100_000
        b.sendall(len(body).to_bytes(4, "little") + body)
        with pytest.raises(GodotConnectionError, match="malformed message \\(JSON nested too deeply"):
            conn.recv()
    finally:
        a.close()
        b.close()
