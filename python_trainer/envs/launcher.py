"""Start, watch, restart and stop Godot instances: ports, processes, tokens, logs, Xvfb.

For each instance the launcher first binds a listening socket on 127.0.0.1 port 0 (so the kernel picks a port
nobody holds: a taken port cannot happen by construction), then starts the exported binary with
``--port=<that port> --fixed-fps 60 ...`` (game.FIXED_FPS) in its own process group and a secret token in its environment
(``RL_SYNC_TOKEN``: ``/proc/PID/environ`` is readable only by the same user, the command line by everyone). All
instances are awaited in parallel against one deadline; a connection is refused (closed, reported) and the wait goes
on unless its first message is a ``hello`` carrying the instance's token and its other end belongs to the process
the launcher started (or one of its descendants) whose pid the hello names; an instance that exits before connecting
is reported (exit code + log tail) at once.

Logs (envs/logs.py): stdout+stderr go through a pipe and a reader thread per instance into
``run_dir/logs/instance_<i>.log``, which `CappedLog` keeps under ``max_log_bytes``; the first time it cuts output the
launcher says so through ``report``.

No orphans: `close()` (also via the context manager, atexit, and SIGINT/SIGTERM handlers that close then
re-raise; a signal that was ignored when the launcher started stays ignored) asks every instance to quit, then
terminates/kills the process trees with psutil. However Python itself ends (SIGKILL included), the kernel kills the
games and Xvfb: they are started by `processes.spawn`, which gives them a parent-death signal.

Script errors: once an instance has handshaken, the log's reader thread watches its output for Godot's ``SCRIPT
ERROR:`` lines (`ScriptErrorWatch`); the first is reported at once with its ``At:`` line and the log's path, and
`script_errors()` names an instance that keeps raising them (the vector env stops on it).

Crash handling: `restart(i, error)` reports a dead or silent instance (exit code, log tail) and starts a fresh
one on a new port, at most ``max_restarts`` times per instance slot (like ML-Agents' --max-lifetime-restarts).
"""

from __future__ import annotations

import atexit
import hmac
import math
import os
import secrets
import selectors
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import psutil

from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S, SLOW_GAME_HINT
from python_trainer.envs.failures import InstanceCrashedError, InstanceStartError
from python_trainer.envs.game import PLUGIN_CONNECT_LINE, GameBugError, GameInstance, godot_game
from python_trainer.base.processes import LOG_TAIL_LINES, TERM_GRACE_S, describe_exit, end_process_tree, read_log_tail, spawn
from python_trainer.envs.logs import DEFAULT_MAX_LOG_BYTES, CappedLog, ScriptErrorWatch
from python_trainer.envs.xvfb import Xvfb, open_display
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING,
    DEFAULT_TIMEOUT_S,
    MAX_MESSAGE_BYTES,
    PACKED_OBS_ENCODING,
    GodotConnection,
    GodotConnectionError,
    decode_body,
    dialect,
    encode_message,
    handshake_message,
)

DEFAULT_MAX_RESTARTS = 3
CLOSE_GRACE_S = 2.0  # how long instances get to quit by themselves after the "close" message
TOKEN_ENV = "RL_SYNC_TOKEN"  # the instance's secret, in its environment (never in its command line)
_POLL_S = 0.1  # how often the connect wait checks whether instances died (it sleeps in select meanwhile)
# An instance that has raised this many script errors since its handshake keeps raising them: a training run stops
# (a per-frame error in a game of 16 agents reaches it within a frame).
SCRIPT_ERRORS_TO_STOP = 10


@dataclass
class Instance:
    """One running Godot process and its connection."""

    index: int
    port: int
    token: str
    proc: subprocess.Popen
    log_path: Path
    game: str
    seed: int
    restarts: int = 0
    listener: Optional[socket.socket] = None
    log: Optional[CappedLog] = None
    conn: Optional[GodotConnection] = None
    hello: Optional[dict] = None  # our addon's hello (None from a game made with godot_rl_agents' plugin)
    env_info: Optional[dict] = None
    dialect: Optional[str] = None  # protocol.RL_SYNC or protocol.GODOT_RL, told by `protocol.dialect`
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def label(self) -> str:
        return f"instance {self.index} (port {self.port}, pid {self.pid}, game {self.game})"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self.log is not None:
            self.log.sync()  # what the game printed just before it died may still be in the pipe
        return read_log_tail(self.log_path, lines)

    def exit_code(self) -> Optional[int]:
        return self.proc.poll()


# ---------------------------------------------------------------------------------------------- global cleanup
_LIVE: "weakref.WeakSet[InstanceLauncher]" = weakref.WeakSet()
_PREVIOUS_HANDLERS: dict = {}
_GLOBAL_LOCK = threading.RLock()
_ATEXIT_REGISTERED = False


def close_all_launchers() -> None:
    """Close every launcher still open in this process (atexit and the signal handlers call this)."""
    for launcher in list(_LIVE):
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


def _install_cleanup_hooks() -> None:
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


# ---------------------------------------------------------------------------------------------- the launcher
@dataclass
class _Greeting:
    """What an accepted connection has said so far, until its env_info tells its dialect."""

    inst: Instance
    owner: int  # the pid at the other end
    buf: bytearray = field(default_factory=bytearray)
    hello: Optional[dict] = None
    dialect: Optional[str] = None

    def feed(self, data: bytes, launcher: "InstanceLauncher"):
        """None while a message is incomplete; a reason to refuse the connection; or the env_info once the dialect
        is known. Raises InstanceStartError for the instance's own connection speaking neither dialect."""
        self.buf += data
        while len(self.buf) >= 4:
            (n,) = struct.unpack_from("<I", self.buf, 0)
            if n > MAX_MESSAGE_BYTES:
                raise InstanceStartError(f"{self.inst.label()}: its first message announced {n} bytes, above the "
                                         f"{MAX_MESSAGE_BYTES}-byte limit (corrupt stream?)")
            if len(self.buf) < 4 + n:
                return None
            body = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            try:
                msg = decode_body(body)
            except ValueError as e:
                raise InstanceStartError(f"{self.inst.label()}: its first message is not a JSON object ({e}): "
                                         f"{body[:80]!r}") from None
            if self.hello is None and msg.get("type") == "hello":
                verdict = launcher._check_hello(self.inst, msg, self.owner)
                if isinstance(verdict, str):
                    return verdict
                self.hello = verdict
                continue
            try:
                self.dialect = dialect(self.hello, msg)
            except GameBugError as e:  # a bug of the game's own: not a start to retry
                raise GameBugError(f"{self.inst.label()}: {e}") from None
            except ValueError as e:
                raise InstanceStartError(f"{self.inst.label()}: {e}") from None
            if self.buf:
                raise InstanceStartError(f"{self.inst.label()}: it sent {len(self.buf)} more bytes after its env_info "
                                         "before it was asked anything")
            return msg
        return None


class InstanceLauncher:
    """Starts ``num_instances`` instances described by ``instance`` (a `GameInstance`) and keeps them connected.

    Use as a context manager (or call `start()` and `close()`). After `start()`, ``instances[i].conn`` is a
    handshaken `GodotConnection` and ``instances[i].env_info`` its env_info reply, whose ``n_agents`` says how many
    agents that instance simulates (a game may ignore ``--agents``). Instance i gets seed ``instance.seed + i``.
    """

    def __init__(
        self,
        instance: GameInstance,
        num_instances: int = 1,
        run_dir: Optional[str | os.PathLike] = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        step_timeout: float = DEFAULT_TIMEOUT_S,
        report: Optional[Callable[[str], None]] = None,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    ):
        if int(num_instances) < 1:
            raise ValueError(f"num_instances must be >= 1, got {num_instances}")
        if instance.agents is not None and int(instance.agents) < 1:
            raise ValueError(f"agents_per_instance must be >= 1, got {instance.agents}")
        self.instance = instance
        self.env = instance.game.env
        self.num_instances = int(num_instances)
        self.headless = bool(instance.headless)
        self.seed = int(instance.seed)
        self.connect_timeout = float(connect_timeout)
        self.max_restarts = int(max_restarts)
        self.step_timeout = float(step_timeout)
        self.max_log_bytes = int(max_log_bytes)
        self.report = report or (lambda msg: print(f"godot-ppo: {msg}", file=sys.stderr, flush=True))
        self.events: list[str] = []  # everything reported (crashes, restarts, refused clients, Xvfb)
        self.command_prefix = instance.game.export.command(self.headless)  # a GameError names the fix

        self._tmpdir = None
        if run_dir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="godot-ppo-")
            run_dir = self._tmpdir
        self.run_dir = Path(run_dir)
        self.log_dir = self.run_dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)

        self.instances: list[Optional[Instance]] = [None] * self.num_instances
        self.restarts = [0] * self.num_instances
        self._logs: list[Optional[CappedLog]] = [None] * self.num_instances  # one per slot, restarts append to it
        self.display: Optional[str] = instance.display
        self._xvfb: Optional[Xvfb] = None
        self._started = False
        self._closed = False
        self._failed = False
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- public
    def __enter__(self) -> "InstanceLauncher":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def xvfb_pid(self) -> Optional[int]:
        """The pid of the Xvfb this launcher started (None when it used $DISPLAY or runs headless)."""
        return self._xvfb.pid if self._xvfb is not None else None

    def start(self) -> list[Instance]:
        """Start every instance and wait (in parallel, one deadline) until all are connected and handshaken."""
        if self._closed:
            raise RuntimeError("this launcher is closed")
        if self._started:
            return self.instances
        self._started = True
        _LIVE.add(self)
        _install_cleanup_hooks()
        try:
            if not self.headless:
                self._ensure_display()
            for i in range(self.num_instances):
                self.instances[i] = self._spawn(i, restarts=0)
            self._connect(self.instances, time.monotonic() + self.connect_timeout)
        except BaseException:
            self._failed = True
            self.close()
            raise
        return self.instances

    def restart(self, index: int, error: Optional[BaseException] = None) -> Instance:
        """Report instance ``index`` as failed (exit code, log tail), end it, and start a fresh one on a new port.

        Raises InstanceCrashedError once the slot has used ``max_restarts`` restarts.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("this launcher is closed")
            old = self.instances[index]
            self._failed = True
            code = None
            if old is not None:
                if old.conn is not None:
                    old.conn.close(send_close=False)
                try:  # a crashed game is usually exiting already: give it a moment to report its own exit code
                    code = old.proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    code = None
                if code is None:
                    end_process_tree([old.pid])
                    self._reap(old.proc)
                self._close_listener(old)
            what = str(error) if error is not None else "restart requested"
            status = describe_exit(code) if code is not None else "was still running (ended it)"
            msg = f"instance {index} failed: {what}\n  process: {status}; log: {old.log_path if old else '?'}"
            if error is None or not isinstance(error, GodotConnectionError) or not error.log_tail:
                tail = old.log_tail() if old is not None else ""
                if tail:
                    msg += "\n--- last lines printed by the instance ---\n" + tail
            self.events.append(msg)
            if self.restarts[index] >= self.max_restarts:
                self.report(msg + f"\n  restart budget spent ({self.max_restarts} restarts per instance)")
                raise InstanceCrashedError(
                    f"{msg}\ninstance {index} has already been restarted {self.restarts[index]} times "
                    f"(max_restarts={self.max_restarts}); giving up"
                ) from error
            self.restarts[index] += 1
            self.report(msg + f"\n  restarting it ({self.restarts[index]}/{self.max_restarts})")
            inst = self._spawn(index, restarts=self.restarts[index])
            self.instances[index] = inst
            try:
                self._connect([inst], time.monotonic() + self.connect_timeout)
            except BaseException as e:
                raise InstanceCrashedError(f"instance {index} could not be restarted: {e}") from e
            self.events.append(f"instance {index} restarted on port {inst.port} (pid {inst.pid})")
            return inst

    def close(self) -> None:
        """Ask every instance to quit, then end what is left of the process trees, Xvfb included. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _LIVE.discard(self)
            live = [inst for inst in self.instances if inst is not None]
            # Remember any descendants now: once a game has quit, its children (it has none, but a wrapper
            # script might) would be reparented and out of reach. psutil's kill() is safe against pid reuse.
            descendants = []
            for inst in live:
                if inst.proc.poll() is None:
                    try:
                        descendants += psutil.Process(inst.pid).children(recursive=True)
                    except psutil.Error:
                        pass
            for inst in live:
                if inst.conn is not None:
                    inst.conn.close(send_close=True)
                self._close_listener(inst)
            deadline = time.monotonic() + CLOSE_GRACE_S
            for inst in live:
                if inst.conn is None:
                    continue  # never connected: it cannot have received "close"
                try:
                    inst.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            end_process_tree([inst.pid for inst in live if inst.proc.poll() is None])
            for p in descendants:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            for inst in live:
                self._reap(inst.proc)
            for log in self._logs:
                if log is not None:
                    log.close()
            if self._xvfb is not None:
                self._xvfb.stop()
                self._xvfb = None
            if self._tmpdir is not None and not self._failed:
                shutil.rmtree(self._tmpdir, ignore_errors=True)

    def pids(self) -> list[int]:
        return [inst.pid for inst in self.instances if inst is not None]

    # ---------------------------------------------------------------- internals
    @staticmethod
    def _reap(proc: subprocess.Popen) -> None:
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass

    @staticmethod
    def _close_listener(inst: Instance) -> None:
        if inst.listener is not None:
            try:
                inst.listener.close()
            except OSError:
                pass
            inst.listener = None

    def _command(self, port: int, seed: int) -> list[str]:
        timeout = max(1, math.ceil(self.connect_timeout))
        return self.instance.replace(seed=seed, display=self.display).command(
            f"--port={port}", f"--connect_timeout={timeout}"
        )

    def _log(self, index: int) -> CappedLog:
        if self._logs[index] is None:
            self._logs[index] = CappedLog(self.log_dir / f"instance_{index}.log", self.max_log_bytes,
                                          on_flood=lambda: self._report_flood(index))  # fmt: skip
            self._logs[index].watch = ScriptErrorWatch(lambda first: self._report_script_error(index, first))
        return self._logs[index]

    def _slot_name(self, index: int) -> str:
        """The instance in slot ``index``, for messages (its label once it has started)."""
        inst = self.instances[index]
        return inst.label() if inst is not None else f"instance {index}"

    def _report_script_error(self, index: int, first: str) -> None:
        what, log = self._slot_name(index), self._logs[index]
        msg = f"{what} raised a script error: {first} (log: {log.path})"
        self.events.append(msg)
        self.report(msg)

    def script_errors(self) -> Optional[str]:
        """None, or one line naming an instance that keeps raising script errors (SCRIPT_ERRORS_TO_STOP since its
        handshake) and its first one. Cheap enough for every step: one comparison per instance slot."""
        for index, log in enumerate(self._logs):
            if log is not None and log.watch.count >= SCRIPT_ERRORS_TO_STOP:
                return (f"{self._slot_name(index)} keeps raising script errors ({log.watch.count} since it connected), a bug in the "
                        f"game; the first: {log.watch.first} (log: {log.path})")
        return None

    def _report_flood(self, index: int) -> None:
        what, log = self._slot_name(index), self._logs[index]
        msg = (f"{what} printed more than {log.max_bytes / 2**20:g} MiB: its log {log.path} keeps the first half "
               "of that and the newest output (a game printing every frame, e.g. a script error, floods like this)")
        self.events.append(msg)
        self.report(msg)

    def _spawn(self, index: int, restarts: int) -> Instance:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free port; nobody else can hold it
            listener.listen(8)
            listener.setblocking(False)
            port = listener.getsockname()[1]
            token = secrets.token_hex(16)
            # A restarted slot gets a new seed so it does not replay its predecessor's episodes.
            seed = self.seed + index + restarts * self.num_instances
            cmd = self._command(port, seed)
            log = self._log(index)
            log.watch.armed = False  # until this process has handshaken: a game's start may print what it likes
            env = self.instance.replace(display=self.display).environ()
            env[TOKEN_ENV] = token
            shown = " ".join(shlex.quote(c) for c in cmd)
            log.write(f"# godot-ppo: starting instance {index} (restart {restarts}): {shown}\n".encode())
            out_r, out_w = os.pipe()
            proc = None
            try:
                # own session: a terminal's Ctrl-C reaches only us; dies with us (processes.spawn)
                proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env)
            except OSError as e:
                raise InstanceStartError(f"could not start instance {index} ({cmd[0]}): {e}") from e
            finally:
                os.close(out_w)
                if proc is None:
                    os.close(out_r)
            log.follow(out_r)
        except BaseException:
            listener.close()
            raise
        return Instance(
            index=index, port=port, token=token, proc=proc, log_path=log.path, game=self.env, seed=seed,
            restarts=restarts, listener=listener, log=log,
        )

    def _refuse(self, inst: Instance, sock: socket.socket, why: str) -> None:
        try:
            sock.close()
        except OSError:
            pass
        msg = f"refused a connection on {inst.label()}'s port: {why}; still waiting for the instance"
        self.events.append(msg)
        self.report(msg)

    def _connect(self, pending_instances: Sequence[Instance], deadline: float) -> None:
        """Accept each instance's connection, handshake, read env_info and tell the game's dialect, all instances in
        parallel against one deadline.

        A connection is refused unless its other end belongs to the started process (or a descendant). On an
        accepted one the handshake (asking for our packed encodings, which a plain game ignores) and the env_info
        request go out at once, since a game made with godot_rl_agents' plugin says nothing first; what comes back
        decides the dialect (`protocol.dialect`): our hello (its token and pid checked) then env_info, or env_info
        alone. A peer that speaks neither ends the start with one line naming what was missing."""
        sel = selectors.DefaultSelector()
        waiting = {inst.index: inst for inst in pending_instances}
        clients: dict[socket.socket, _Greeting] = {}
        try:
            for inst in pending_instances:
                sel.register(inst.listener, selectors.EVENT_READ, ("listen", inst))
            while waiting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InstanceStartError(self._connect_timeout_message(waiting, clients))
                for key, _ in sel.select(timeout=min(_POLL_S, remaining)):
                    kind, inst = key.data
                    if kind == "listen":
                        try:
                            sock, _addr = inst.listener.accept()
                        except (BlockingIOError, InterruptedError):
                            continue
                        owner = self._peer_owner(inst, sock)
                        if isinstance(owner, str):
                            self._refuse(inst, sock, owner)
                            continue
                        if any(g.inst is inst for g in clients.values()):
                            self._refuse(inst, sock, "the instance already has a connection")
                            continue
                        try:
                            sock.settimeout(2.0)
                            sock.sendall(encode_message(handshake_message(PACKED_OBS_ENCODING, BINARY_STEP_ENCODING))
                                         + encode_message({"type": "env_info"}))  # fmt: skip
                            sock.setblocking(False)
                        except OSError as e:
                            self._refuse(inst, sock, f"the connection broke during the handshake ({e})")
                            continue
                        clients[sock] = _Greeting(inst, owner)
                        sel.register(sock, selectors.EVENT_READ, ("client", inst))
                        continue
                    sock = key.fileobj
                    greeting = clients[sock]
                    try:
                        data = sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    verdict = greeting.feed(data, self) if data else "the client closed the connection before its env_info"
                    if verdict is None:
                        continue  # more to come
                    sel.unregister(sock)
                    del clients[sock]
                    if isinstance(verdict, str):
                        self._refuse(inst, sock, verdict)
                        continue
                    # The real instance: wrap the socket and stop listening on its port.
                    sock.setblocking(True)
                    inst.hello, inst.env_info, inst.dialect = greeting.hello, verdict, greeting.dialect
                    inst.conn = GodotConnection(
                        sock, label=inst.label, log_tail=inst.log_tail, timeout=self.step_timeout
                    )
                    sel.unregister(inst.listener)
                    self._close_listener(inst)
                    if inst.log is not None:
                        inst.log.watch.armed = True
                    del waiting[inst.index]
                for i, inst in list(waiting.items()):
                    code = inst.proc.poll()
                    if code is not None:
                        raise InstanceStartError(
                            f"{inst.label()} exited before connecting: {describe_exit(code)}\n"
                            f"--- last lines of {inst.log_path} ---\n" + (inst.log_tail() or "(nothing printed)")
                        )
        finally:
            for sock in clients:
                try:
                    sock.close()
                except OSError:
                    pass
            sel.close()

    def _connect_timeout_message(self, waiting: dict, clients: dict) -> str:
        connected = {g.inst.index for g in clients.values()}
        names = ", ".join(waiting[i].label() for i in sorted(waiting))
        what = "to connect" if not connected else "to connect and answer the handshake"
        details = ""
        plugin = False
        for i in sorted(waiting):
            inst = waiting[i]
            tail = inst.log_tail() or "(nothing printed)"
            plugin = plugin or PLUGIN_CONNECT_LINE in tail
            state = "connected, but sent no env_info" if i in connected else describe_exit(inst.proc.poll())
            details += f"\n--- {inst.label()}: {state}; last lines of {inst.log_path} ---\n" + tail
        hint = ""
        if plugin:
            hint = (" (a game made with godot_rl_agents' plugin tries to connect once, one second after it starts, and "
                    "then plays in human mode for ever: it was ended; a machine this busy needs fewer --instances)")
        if not hint:
            hint = f" ({SLOW_GAME_HINT})"
        return f"timed out after {self.connect_timeout:g}s waiting for {names} {what}{hint}{details}"

    def _check_hello(self, inst: Instance, msg: dict, owner: int):
        """The hello if it carries the instance's token, names its game and the connecting pid; else why not."""
        token = msg.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), inst.token.encode()):
            return "wrong or missing token"
        if msg.get("env") not in (None, self.env):
            return f"it runs game {msg.get('env')!r}, not {self.env!r}"
        if msg.get("pid") != owner:
            return f"its hello names pid {msg.get('pid')!r}, but the connection belongs to pid {owner}"
        return msg

    @staticmethod
    def _peer_owner(inst: Instance, sock: socket.socket):
        """The pid owning the other end of ``sock`` if it is the instance's process or a descendant (a wrapper
        script's child); else why not. A local process cannot pass for the instance, token or no token (a game made
        with godot_rl_agents' plugin has none). Once per connection, never on the step path."""
        try:
            peer = sock.getpeername()
            root = psutil.Process(inst.pid)
            tree = [root] + root.children(recursive=True)
        except (OSError, psutil.Error):
            return "the instance's process is gone"
        for p in tree:
            try:
                if any(c.laddr == peer and c.raddr and c.raddr[1] == inst.port for c in p.net_connections("tcp4")):
                    return p.pid
            except psutil.Error:
                continue
        return f"the connecting process is not the instance (pid {inst.pid}) nor one of its children"

    # ---------------------------------------------------------------- Xvfb
    def _ensure_display(self) -> None:
        if self.display is not None:
            return

        def note(msg):
            self.events.append(msg)
            self.report(msg)

        self._xvfb = Xvfb(self.log_dir / "xvfb.log")
        self.display = open_display(self._xvfb, note, "for the windowed instances")


def launch_instances(
    env: Optional[str] = None,
    num_instances: int = 1,
    *,
    env_path=None,
    binary=None,
    agents_per_instance: Optional[int] = None,
    headless: bool = True,
    seed: int = 0,
    speedup: float = 1,
    action_repeat: int = 1,
    max_episode_steps: Optional[int] = None,
    display: Optional[str] = None,
    extra_args: Sequence[str] = (),
    **launcher_kwargs,
) -> InstanceLauncher:
    """Start the instances of game ``env`` (in ``env_path``'s export; ``binary``: a stand-in argv) and return the
    started `InstanceLauncher` (close it, or use it in a ``with``). ``launcher_kwargs`` are InstanceLauncher's."""
    instance = GameInstance(
        godot_game(env, env_path, program=binary), agents=agents_per_instance, seed=seed, speedup=speedup,
        action_repeat=action_repeat, max_episode_steps=max_episode_steps, headless=headless, display=display,
        extra_args=tuple(extra_args),
    )
    launcher = InstanceLauncher(instance, num_instances, **launcher_kwargs)
    launcher.start()
    return launcher
