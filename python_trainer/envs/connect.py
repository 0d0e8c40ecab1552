"""Wait for started instances to connect: tell each one's connection from a stray one, handshake, read its env_info.

Every instance is awaited in parallel against one deadline. A connection is refused (closed, reported) and the wait
goes on unless its other end belongs to the process the launcher started (or one of its descendants) and, for a game
with our addon, its first message is a ``hello`` carrying the instance's token and naming that pid. On an accepted
connection the handshake (asking for our packed encodings, which a plain game ignores) and the env_info request go
out at once, since a game made with godot_rl_agents' plugin says nothing first; what comes back decides the dialect
(`protocol.dialect`): our hello then env_info, or env_info alone. An instance that exits before connecting is
reported (exit code + log tail) at once; a peer that speaks neither dialect ends the start with one line naming what
was missing.
"""

from __future__ import annotations

import hmac
import selectors
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import psutil

from python_trainer.base.bounds import HANDSHAKE_BYTES
from python_trainer.base.contract import ERROR_PREFIX, is_message, message
from python_trainer.base.flags import SLOW_GAME_HINT
from python_trainer.base.processes import describe_exit, descendants
from python_trainer.envs.failures import InstanceStartError
from python_trainer.envs.game import PLUGIN_CONNECT_LINE, GameBugError
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING,
    PACKED_OBS_ENCODING,
    GodotConnection,
    decode_body,
    dialect,
    encode_message,
    handshake_message,
)

_POLL_S = 0.1  # how often the wait checks whether instances died (it sleeps in select meanwhile)
_SEND_TIMEOUT_S = 2.0  # the handshake is a few hundred bytes: a peer that cannot take them is not a game


@dataclass
class Greeting:
    """What an accepted connection has said so far, until its env_info tells its dialect."""

    inst: object  # launcher.Instance
    owner: int  # the pid at the other end
    buf: bytearray = field(default_factory=bytearray)
    hello: Optional[dict] = None
    dialect: Optional[str] = None

    def feed(self, data: bytes, check_hello: Callable):
        """None while a message is incomplete; a reason to refuse the connection; or the env_info once the dialect
        is known. Raises InstanceStartError for the instance's own connection speaking neither dialect."""
        self.buf += data
        while len(self.buf) >= 4:
            (n,) = struct.unpack_from("<I", self.buf, 0)
            if n > HANDSHAKE_BYTES.value:  # a hello or an env_info: what a stranger may make us buffer
                raise InstanceStartError(f"{self.inst.label()}: its first message announced {n} bytes, above the "
                                         f"{HANDSHAKE_BYTES.value}-byte bound of a hello or an env_info (corrupt "
                                         "stream?)")
            if len(self.buf) < 4 + n:
                return None
            body = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            try:
                msg = decode_body(body)
            except ValueError as e:
                raise InstanceStartError(f"{self.inst.label()}: its first message is not a JSON object ({e}): "
                                         f"{body[:80]!r}") from None
            if self.hello is None and is_message(msg, "hello"):
                verdict = check_hello(self.inst, msg, self.owner)
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


class ConnectionWait:
    """One wait for ``instances`` (just started, each listening on its port) until every one has a handshaken
    `GodotConnection` (``inst.conn``, with ``inst.hello``, ``inst.env_info`` and ``inst.dialect``), or an
    InstanceStartError. ``note`` reports each refused connection."""

    def __init__(self, instances: Sequence, *, env: str, connect_timeout: float, step_timeout: float,
                 note: Callable[[str], None]):
        self.env, self.connect_timeout, self.step_timeout, self.note = env, connect_timeout, step_timeout, note
        self.waiting = {inst.index: inst for inst in instances}
        self.clients: dict[socket.socket, Greeting] = {}
        self.sel = selectors.DefaultSelector()

    def run(self, deadline: float) -> None:
        try:
            for inst in self.waiting.values():
                self.sel.register(inst.listener, selectors.EVENT_READ, ("listen", inst))
            while self.waiting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InstanceStartError(self._timeout_message())
                for key, _ in self.sel.select(timeout=min(_POLL_S, remaining)):
                    kind, inst = key.data
                    if kind == "listen":
                        self._accept(inst)
                    else:
                        self._read(key.fileobj, inst)
                self._check_exits()
        finally:
            for sock in self.clients:
                try:
                    sock.close()
                except OSError:
                    pass
            self.sel.close()

    # ---------------------------------------------------------------- the steps
    def _accept(self, inst) -> None:
        """Accept a connection on ``inst``'s port: refused unless it comes from the instance's process tree and is
        its first; else our handshake and the env_info request go out, and its greeting is awaited."""
        try:
            sock, _addr = inst.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        owner = peer_owner(inst, sock)
        if isinstance(owner, str):
            return self._refuse(inst, sock, owner)
        if any(g.inst is inst for g in self.clients.values()):
            return self._refuse(inst, sock, "the instance already has a connection")
        try:
            sock.settimeout(_SEND_TIMEOUT_S)
            sock.sendall(encode_message(handshake_message(PACKED_OBS_ENCODING, BINARY_STEP_ENCODING))
                         + encode_message(message("env_info")))
            sock.setblocking(False)
        except OSError as e:
            return self._refuse(inst, sock, f"the connection broke during the handshake ({e})")
        self.clients[sock] = Greeting(inst, owner)
        self.sel.register(sock, selectors.EVENT_READ, ("client", inst))

    def _read(self, sock: socket.socket, inst) -> None:
        """Read what an accepted connection sent; once its greeting is whole, refuse it or take it as the instance's."""
        greeting = self.clients[sock]
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        verdict = greeting.feed(data, self._check_hello) if data else "the client closed the connection before its env_info"
        if verdict is None:
            return  # more to come
        self.sel.unregister(sock)
        del self.clients[sock]
        if isinstance(verdict, str):
            return self._refuse(inst, sock, verdict)
        self._connected(inst, sock, greeting, verdict)

    def _connected(self, inst, sock: socket.socket, greeting: Greeting, env_info: dict) -> None:
        """The real instance: wrap its socket, stop listening on its port, and watch its log for script errors."""
        sock.setblocking(True)
        inst.hello, inst.env_info, inst.dialect = greeting.hello, env_info, greeting.dialect
        inst.conn = GodotConnection(sock, label=inst.label, log_tail=inst.log_tail, timeout=self.step_timeout)
        self.sel.unregister(inst.listener)
        inst.close_listener()
        if inst.log is not None:
            inst.log.watch.armed = True
        del self.waiting[inst.index]

    def _check_exits(self) -> None:
        """An instance that exited before connecting ends the wait at once, with its exit code and log tail."""
        for inst in self.waiting.values():
            code = inst.proc.poll()
            if code is not None:
                tail = inst.log_tail()
                said = [ln[len(ERROR_PREFIX):] for ln in tail.splitlines() if ln.startswith(ERROR_PREFIX)]
                why = f" ({describe_exit(code)}): {said[-1]}" if said else f": {describe_exit(code)}"  # the addon's line
                raise InstanceStartError(f"{inst.label()} exited before connecting{why}\n"
                                         f"--- last lines of {inst.log_path} ---\n" + (tail or "(nothing printed)"))

    # ---------------------------------------------------------------- checks and messages
    def _refuse(self, inst, sock: socket.socket, why: str) -> None:
        try:
            sock.close()
        except OSError:
            pass
        self.note(f"refused a connection on {inst.label()}'s port: {why}; still waiting for the instance")

    def _check_hello(self, inst, msg: dict, owner: int):
        """The hello if it carries the instance's token, names its game and the connecting pid; else why not."""
        token = msg.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), inst.token.encode()):
            return "wrong or missing token"
        if msg.get("env") not in (None, self.env):
            return f"it runs game {msg.get('env')!r}, not {self.env!r}"
        if msg.get("pid") != owner:
            return f"its hello names pid {msg.get('pid')!r}, but the connection belongs to pid {owner}"
        return msg

    def _timeout_message(self) -> str:
        waiting = self.waiting
        connected = {g.inst.index for g in self.clients.values()}
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


def peer_owner(inst, sock: socket.socket):
    """The pid owning the other end of ``sock`` if it is the instance's process or a descendant (a wrapper script's
    child); else why not. A local process cannot pass for the instance, token or no token (a game made with
    godot_rl_agents' plugin has none). Once per connection, never on the step path."""
    try:
        peer = sock.getpeername()
        tree = [psutil.Process(inst.pid)] + descendants(inst.pid)
    except (OSError, psutil.Error):
        return "the instance's process is gone"
    for p in tree:
        try:
            if any(c.laddr == peer and c.raddr and c.raddr[1] == inst.port for c in p.net_connections("tcp4")):
                return p.pid
        except psutil.Error:
            continue
    return f"the connecting process is not the instance (pid {inst.pid}) nor one of its children"
