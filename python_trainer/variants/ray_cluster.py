"""The Ray a run uses (`--ray-address`): joined or started (``local``, on 127.0.0.1 only), watched, and left; and the
guardian that speaks for the learner when Ray ends it.

Ray's own faults reach the user as our one-line errors. A lost GCS or a lost local raylet is found by `RayHealth`
while the learner waits for its workers (a GCS call with a timeout, and the local Ray's processes), and raised as
`RayLostError`: the run stops as on any fault, with its checkpoint, and `close` then makes no call to Ray (its
calls would wait for the GCS, then Ray's C++ aborts the process) and ends the process by os._exit once the error is
said. Ray may also end the learner itself, at once and with no Python (`_Exit(1)` when the object store of its node
goes): the guardian, a small process of its own, then says so in one line on the learner's stderr, releases
RUN_DIR/train.lock and ends the local Ray's processes. SIGTERM while Ray starts is held until ray.init returns (Ray
would install its own handler, whose sys.exit skips the checkpoint, or be cut in its C++), then raised.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from python_trainer.base.errors import UserError, one_line
from python_trainer.base.processes import descendants
from python_trainer.base.signals import signals_deferred
from python_trainer.envs.failures import WorkerLostError

LOCAL = "local"  # --ray-address local: start a Ray on this machine for the run, stop it at the end
LOOPBACK = "127.0.0.1"  # where a local Ray listens (listen_on_loopback)
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray binds the loopback address, not the network's
CONNECT_TIMEOUT_S = 5.0  # an address with nothing behind it is named within this
HEALTH_EVERY_S = 2.0  # how often the learner, waiting for its workers, checks that Ray's GCS answers
GCS_TIMEOUT_S = 5.0  # a GCS that does not answer a call within this is lost


class RaySetupError(UserError):
    """The cluster cannot run the workers (no cluster at the address, too few CPUs, a node with other game files)."""


class RayLostError(WorkerLostError):
    """Ray itself failed under the run (its GCS or the local raylet ended): the workers cannot be reached again."""


def _check_address(address):
    """An error within seconds, naming the address, when nothing answers at HOST:PORT."""
    if address in (LOCAL, "auto") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RaySetupError(f"--ray-address {address}: give HOST:PORT of a Ray head (`ray start --head` prints it, e.g. "
                            "10.0.0.5:6379), or local")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise RaySetupError(
            f"--ray-address {address}: no Ray cluster answers there ({e.strerror or e}); start one with "
            f"`ray start --head --port={port}` on {host}, or train on this machine with --ray-address local"
        ) from None


_GUARDIAN = """
import fcntl, os, sys, psutil
driver, run_dir, watched = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
said = sys.stdin.buffer.read()  # EOF: the driver ended, however it ended ("bye" first when it spoke for itself)
procs, names = [], {}
for arg in watched:
    pid, created, name = arg.split(":", 2)
    try:
        p = psutil.Process(int(pid))
        if abs(p.create_time() - float(created)) < 0.01:
            procs.append(p)
            names[p.pid] = name
    except psutil.Error:
        pass
if said != b"bye":
    try:
        psutil.Process(driver).wait(5)
    except psutil.Error:
        pass
    def ended(p):
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True
    lost = [f"{names[p.pid]} (pid {p.pid})" for p in procs if names[p.pid] in ("raylet", "gcs_server") and ended(p)]
    lost = [name for name in lost if name.startswith("raylet")] or lost  # (the GCS of a local Ray follows its driver)
    cause = f"Ray's {lost[0]} ended, and Ray ended the learner with it" if lost else (
        "Ray ended it (its node's raylet or object store was lost), or it was killed")
    lock = os.path.join(run_dir, "train.lock")
    try:
        with open(lock, "r+") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            if f.read().strip() == str(driver):
                os.unlink(lock)
    except OSError:
        pass
    ckpt = os.path.join(run_dir, "checkpoint.pt")
    kept = (f"the checkpoint {ckpt} (the last one written) is kept; continue with: godot-ppo train --resume {run_dir}"
            if os.path.exists(ckpt) else "no checkpoint was written yet")
    try:
        from python_trainer.cli import error_line  # the command's own words (the package is on PYTHONPATH)
        os.write(2, (error_line("train", f"the learner (pid {driver}) ended without a word: {cause}; {kept}") + "\\n").encode())
    except Exception:  # a closed stderr, a package moved meanwhile: the Ray processes are still ended
        pass
for p in procs:
    try:
        p.terminate()
    except psutil.Error:
        pass
for p in psutil.wait_procs(procs, timeout=3)[1]:
    try:
        p.kill()
    except psutil.Error:
        pass
"""


class Guardian:
    """A small process in its own session that outlives the learner: when the learner ends without saying "bye"
    (Ray ended it, or it was killed) it says so on the learner's stderr and releases the run's lock; either way it
    then ends the local Ray's processes (``pids_before``: the learner's children before Ray started; None when
    joining a cluster, whose processes are its own). A SIGKILLed driver takes the processes it started itself along
    (Ray sets their parent-death signal), but not the agents the raylet starts (ray::DashboardAgent,
    ray::RuntimeEnvAgent). The pipe's write end lives only in the learner: its end is the EOF."""

    def __init__(self, run_dir, pids_before: Optional[set]):
        import subprocess

        import psutil

        args = []
        for p in [] if pids_before is None else [p for p in descendants() if p.pid not in pids_before]:
            try:
                args.append(f"{p.pid}:{p.create_time()}:{_process_kind(p)}")
            except psutil.Error:
                pass
        self.proc = subprocess.Popen([sys.executable, "-c", _GUARDIAN, str(os.getpid()), str(run_dir), *args],
                                     stdin=subprocess.PIPE, start_new_session=True, stdout=subprocess.DEVNULL,
                                     env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
                                         str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))))
        self.local = {kind: int(a.split(":")[0]) for a in args for kind in ("raylet", "gcs_server")
                      if a.endswith(":" + kind)}

    def end(self, timeout: float = 10.0) -> None:
        """The learner speaks for itself: the guardian ends the local Ray's processes, then itself."""
        try:
            self.proc.stdin.write(b"bye")
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except Exception:
            pass


def _process_kind(p) -> str:
    name = p.name()
    return name if name in ("raylet", "gcs_server") else "other"


class RayHealth:
    """Whether the Ray a run uses still stands: the local Ray's GCS and raylet processes, and a GCS call answered
    within GCS_TIMEOUT_S, checked at most every HEALTH_EVERY_S."""

    def __init__(self, address: str, guardian: Optional[Guardian]):
        self.address, self.local = address, guardian.local if guardian is not None else {}
        self.checked = time.monotonic()
        self.lost: Optional[str] = None  # why, once Ray was found lost (close then makes no call to it)

    def check(self) -> None:
        """RayLostError naming what ended, when Ray's GCS or the local raylet did."""
        if self.lost is None and time.monotonic() - self.checked >= HEALTH_EVERY_S:
            self.lost = self._why_lost()
            self.checked = time.monotonic()
        if self.lost is not None:
            raise RayLostError(self.lost)

    def _why_lost(self) -> Optional[str]:
        import psutil
        import ray

        for kind, pid in self.local.items():
            if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return (f"the local Ray's {kind} (pid {pid}) ended under the run: its workers cannot be reached; "
                        "check the Ray logs in /tmp/ray/session_latest/logs")
        try:
            ray._private.worker.global_worker.gcs_client.internal_kv_get(b"godot-ppo", None, timeout=GCS_TIMEOUT_S)
        except Exception as e:
            return (f"Ray's GCS at {self.address} did not answer within {GCS_TIMEOUT_S:g} s ({one_line(e)}): the "
                    "cluster's head is gone; check it (`ray status`)")
        return None

    def leave_now(self) -> None:
        """After a lost Ray: no call to it (ray.shutdown would wait for the lost GCS, then abort), and the process
        ends by os._exit once the command has said its error (a normal exit crashes in Ray's C++)."""
        import ray

        atexit.unregister(ray.shutdown)
        atexit.register(_exit_now)


def _exit_now() -> None:
    from python_trainer.base.errors import EXIT_STATUS, FAULT
    from python_trainer.base.signals import _Policy

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(128 + int(_Policy.received) if _Policy.received else EXIT_STATUS[FAULT])  # the lost Ray's RayLostError


class Beats:
    """The Ray workers' heartbeats (a Ray actor of no CPU, made remote by RayRollouts): each worker's thread calls
    `beat` every second (ray_worker._beat); the learner asks how long each has been silent."""

    def __init__(self):
        self.seen: dict = {}

    def beat(self, worker: int) -> None:
        self.seen[worker] = time.monotonic()

    def silent_for(self) -> dict:
        now = time.monotonic()
        return {worker: now - seen for worker, seen in self.seen.items()}


def listen_on_loopback() -> None:
    """Make the Ray this process starts listen on 127.0.0.1 only. On Linux Ray binds the machine's network address
    (its GCS, raylets, runtime-env agent, object manager and every worker would be reachable from the network, with
    the cluster's token as the only guard); RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it use the loopback address.
    Ray reads the variable when it is imported, and its processes inherit it from our environment; should Ray be
    imported already, its constant is set too. Only for ``--ray-address local``: a cluster's own address is its own."""
    os.environ[RAY_LOOPBACK_ENV] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


def connect(address, num_cpus, run_dir) -> Guardian:
    """ray.init for --ray-address (``local``: a Ray of ``num_cpus`` CPUs on this machine, on 127.0.0.1 only), with
    our signal handlers kept (Ray's SIGTERM handler is not installed; see ray_rollouts.py) and a signal that arrives
    meanwhile raised once Ray has started and its guardian watches it. Returns the guardian."""
    import signal

    if address == LOCAL:
        listen_on_loopback()  # before Ray is imported and starts its processes
    import ray

    _check_address(address)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    set_sigterm_handler = ray._private.utils.set_sigterm_handler
    ray._private.utils.set_sigterm_handler = lambda handler: None  # ours stays (ray.init would put its sys.exit)
    guardian = None
    try:
        with signals_deferred():  # a signal now is raised once Ray stands and is watched (then it is left)
            before = {p.pid for p in descendants()} if address == LOCAL else None
            try:
                if address == LOCAL:
                    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level="warning",
                             _node_ip_address=LOOPBACK)
                else:
                    ray.init(address=address, logging_level="warning")
            finally:
                if ray.is_initialized():
                    guardian = Guardian(run_dir, before)
    except BaseException as e:
        if guardian is not None:
            ray.shutdown()
            guardian.end()
        if isinstance(e, (ConnectionError, RuntimeError, ValueError)):
            raise RaySetupError(f"--ray-address {address}: could not join the Ray cluster there: {one_line(e)}") from None
        raise
    finally:
        ray._private.utils.set_sigterm_handler = set_sigterm_handler
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)
    return guardian
