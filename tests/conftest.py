"""Fixtures (the real exports, skipped with a clear reason when missing; the fake game) and settings for every test.
The helpers tests share are in helpers.py."""

import os
import signal

import pytest

from helpers import FAKE

# Every Ray a test starts (clusters, `--ray-address local`, and the children that inherit this) listens on 127.0.0.1
# only: on Linux Ray otherwise binds the machine's network address. Ray reads this when it starts.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

# The signal tests send SIGINT/SIGTERM/SIGHUP to the commands they start, and a command keeps a signal ignored that
# it inherited ignored (`nohup make test` ignores SIGHUP, `make test &` SIGINT: signals.py respects that). The
# commands must inherit the default whatever started pytest, so this process puts the defaults back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # what Python installs when SIGINT is not ignored
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


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
    return list(FAKE)
