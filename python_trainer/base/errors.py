"""What every command does with a problem the user can fix: one class for it, and one way to say an error in a line.

`UserError`: the base of the errors a command prints as one line after the command's name (a bad flag, a run folder that
cannot be resumed, a cluster that does not answer): the message names the problem and the fix.
`Fault`: its kind for what happened while running (a game that crashed, a disk that filled up).
`EXIT_STATUS`: each kind's exit status, the one table cli.py reads (`exit_status(e)`); no command picks a status.
`one_line(e)`: an exception as one line, for messages that must stay one line (a stop, a warning).
"""

from __future__ import annotations

import sys


USER, FAULT = "user", "fault"
EXIT_STATUS = {USER: 2, FAULT: 1}  # an error's kind -> the command's exit status (a signal N: 128 + N, signals.py)


class UserError(Exception):
    """A problem the user can fix, said in one line that names the fix; the command line (cli.py) prints it after the
    command's name and exits with its kind's status (EXIT_STATUS): 2 for what the user gave (a flag, a file)."""

    kind = USER

    @property
    def status(self) -> int:
        return exit_status(self)


class Fault(UserError):
    """What happened while running (a game that would not start or crashed, a disk that filled up, a worker lost),
    said in one line as a UserError is: exit status 1. Raise it, or a class of it; never pick a status."""

    kind = FAULT


def exit_status(e: UserError) -> int:
    """The exit status of a command that ended with ``e``: its kind's, from EXIT_STATUS."""
    return EXIT_STATUS[e.kind]


def one_line(e: BaseException) -> str:
    """``e`` in one line: its message when it has one line, its first and last lines when it has several, its
    type's name when it has none."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def say(msg: str) -> None:
    """A line on stderr, unless stderr is gone (a hung-up terminal, a closed pipe): the work goes on either way."""
    try:
        print(msg, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
