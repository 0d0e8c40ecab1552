"""Helpers the tests share: waiting with a deadline, the fake game, training into a run folder, TensorBoard scalars,
and the processes a test starts (alive, below a pid, gone, what they print). Tests import them with
`from helpers import ...`; conftest.py holds the fixtures."""

import json
import os
import re
import selectors
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKE_GAME = TESTS / "fake_game.py"
FAKE = [sys.executable, str(FAKE_GAME)]  # argv prefix that runs the fake game in place of a Godot export

if str(REPO) not in sys.path:  # this checkout's python_trainer, whatever the working directory
    sys.path.insert(0, str(REPO))

# The tags CleanRL's ppo.py writes; every training run here writes them too.
CLEANRL_TAGS = [
    "charts/episodic_return", "charts/episodic_length", "charts/learning_rate", "charts/SPS",
    "losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/old_approx_kl", "losses/approx_kl",
    "losses/clipfrac", "losses/explained_variance", "diagnostics/grad_norm", "eval/episodic_return",
]


# ---------------------------------------------------------------------------------------------- waiting
def wait_for(condition, timeout: float, what: str, proc: "subprocess.Popen | None" = None, poll: float = 0.02):
    """Poll ``condition()`` until it returns something true, and return that. At the deadline, or when ``proc`` (the
    process that should bring it about) has ended, fail naming ``what`` was waited for (and ``proc``'s output)."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended ({proc.returncode}) before {what}:\n{output_of(proc)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(poll)
    return result


# ---------------------------------------------------------------------------------------------- the fake game
def fake_env(run_dir, *extra_args: str, instances: int = 2, agents: int = 3, **kw):
    """A GodotVecEnv of ball_chase played by the fake game (``extra_args``: its --fake_... flags)."""
    from python_trainer.envs.vec_env import make_vec_env

    return make_vec_env("ball_chase", num_instances=instances, agents_per_instance=agents, binary=FAKE,
                        run_dir=run_dir, extra_args=list(extra_args), **kw)


def fake_export(path: Path, *fake_args: str) -> Path:
    """An executable at ``path`` that runs the fake game with ``fake_args``: an 'export' for --env-path."""
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GAME}" {" ".join(fake_args)} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def plain_export(folder: Path, *fake_args: str, name: str = "reach") -> Path:
    """An 'export' FOLDER/NAME.x86_64 of a game made with godot_rl_agents' plugin: the fake game in that dialect."""
    return fake_export(Path(folder) / f"{name}.x86_64", "--fake_dialect=godot_rl", *fake_args)


# ---------------------------------------------------------------------------------------------- training runs
def train_argv(root, *flags: str) -> list:
    """`python -m python_trainer train FLAGS`, writing its run folder under ``root``."""
    return [sys.executable, "-m", "python_trainer", "train", *flags, "--run-dir-root", str(root)]


def godot_ppo_child(*args: str, timeout: float = 120, cwd=REPO) -> subprocess.CompletedProcess:
    """`python -m python_trainer ARGS` (the `godot-ppo` command) in a child process, its output captured as text."""
    return subprocess.run([sys.executable, "-m", "python_trainer", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def train_child(root, *flags: str, timeout: float = 240, env: "dict | None" = None) -> subprocess.CompletedProcess:
    """Train in a child process (``env``: variables added to ours); asserts it succeeded, and returns it."""
    result = subprocess.run(train_argv(root, *flags), cwd=REPO, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, **(env or {})))
    assert result.returncode == 0, f"train failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def train_run(root, *flags: str, timeout: float = 240, env: "dict | None" = None) -> Path:
    """Train in a child process into a new folder under ``root`` (asserting it succeeded); that run folder."""
    train_child(root, *flags, timeout=timeout, env=env)
    (run_dir,) = run_dirs(root)
    return run_dir


def run_dirs(root) -> list:
    """The run folders under ``root``, sorted (none when ``root`` does not exist)."""
    root = Path(root)
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def event_accumulator(run_dir):
    """The run's TensorBoard events, loaded."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0, "histograms": 0}).Reload()


def read_scalars(run_dir) -> dict:
    """Every TensorBoard scalar of the run: {tag: [(step, value), ...]}."""
    acc = event_accumulator(run_dir)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# ---------------------------------------------------------------------------------------------- processes
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def descendants(pid: int) -> list:
    """pids of every process below ``pid`` (empty once it is gone): base.processes.descendants, as pids."""
    from python_trainer.base import processes

    return [p.pid for p in processes.descendants(pid)]


def processes_mentioning(text: str) -> list:
    """pids of live processes with ``text`` in an argument of their command line."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(text in part for part in p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


def wait_gone(pids, timeout: float = 10.0) -> list:
    """Poll until none of ``pids`` is alive (zombies count as gone); returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def end(proc: subprocess.Popen) -> None:
    """Kill ``proc`` if it still runs, and reap it (for a test's `finally:`)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def communicate_after_signal(proc: subprocess.Popen, timeout: float = 60):
    """``proc.communicate(timeout=timeout)`` for a command that was sent an ending signal. One still running then
    gets a second SIGTERM, which (signals.STUCK_AFTER_S after the first) makes it print where each of its threads
    waits, and the test fails with that."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        text = err.decode(errors="replace") if isinstance(err, bytes) else (err or "")
        pytest.fail(f"still stopping {timeout:.0f} s after the signal; where its threads waited:\n{text[-6000:]}")


def output_of(proc: subprocess.Popen) -> str:
    """The tail of what an ended ``proc`` printed on its pipes."""
    try:
        out, err = proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError):  # still running, or the pipes were read already
        return ""
    text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
    return f"{text(out)[-2000:]}\n{text(err)[-3000:]}"


def no_display_env() -> dict:
    """Our environment without DISPLAY (so the command starts its own Xvfb), importing this checkout."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("DISPLAY", None)
    return env


def xvfb_pid(text: str) -> int:
    """The pid in a command's "started Xvfb on :N (pid P)" line."""
    m = re.search(r"started Xvfb on :\d+ \(pid (\d+)\)", text)
    assert m, f"no report of starting Xvfb in:\n{text}"
    return int(m.group(1))


def quiet(events: list):
    """A ``say``/log callback that keeps the messages in ``events`` instead of printing them."""
    return events.append


def read_json_line(proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    """First stdout line of ``proc`` that is a JSON object (the child's pids report), within ``timeout``."""
    return json.loads(read_line(proc, b"{", timeout))


def read_line(proc: subprocess.Popen, prefix: bytes, timeout: float = 60.0) -> bytes:
    """First stdout line of ``proc`` (a binary pipe) starting with ``prefix``, within ``timeout``."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"child printed no line starting {prefix!r} within {timeout}s; got {buf[-2000:]!r}")
            if not sel.select(timeout=remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"child exited ({proc.wait()}) before reporting: {buf!r}\n{err[-3000:]}")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(prefix):
                    return line
    finally:
        sel.close()
