"""The exit status is decided in one place: an error's kind (base/errors.py's EXIT_STATUS: what the user gave 2, a
fault 1), read by the command line (cli.py); a signal N ends a command with 128 + N. No command picks a status: it
raises an error of its kind. No game starts here."""

import ast
import os
import signal
import sys
import time
import types

import pytest

from helpers import REPO
from python_trainer import cli
from python_trainer.base.errors import EXIT_STATUS, FAULT, USER, Fault, UserError
from python_trainer.base.files import OutputError
from python_trainer.base.flags import FlagError
from python_trainer.envs.failures import (DisplayError, GameClosedError, InstanceCrashedError, InstanceStartError,
                                          WorkerLostError)
from python_trainer.envs.game import GameBugError, GameError
from python_trainer.envs.gym_env import MissingDependencyError, UnknownEnvError, UnsupportedSpaceError
from python_trainer.envs.protocol import GodotConnectionError, MessageTooLargeError
from python_trainer.run.run_folder import TrainError
from python_trainer.run.tracking import TrackingFailed
from python_trainer.tools.export import ExportError
from python_trainer.tools.hub import HubError, UploadFailed

PACKAGE = REPO / "python_trainer"

# Every kind of error a command ends with, and its exit status.
KINDS = [
    (UserError, 2), (FlagError, 2), (OutputError, 2), (TrainError, 2), (HubError, 2), (GameError, 2), (GameBugError, 2),
    (UnknownEnvError, 2), (UnsupportedSpaceError, 2), (MissingDependencyError, 2),
    (Fault, 1), (InstanceStartError, 1), (DisplayError, 1), (InstanceCrashedError, 1), (GameClosedError, 1),
    (WorkerLostError, 1), (GodotConnectionError, 1), (MessageTooLargeError, 1), (ExportError, 1), (TrackingFailed, 1),
    (UploadFailed, 1),
]
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]


def run_command(monkeypatch, body) -> int:
    """`godot-ppo fake` whose command is ``body``, through cli.main as every command runs."""
    module = types.ModuleType("fake_command")
    module.main = lambda argv: body()
    monkeypatch.setitem(sys.modules, "fake_command", module)
    monkeypatch.setitem(cli.COMMANDS, "fake", ("fake_command", "main", "a command of this test"))
    return cli.main(["fake"])


def test_the_kinds_of_error_are_two_and_each_has_one_exit_status():
    assert EXIT_STATUS == {USER: 2, FAULT: 1}
    assert UserError.kind == USER and Fault.kind == FAULT and issubclass(Fault, UserError)
    with pytest.raises(TypeError):  # no error carries a status of its own choosing
        UserError("a message", status=1)


@pytest.mark.parametrize("error, status", KINDS, ids=[k.__name__ for k, _ in KINDS])
def test_a_command_that_raises_an_error_exits_with_its_kinds_status_and_one_line(error, status, monkeypatch, capsys):
    message = "the problem, and its fix"

    def body():
        raise error("instance 0", message) if issubclass(error, GodotConnectionError) else error(message)

    assert run_command(monkeypatch, body) == status
    err = capsys.readouterr().err
    assert err.startswith("godot-ppo fake: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("signum, status", SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_a_signal_ends_a_command_with_128_plus_its_number(signum, status, monkeypatch, capsys):
    def body():
        os.kill(os.getpid(), signum)  # the policy cli.main installs raises it here, as a Ctrl-C
        time.sleep(10)
        raise AssertionError("the signal did not end the command")

    start = time.monotonic()
    assert run_command(monkeypatch, body) == status
    assert time.monotonic() - start < 5
    assert f"godot-ppo fake: interrupted by {signum.name}" in capsys.readouterr().err


def _status_choices(path):
    """Where a module picks an exit status instead of raising an error of its kind: an error raised with status=,
    an assignment to an attribute .status or .kind, or a class that sets its own status or kind."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            found += [node.lineno for k in node.exc.keywords if k.arg == "status"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [node.lineno for t in targets if isinstance(t, ast.Attribute) and t.attr in ("status", "kind")]
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) in ("status", "kind")
                                                        for t in stmt.targets):
                    found.append(stmt.lineno)
    return [f"{path.relative_to(REPO)}:{line}" for line in found]


def test_no_module_but_errors_py_decides_an_exit_status():
    errors_py = PACKAGE / "base" / "errors.py"
    assert _status_choices(errors_py), "the check finds errors.py's own kinds: it can see what it looks for"
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != errors_py for hit in _status_choices(path)]
    assert found == [], f"these pick an exit status; raise a UserError or a Fault (base/errors.py) instead: {found}"
