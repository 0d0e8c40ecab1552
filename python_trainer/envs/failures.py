"""The ways a game instance fails the trainer: it did not start, it had no display, it crashed past its restarts, the
editor's game was closed, or the worker that held it (a Ray actor) was lost. One place, so that the launcher, the Xvfb
display and the Ray workers raise the same errors and every command catches them by one name. Each is a `Fault`
(base/errors.py): a command that does not handle one ends with its message as its error line, exit status 1."""

from python_trainer.base.errors import Fault


class InstanceStartError(Fault, RuntimeError):
    """An instance could not be started or never connected (exit code / timeout, with its log tail)."""


class DisplayError(InstanceStartError):
    """Windowed instances have no display: none is set and Xvfb is missing, $DISPLAY names no X server that answers,
    or the display died under them (the Xvfb started for them ended). Nothing can start or restart an instance then;
    the message names the display and the fix in one line."""


class InstanceCrashedError(Fault, RuntimeError):
    """An instance died or stopped answering and its restart budget is spent."""


class GameClosedError(InstanceCrashedError):
    """The game a person started (the editor's Play, envs/editor.py) stopped: nothing can restart it, so training
    stops there, with a checkpoint, as on Ctrl-C."""


class WorkerLostError(Fault, RuntimeError):
    """A rollout worker that runs its own instances elsewhere (a Ray actor, ray_rollouts.py, or --async's collector
    process, async_rollouts.py) failed for good: out of restarts, or its instances out of theirs. The message names
    the worker and its node."""
