"""Shared fixtures: the real headless export (skipped with a clear reason when missing), the fake game, and
helpers that wait (with a deadline, polling) for processes to be gone."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKE_GAME = TESTS / "fake_game.py"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Every Ray a test starts (clusters, `--ray-address local`, and the children that inherit this) listens on 127.0.0.1
# only: on Linux Ray otherwise binds the machine's network address. Ray reads this when it starts.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


@pytest.fixture(scope="session")
def headless_export():
    """Path of exports/headless/rl_games.x86_64; skips the test when the export is missing."""
    from python_trainer.base import paths

    try:
        return paths.export_binary(headless=True)
    except paths.MissingExportError as e:
        pytest.skip(f"needs the real headless export: {e}")


@pytest.fixture(scope="session")
def windowed_export():
    from python_trainer.base import paths

    try:
        return paths.export_binary(headless=False)
    except paths.MissingExportError as e:
        pytest.skip(f"needs the real windowed export: {e}")


@pytest.fixture
def fake_binary():
    """argv prefix that runs the fake game (speaks the game side of the protocol) instead of Godot."""
    return [sys.executable, str(FAKE_GAME)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def descendants(pid: int) -> list:
    """pids of every process below ``pid`` (empty once it is gone)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def wait_gone(pids, timeout: float = 10.0) -> list:
    """Poll until none of ``pids`` is alive (zombies count as gone); returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def read_json_line(proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    """First stdout line of ``proc`` that is a JSON object (the child's pids report), within ``timeout``."""
    return json.loads(read_line(proc, b"{", timeout))


def read_line(proc: subprocess.Popen, prefix: bytes, timeout: float = 60.0) -> bytes:
    """First stdout line of ``proc`` starting with ``prefix``, within ``timeout``."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"child printed no JSON line within {timeout}s; got {buf[-2000:]!r}")
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
