"""The display of windowed instances: the user's $DISPLAY, or a private Xvfb started for them (one rule, used by the
launcher, play, record and profile)."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import psutil

from python_trainer.base.errors import UserError
from python_trainer.base.processes import describe_exit, end_process_tree, read_log_tail, spawn
from python_trainer.envs.failures import DisplayError, InstanceStartError

_POLL_S = 0.1
PROBE_TIMEOUT_S = 2.0  # how long an X server's socket may take to accept a connection
GODOT_NO_DISPLAY = "X11 Display is not available"  # what a windowed Godot 3 prints when it cannot open its display


def xvfb_binary() -> Optional[str]:
    """The Xvfb executable, or None when it is not installed."""
    return shutil.which("Xvfb")


def user_display() -> Optional[str]:
    """The user's own display ($DISPLAY), or None."""
    return os.environ.get("DISPLAY") or None


def no_display_message(instead: Optional[str] = "run headless", need: str = "windowed instances need a display") -> str:
    """What to say when windowed instances need a display (``need``: why) and neither $DISPLAY nor Xvfb is there;
    ``instead``: what works without one (None: nothing does, as for a game that sees through a camera)."""
    alternative = f", set DISPLAY, or {instead}" if instead else " or set DISPLAY to a running X display"
    return f"{need}: $DISPLAY is not set and Xvfb is not installed. Run `sudo apt-get install xvfb`{alternative}."


def display_answers(display: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether an X server accepts connections at ``display`` (":N", "unix:N" or "HOST:N", each with an optional
    ".SCREEN"): its local socket (the abstract one, then the file in /tmp/.X11-unix) or TCP port 6000 + N on HOST.
    A form this does not know counts as answering (the game then says what it found)."""
    host, _, rest = display.rpartition(":")
    number = rest.split(".")[0]
    if not number.isdigit() or "/" in host:
        return True
    try:
        if host not in ("", "unix"):
            socket.create_connection((host, 6000 + int(number)), timeout=timeout).close()
            return True
        for address in (f"\0/tmp/.X11-unix/X{number}", f"/tmp/.X11-unix/X{number}"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(timeout)
                if probe.connect_ex(address) == 0:
                    return True
    except OSError:
        pass
    return False


def unreachable_display_message(display: str, what: str = "$DISPLAY is") -> str:
    """One line for a display that answers nothing (``what``: how it was given), and the fix."""
    unset = ("unset DISPLAY (an Xvfb is then started for the windowed instances)" if xvfb_binary() is not None else
             "unset DISPLAY and install Xvfb (`sudo apt-get install xvfb`), which is then started for them")
    return f"{what} {display}, but no X server answers there: {unset}, or set DISPLAY to a running display"


def person_display(what: str, instead: str) -> str:
    """The user's $DISPLAY for a window a person must see (``what`` they do there: "play it"), else a UserError in
    one line (a private Xvfb would show the window to nobody); ``instead``: what works without a display."""
    display = user_display()
    if display is None:
        raise UserError(f"no display ($DISPLAY is not set): a person must see the game to {what}; run this in a "
                        f"desktop session (or over ssh -X), or {instead}")
    return display


def display_available() -> bool:
    """Whether windowed instances can get a display: $DISPLAY, or Xvfb to start one."""
    return user_display() is not None or xvfb_binary() is not None


def display_lost(display: str, xvfb: Optional["Xvfb"]) -> Optional[str]:
    """None while ``display`` is there; else what became of it: ``xvfb`` (the Xvfb started for it, if one was) ended,
    or the display stopped answering."""
    if xvfb is not None:
        proc = xvfb.proc
        code = proc.poll() if proc is not None else None
        if code is None:
            return None
        return (f"the Xvfb display {display} (pid {proc.pid}) that the windowed instances ran on died "
                f"({describe_exit(code)}; its log: {xvfb.log_path})")
    return None if display_answers(display) else f"the display {display} stopped answering"


def open_display(xvfb: "Xvfb", report: Callable[[str], None], why: str = "", instead: Optional[str] = "run headless",
                 need: str = "windowed instances need a display") -> str:
    """The user's $DISPLAY, or ``xvfb`` started and reported (``why``: what it is for, or what the user should
    know about a window nobody sees). A DisplayError in one line when $DISPLAY answers nothing, or when it is not set
    and Xvfb is not installed (``need`` and ``instead``: `no_display_message`'s)."""
    display = user_display()
    if display is not None:
        if not display_answers(display):
            raise DisplayError(unreachable_display_message(display))
        return display
    if xvfb_binary() is None:
        raise DisplayError(no_display_message(instead, need))
    display = xvfb.start()
    report(f"no $DISPLAY: started Xvfb on {display} (pid {xvfb.pid}){' ' + why if why else ''}")
    return display


TEMP_LOG_PREFIX = "godot-ppo-xvfb-"


def temp_xvfb() -> "Xvfb":
    """An Xvfb (not started) for a command without a run folder to log into (play, a recording): its log goes to the
    temp dir, one per process, and is removed when the command ends, unless Xvfb failed to start (its error names the
    log). The logs of processes that ended without clean-up (SIGKILL) are removed first."""
    temp = Path(tempfile.gettempdir())
    for stale in temp.glob(f"{TEMP_LOG_PREFIX}*.log"):
        pid = stale.name[len(TEMP_LOG_PREFIX):-len(".log")]
        with contextlib.suppress(OSError):
            if pid.isdigit() and stale.stat().st_uid == os.getuid() and not psutil.pid_exists(int(pid)):
                stale.unlink()
    return Xvfb(temp / f"{TEMP_LOG_PREFIX}{os.getpid()}.log", temporary_log=True)


class Xvfb:
    """A private X server for windowed instances when there is no $DISPLAY.

    ``-displayfd`` makes Xvfb pick a free display number and write it to a pipe once it accepts clients, so
    two trainings at once never collide and nothing polls for a socket file.
    """

    def __init__(self, log_path: str | os.PathLike, screen: str = "1280x800x24", temporary_log: bool = False):
        self.log_path = Path(log_path)
        self.screen = screen
        self.temporary_log = temporary_log  # removed at the end of a `with` block, unless start() failed (said it)
        self._failed = False
        self.proc: Optional[subprocess.Popen] = None
        self.display: Optional[str] = None

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout: float = 10.0) -> str:
        """Start Xvfb and return its display (":N"); raises InstanceStartError naming the fix."""
        exe = xvfb_binary()
        if exe is None:
            raise DisplayError(no_display_message())
        r, w = os.pipe()
        try:
            with open(self.log_path, "ab") as log:
                # -noreset: by default X resets when its last client leaves, and a game that connects during the
                # reset finds no display (a probe's disconnect, or one game quitting as the next one starts)
                self.proc = spawn(
                    [exe, "-displayfd", str(w), "-screen", "0", self.screen, "-nolisten", "tcp", "-noreset"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(w,),
                )
            os.close(w)
            w = -1
            deadline = time.monotonic() + timeout
            out = b""
            while not out.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    code = self.proc.poll()
                    self.stop()
                    self._failed = True  # the error names the log: it stays
                    raise InstanceStartError(
                        f"Xvfb did not start ({describe_exit(code)}); log {self.log_path}:\n" + read_log_tail(self.log_path)
                    )
                if select.select([r], [], [], min(remaining, _POLL_S))[0]:
                    out += os.read(r, 64)
        finally:
            if w >= 0:
                os.close(w)
            os.close(r)
        self.display = ":" + out.decode().strip()
        return self.display

    def stop(self) -> None:
        if self.proc is not None:
            end_process_tree([self.proc.pid])
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None

    def __enter__(self) -> "Xvfb":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.stop()
        if self.temporary_log and not self._failed:
            self.log_path.unlink(missing_ok=True)
