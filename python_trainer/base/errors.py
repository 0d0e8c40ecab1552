"""What every command does with a problem the user can fix: one class for it, and one way to say an error in a line.

`UserError`: the base of the errors a command prints as one line after the command's name (a bad flag, a run folder that
cannot be resumed, a cluster that does not answer): the message names the problem and the fix.
`one_line(e)`: an exception as one line, for messages that must stay one line (a stop, a warning).
"""

from __future__ import annotations

import sys


class UserError(Exception):
    """A problem the user can fix, said in one line that names the fix; the command line (cli.py) prints it after the
    command's name and exits with ``status``: 2 for what the user gave (a flag, a file), 1 for what happened while
    running (a game that crashed, a disk that filled up)."""

    status = 2

    def __init__(self, *args, status: int | None = None):
        super().__init__(*args)
        if status is not None:
            self.status = status


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
