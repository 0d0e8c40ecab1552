"""Child processes: start one in its own session, run one to the end within a timeout, end a process tree.

The launcher (game instances), playback (the game with a policy inside), profiling and the game listing all start
processes through here, so none of them can leave a child running: a timeout, an exception or Ctrl-C ends the
child's whole tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Optional, Sequence

import psutil

TERM_GRACE_S = 2.0  # SIGTERM, then this long before SIGKILL
LOG_TAIL_LINES = 20
_ENDING_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 16384) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"killed by signal {-code} (exit code {code})"
    return f"exit code {code}"


def end_process_tree(pids: Sequence[int], term_grace: float = TERM_GRACE_S) -> None:
    """SIGTERM every process in the trees rooted at ``pids``, wait, then SIGKILL what is left. Never raises."""
    procs = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            continue
        try:
            procs.extend(root.children(recursive=True))
        except psutil.Error:
            pass
        procs.append(root)
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=term_grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    if alive:
        psutil.wait_procs(alive, timeout=term_grace)


def _unblock_ending_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING_SIGNALS)


def spawn(cmd: Sequence[str], **kwargs) -> subprocess.Popen:
    """Popen in its own session, with Ctrl-C held back until Popen has returned: an interrupt arriving while the
    child starts would otherwise leave a running child that nobody holds a handle to."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
    try:
        return subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=_unblock_ending_signals, **kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_to_end(cmd: Sequence[str], timeout: float, env=None) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end and return its output as text; ``returncode`` is None when it did not end within
    ``timeout`` (it and its children are ended then, as on an exception or Ctrl-C)."""
    proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        end_process_tree([proc.pid])
        out, err = proc.communicate()
        code = None
    except BaseException:
        end_process_tree([proc.pid])
        proc.wait()
        raise
    return subprocess.CompletedProcess(list(cmd), code, out.decode(errors="replace"), err.decode(errors="replace"))
