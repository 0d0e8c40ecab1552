"""What `godot-ppo train` says when it stops before its end (a signal, a crashed instance, a full disk, a closed
stdout, a bug): one line with the cause, and what was saved or lost with the --resume command that continues."""

from __future__ import annotations

import os
import signal
import sys
import traceback

from python_trainer.base.errors import one_line
from python_trainer.base.files import is_disk_full, write_atomic
from python_trainer.base.signals import signum_of
from python_trainer.checkpoint import CHECKPOINT_NAME
from python_trainer.envs.failures import GameClosedError, InstanceCrashedError, InstanceStartError, WorkerLostError
from python_trainer.envs.game import GameError
from python_trainer.envs.protocol import GodotConnectionError

ERROR_LOG = "error.log"  # RUN_DIR/error.log: the traceback of a bug that ended training (describe_crash)


def stop_message(e, run_dir, *, ready, saved, save_error, saved_step, done_step, resumed) -> tuple[int, str]:
    """(exit status, message) for ``e`` that ended training: 128 + N for signal N, whose message starts with
    "interrupted by SIG..."; 0 when the editor's game was closed (the person's own way to stop, like Ctrl-C); else 1,
    with the cause first (cli.py prints it as the command's error line).
    ``saved``: the checkpoint of the last completed update (``done_step``) is on disk; ``save_error``: why it could
    not be written; ``saved_step``: the step of the newest checkpoint on disk (None: none yet)."""
    full = next((x for x in (e, save_error) if is_disk_full(x)), None)
    if isinstance(e, KeyboardInterrupt):
        status, head = 128 + signum_of(e), f"\ninterrupted by {signal.Signals(signum_of(e)).name}: "
    elif isinstance(e, GameClosedError):
        status, head = 0, f"{one_line(e)}\n"
    elif full is not None:  # one line: no traceback to keep (error.log would not fit either)
        status, head = 1, f"the disk is full ({os_error(full)}): "
    else:
        status, head = 1, f"{describe_crash(e, run_dir)}\n"
    checkpoint = run_dir / CHECKPOINT_NAME
    if saved:
        return status, (f"{head}checkpoint at global step {done_step} (the last completed update) in {checkpoint}; "
                        f"continue with: godot-ppo train --resume {run_dir}")
    if save_error is not None:  # what was kept, what was lost, in the same line
        why = "" if full is not None else f" ({one_line(save_error)})"
        if saved_step is None:
            kept = f"no checkpoint was written yet: the {done_step} steps trained are lost"
        else:
            kept = (f"the checkpoint at step {saved_step} is intact ({checkpoint}); the {done_step - saved_step} steps "
                    f"trained after it are lost; {'free some space, then ' if full is not None else ''}continue from "
                    f"it with: godot-ppo train --resume {run_dir}")
        return status, f"{head}could not write the checkpoint of step {done_step}{why}: {kept}"
    kept = f"; {checkpoint} is unchanged" if resumed else ""
    return status, f"{head}{'nothing saved' if ready else 'training had not started: nothing to save'}{kept}"


def describe_crash(e, run_dir):
    """One line for an error that ended training once the agent existed (the traceback of an unexpected one goes to
    RUN_DIR/error.log)."""
    if isinstance(e, BrokenPipeError):
        return "an output of the trainer was closed under it (broken pipe, e.g. `godot-ppo train ... | head`)"
    if isinstance(e, InstanceCrashedError):
        return f"{one_line(e)} (--max-restarts allows more restarts)"
    if isinstance(e, (InstanceStartError, GodotConnectionError, GameError, WorkerLostError)):
        return one_line(e)
    try:  # whole or not there: a disk that fills up meanwhile leaves no empty error.log
        write_atomic(run_dir / ERROR_LOG, "".join(traceback.format_exception(e)))
        return f"{type(e).__name__}: {one_line(e)} (traceback in {run_dir / ERROR_LOG})"
    except OSError:
        return f"{type(e).__name__}: {one_line(e)}"


def os_error(e: OSError) -> str:
    return e.strerror + (f": {e.filename}" if e.filename else "") if e.strerror else one_line(e)


def best_effort(fn):
    """``fn()``, whose failure on the way out must not hide why training stopped."""
    try:
        fn()
    except Exception:
        pass


def quiet_closed_stdout():
    """When stdout is a closed pipe (`| head`), point it at /dev/null: nothing more fails, and Python's own flush at
    exit prints no 'Exception ignored ... BrokenPipeError'."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
