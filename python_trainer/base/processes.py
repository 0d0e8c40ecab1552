"""Child processes: start one in its own session, run one to the end within a timeout, find and end a process tree.

The launcher (game instances, Xvfb), playback (the game with a policy inside), profiling and the game listing all
start processes through `spawn`, so none of them can leave a child running: a timeout, an exception or Ctrl-C ends
the child's whole tree, and however this process ends (SIGKILL, SIGHUP, a crash) the kernel sends every child it
started SIGKILL (Linux's parent-death signal, set in the child before it runs the program).

The parent-death signal fires when the *thread* that started the child ends, not the process. `spawn` therefore
starts children from the main thread, or, when called from another thread (a short-lived worker may start a
launcher), from one daemon thread of its own that lives as long as the process.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence

import psutil

TERM_GRACE_S = 2.0  # SIGTERM, then this long before SIGKILL
LOG_TAIL_LINES = 20
_ENDING_SIGNALS = {signal.SIGINT, signal.SIGTERM}
DEATH_SIGNAL = signal.SIGKILL  # what a child gets when we die: it cannot be caught, so every kind of child ends
_PR_SET_PDEATHSIG = 1
if sys.platform.startswith("linux"):
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
else:  # pragma: no cover - the trainer runs on Linux; elsewhere children are ended by close() and atexit only
    _prctl = None


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


def descendants(pid: Optional[int] = None) -> list[psutil.Process]:
    """The processes below ``pid`` (default: this one): its children, theirs, and so on; [] when it is gone. Kept as
    psutil objects, a descendant can still be ended once its parent has quit (it is reparented then), and safely:
    psutil checks a pid was not reused before it signals."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def end_process_tree(pids: Sequence[int], term_grace: float = TERM_GRACE_S) -> None:
    """SIGTERM every process in the trees rooted at ``pids``, wait, then SIGKILL what is left. Never raises."""
    procs = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            continue
        procs.extend(descendants(pid))
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


def die_with_parent(parent_pid: int) -> None:
    """This process gets DEATH_SIGNAL when ``parent_pid`` (its parent) dies, for a child Python starts itself
    (multiprocessing's): an ended trainer leaves no collector behind, even when SIGKILLed."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl: the signal will never come
            os.kill(os.getpid(), DEATH_SIGNAL)


def lower_priority(niceness: int) -> int:
    """Give every thread of this process at least ``niceness`` (Linux's nice, 0-19; a thread's own on Linux, so each
    one is set) and return this thread's niceness after. A process may raise its niceness but not lower it again, so
    a thread already nicer is left as it is; so are the children already started (those started later inherit it)."""
    if not hasattr(os, "setpriority"):  # pragma: no cover - the trainer runs on Linux
        return 0
    tids = [int(t) for t in os.listdir("/proc/self/task")] if os.path.isdir("/proc/self/task") else [0]
    for tid in tids:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
        except (ProcessLookupError, PermissionError):
            pass  # a thread that ended meanwhile; a nicer one is already where we want it
    return os.getpriority(os.PRIO_PROCESS, 0)


def _child_setup(parent_pid: int, batch: bool) -> None:
    """Runs in the child between fork and exec: let it be interrupted again, and have it die with its parent (and,
    ``batch``, schedule it as SCHED_BATCH)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING_SIGNALS)
    if batch:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    die_with_parent(parent_pid)


def _popen(cmd: Sequence[str], kwargs: dict) -> subprocess.Popen:
    parent, batch = os.getpid(), bool(kwargs.pop("batch", False))
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
    try:
        return subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=lambda: _child_setup(parent, batch),
                                **kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


_SPAWN_REQUESTS: "queue.SimpleQueue" = queue.SimpleQueue()
_SPAWNER_LOCK = threading.Lock()
_spawner: Optional[threading.Thread] = None


def _serve_spawns() -> None:
    while True:
        future, cmd, kwargs = _SPAWN_REQUESTS.get()
        try:
            future.set_result(_popen(cmd, kwargs))
        except BaseException as e:
            future.set_exception(e)


def spawn(cmd: Sequence[str], **kwargs) -> subprocess.Popen:
    """Popen in its own session that dies with this process, with Ctrl-C held back until Popen has returned: an
    interrupt arriving while the child starts would otherwise leave a running child that nobody holds a handle to.

    From a thread other than the main one, the child is started on the spawner thread (see the module's docstring).
    ``batch=True`` schedules the child (and its threads) as SCHED_BATCH: woken, it does not preempt the process that
    woke it (Linux's wakeup preemption), but waits for a free core or the next tick.
    """
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return _popen(cmd, kwargs)
    with _SPAWNER_LOCK:
        if _spawner is None:
            _spawner = threading.Thread(target=_serve_spawns, name="godot-ppo spawner", daemon=True)
            _spawner.start()
    future: concurrent.futures.Future = concurrent.futures.Future()
    _SPAWN_REQUESTS.put((future, list(cmd), kwargs))
    return future.result()


def run_to_end(cmd: Sequence[str], timeout: float, env=None, cwd=None) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end and return its output as text; ``returncode`` is None when it did not end within
    ``timeout`` (it and its children are ended then, as on an exception or Ctrl-C)."""
    proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
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
