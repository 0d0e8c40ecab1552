"""The process-wide clean-up of launchers: at exit, and on SIGINT or SIGTERM (closing every open launcher, then
acting as the signal's previous handler would), no game instance outlives the trainer's Python."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref

LIVE: "weakref.WeakSet" = weakref.WeakSet()  # every launcher still open (InstanceLauncher.start adds itself)
_PREVIOUS_HANDLERS: dict = {}
_GLOBAL_LOCK = threading.RLock()
_ATEXIT_REGISTERED = False


def close_all_launchers() -> None:
    """Close every launcher still open in this process (atexit and the signal handlers call this)."""
    for launcher in list(LIVE):
        try:
            launcher.close()
        except Exception as e:  # pragma: no cover - best effort at exit
            print(f"godot-ppo: error while closing Godot instances: {e}", file=sys.stderr)


def _signal_handler(signum, frame):
    close_all_launchers()
    prev = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # for SIGINT this is default_int_handler: raises KeyboardInterrupt
    else:  # SIG_DFL (or None): die of the same signal, as if we had not been here
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install_cleanup_hooks() -> None:
    global _ATEXIT_REGISTERED
    with _GLOBAL_LOCK:
        if not _ATEXIT_REGISTERED:
            atexit.register(close_all_launchers)
            _ATEXIT_REGISTERED = True
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be installed from the main thread; atexit still covers exits
        for sig in (signal.SIGINT, signal.SIGTERM):
            current = signal.getsignal(sig)
            if current is _signal_handler or current == signal.SIG_IGN:
                continue  # an ignored signal (`cmd &` in a script ignores SIGINT) must not close the instances
            _PREVIOUS_HANDLERS[sig] = current
            signal.signal(sig, _signal_handler)
