"""One signal policy for every command: SIGINT, SIGTERM and SIGHUP all end a command the way Ctrl-C does.

`signal_policy()` (installed by cli.main around every command, and by a command's own main when it is called
directly) makes each of them raise `Interrupted` (a KeyboardInterrupt) in the main thread, so `timeout`,
`docker stop`, a batch scheduler or a closed SSH session get what Ctrl-C gets (`train`: a checkpoint at the last
completed update and the --resume hint; every command: its Godot instances closed). A signal that is ignored when
the command starts (SIG_IGN: `cmd &` in a script ignores SIGINT, `nohup` SIGHUP) stays ignored. Only the first
signal interrupts; later ones are noted and do not cut the clean-up (the checkpoint being written) short
(`hold_signals`; one that comes STUCK_AFTER_S after the first also prints where each thread waits), a first
one that arrives while a checkpoint is written is raised once it is whole (`signals_deferred`), and one that arrives
inside the standard library's locking code is raised once out of it (`_raise_where_safe`). Exit status: 130
for SIGINT, 128 + N for signal N (143 SIGTERM, 129 SIGHUP) where a command's Ctrl-C status is 130 (train,
profile); `launch` and `play`, whose normal stop is Ctrl-C, exit 0.

Below every other module: the commands import it, and nothing imports the command line (cli).
"""

import contextlib
import faulthandler
import os
import queue
import signal
import sys
import threading
import time

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A later signal this long after the first means the stop itself is stuck: that signal also prints where each thread
# waits, so a hang can be reported (a person's impatient second Ctrl-C, sooner, gets the one-line note only).
STUCK_AFTER_S = 15.0


# CPython runs a signal handler between two bytecodes, so the exception it raises can cut the standard library's own
# locking code anywhere: right after Condition.__enter__ took its lock but before the caller's `with` holds it, or
# in Event.set between its flag and its notify. The lock then stays held (a loop of `with condition: pass` interrupted
# by SIGINT leaves it held about one time in two), and the clean-up after the signal hangs on it forever: a
# TensorBoard writer's close waits on its queue's lock, a thread on an Event that was never notified. So a signal that
# arrives in that code is raised at the next call or return outside it (a profile function sees each), as if that call
# had raised it, but never as a call of __exit__; or where that code blocks: Condition.wait and
# Thread.join's wait undo themselves, so a signal can always end a wait. A second signal does not wait.
_LOCK_CODE = frozenset({threading.__file__, queue.__file__})
_THIS_FILE = __file__  # the handler's own frames, which the profile function sees too, are not where to raise
_BLOCKING_WAITS = frozenset({"wait", "_wait_for_tstate_lock"})
_WITH_CALLS = frozenset({"__enter__", "__exit__"})


def _in_lock_code(frame) -> bool:
    """Whether ``frame`` is where a signal must not be raised: the locking code, an __enter__ or __exit__, or this
    module's own handler."""
    if frame is None:
        return False
    code = frame.f_code
    return code.co_filename in _LOCK_CODE or code.co_name in _WITH_CALLS or code.co_filename == _THIS_FILE


def _is_blocking_wait(frame) -> bool:
    return frame.f_code.co_filename in _LOCK_CODE and frame.f_code.co_name in _BLOCKING_WAITS


def _raise_where_safe(frame, event, arg) -> None:
    """The main thread's profile function while a signal waits (the comment above): raises it at the first safe
    call or return."""
    if event == "call":  # ``frame``: the called function's
        safe = _is_blocking_wait(frame) or (not _in_lock_code(frame.f_back) and frame.f_code.co_name != "__exit__")
    elif event == "c_call":  # ``frame``: the caller's; ``arg``: the C function
        safe = not _in_lock_code(frame) and getattr(arg, "__name__", None) != "__exit__"
    else:
        safe = event == "return" and not (_in_lock_code(frame) or _in_lock_code(frame.f_back))
    if safe:
        signum = _stop_waiting()
        _Policy.received, _Policy.received_at = signum, time.monotonic()
        if not _Policy.holding:
            raise Interrupted(signum)


def _stop_waiting() -> int:
    """The signal that waited; the profile function is off."""
    sys.setprofile(None)
    signum, _Policy.waiting = _Policy.waiting, None
    return signum


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived (``signum``); every `except KeyboardInterrupt` clean-up path handles it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Policy:
    depth = 0  # nested signal_policy() blocks (cli.main, then a command's main): only the outermost installs
    previous: dict = {}
    received = None  # the first ending signal, once one arrived
    received_at = 0.0  # its time.monotonic()
    holding = 0  # hold_signals() blocks: signals are noted, not raised
    waiting = None  # a signal that waits to be raised outside the locking code (_raise_where_safe)
    previous_hook = sys.unraisablehook  # the unraisable hook before the policy's (_unraisable)


def _handler(signum, frame):
    if _Policy.waiting is not None:
        _stop_waiting()  # a second signal while the first waits: raised at once
    elif _Policy.received is None and not _Policy.holding and sys.getprofile() is None:  # (a profiler's stays)
        if _in_lock_code(frame) and not _is_blocking_wait(frame):
            _Policy.waiting = signum
            sys.setprofile(_raise_where_safe)
            return
    if _Policy.received is None:
        _Policy.received, _Policy.received_at = signum, time.monotonic()
        if not _Policy.holding:
            raise Interrupted(signum)
    note = f"\ngodot-ppo: {signal.Signals(signum).name} received: already stopping (saving, closing the instances)\n"
    stuck = time.monotonic() - _Policy.received_at
    if stuck > STUCK_AFTER_S:
        note += f"godot-ppo: still stopping {stuck:.0f} s after the first signal; where each thread waits:\n"
    try:
        os.write(2, note.encode())
        if stuck > STUCK_AFTER_S:
            faulthandler.dump_traceback(file=2, all_threads=True)
    except OSError:  # stderr closed (a hung-up terminal)
        pass


def signum_of(exc: BaseException) -> int:
    """The signal behind an interruption: the exception's own; for a plain KeyboardInterrupt the first ending signal
    the policy received (Ray's blocking calls run our handler from C and raise a plain KeyboardInterrupt in place of
    its `Interrupted`: a SIGTERM to a Ray run's driver is still a SIGTERM), else SIGINT (a Ctrl-C without the policy)."""
    return getattr(exc, "signum", None) or _Policy.received or signal.SIGINT


@contextlib.contextmanager
def signal_policy():
    """Install the policy for the duration of a command (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _Policy.depth += 1
    if _Policy.depth == 1:
        _Policy.received, _Policy.holding, _Policy.previous = None, 0, {}
        for sig in ENDING_SIGNALS:
            current = signal.getsignal(sig)
            if current == signal.SIG_IGN:
                continue  # ignored by whoever started us: stays ignored
            _Policy.previous[sig] = current
            signal.signal(sig, _handler)
        _Policy.previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        yield
    finally:
        _Policy.depth -= 1
        if _Policy.depth == 0:
            for sig, prev in _Policy.previous.items():
                signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
            _Policy.previous = {}
            sys.unraisablehook = _Policy.previous_hook


def _unraisable(unraisable) -> None:
    """Where Python cannot raise (a weakref callback or ``__del__`` run by the garbage collector, an at-fork hook),
    the handler's `Interrupted` is printed and dropped, and the command would go on as if no signal came: a tune
    interrupted in its first trial finished the trial and exited 0. So the signal waits again, as one inside the
    locking code does, and is raised at the first call or return after that code (`_raise_where_safe`)."""
    exc = unraisable.exc_value
    if (isinstance(exc, Interrupted) and _Policy.received == exc.signum and not _Policy.holding
            and threading.current_thread() is threading.main_thread() and sys.getprofile() is None):
        _Policy.received, _Policy.waiting = None, exc.signum
        sys.setprofile(_raise_where_safe)
        return
    _Policy.previous_hook(unraisable)


@contextlib.contextmanager
def hold_signals():
    """While a command saves its work on the way out: an ending signal is noted, not raised."""
    _Policy.holding += 1
    try:
        yield
    finally:
        _Policy.holding -= 1


@contextlib.contextmanager
def signals_deferred():
    """A write that must not be cut (a checkpoint: torch.save's C++ writer turns an exception raised inside it into
    its own RuntimeError, "unexpected pos"): an ending signal that arrives during the block is raised as
    `Interrupted` once the block's work is done, so the command stops as it would have, with the file whole."""
    first = _Policy.received is None
    with hold_signals():
        yield
    if first and _Policy.received is not None and not _Policy.holding:
        raise Interrupted(_Policy.received)


def interrupted_status(code: int) -> int:
    """A command's exit status after the policy: 130 (its Ctrl-C status) becomes 128 + the signal that arrived."""
    if code == 130 and _Policy.received is not None:
        return 128 + int(_Policy.received)
    return code
