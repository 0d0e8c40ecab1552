"""godot-rl's wire protocol (0.8.2, handshake version 0.7), with every read bounded by a timeout.

Framing: a 4-byte little-endian unsigned length N, then N bytes of UTF-8 JSON (one object per message).
N counts *bytes*, not characters (godot-rl's own client counts characters, which breaks on non-ASCII text).

Python listens and accepts; the game connects. `GodotConnection` wraps the accepted socket. Unlike godot-rl's
client (which spins at 100% CPU on EOF and returns None on timeout), a closed connection, a timeout, an oversize
length or a malformed message raises `GodotConnectionError`, naming the instance (port, pid, game) and quoting
the last lines the instance printed.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any, Callable, Optional, Sequence

MAJOR_VERSION = "0"
MINOR_VERSION = "7"
# Our extension: the handshake may ask for observations packed as base64 little-endian float32
# ("obs_f32" in step replies) instead of JSON lists; godot-rl never asks, so it gets JSON.
PACKED_OBS_ENCODING = "f32_base64"
# The game rejects messages above 64 MiB; we refuse to allocate for anything bigger either.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0

_LEN = struct.Struct("<I")


class GodotConnectionError(ConnectionError):
    """The connection to a Godot instance failed: EOF, timeout, oversize or malformed message.

    Attributes: ``instance`` (a label such as "instance 0 (port 41234, pid 5678, game ball_chase)"),
    ``reason`` (what went wrong) and ``log_tail`` (the instance's last output lines, possibly empty).
    """

    def __init__(self, instance: str, reason: str, log_tail: str = ""):
        self.instance = instance
        self.reason = reason
        self.log_tail = log_tail
        msg = f"{instance}: {reason}"
        if log_tail:
            msg += "\n--- last lines printed by the instance ---\n" + log_tail.rstrip("\n")
        super().__init__(msg)


def encode_message(obj: Any) -> bytes:
    """One framed message: little-endian byte length of the UTF-8 JSON, then the JSON."""
    body = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    return _LEN.pack(len(body)) + body


def decode_body(body: bytes | bytearray | memoryview) -> dict:
    """Parse a message body (without its length prefix); raises ValueError if it is not a JSON object."""
    obj = json.loads(bytes(body).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


class GodotConnection:
    """An accepted socket speaking godot-rl's protocol to one Godot instance.

    ``label`` names the instance in errors (a string, or a callable returning one); ``log_tail`` is a callable
    returning the instance's last printed lines (called only when building an error).
    Every read waits at most ``timeout`` seconds (per message) unless a call passes its own.
    """

    def __init__(
        self,
        sock: socket.socket,
        label: str | Callable[[], str] = "Godot instance",
        log_tail: Optional[Callable[[], str]] = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ):
        self.sock = sock
        self._label = label
        self._log_tail = log_tail
        self.timeout = float(timeout)
        self.closed = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # not TCP (e.g. a socketpair in tests)
        sock.settimeout(self.timeout)
        self._sock_timeout = self.timeout  # settimeout costs syscalls: only call it when the value changes
        self._rbuf = bytearray()  # bytes received but not yet consumed

    # ------------------------------------------------------------------ errors
    @property
    def label(self) -> str:
        return self._label() if callable(self._label) else str(self._label)

    def error(self, reason: str) -> GodotConnectionError:
        tail = ""
        if self._log_tail is not None:
            try:
                tail = self._log_tail() or ""
            except Exception as e:  # the log is only a courtesy
                tail = f"(could not read the instance's log: {e})"
        return GodotConnectionError(self.label, reason, tail)

    # ------------------------------------------------------------------ framing
    def send(self, obj: Any) -> None:
        if self.closed:
            raise self.error("the connection is already closed")
        data = encode_message(obj)
        try:
            self._set_timeout(self.timeout)
            self.sock.sendall(data)
        except socket.timeout:
            raise self.error(f"timed out after {self.timeout:g}s sending a {obj.get('type')!r} message") from None
        except OSError as e:
            raise self.error(f"the connection broke while sending a {obj.get('type')!r} message ({e})") from None

    def _set_timeout(self, value: float) -> None:
        if value != self._sock_timeout:
            self.sock.settimeout(value)
            self._sock_timeout = value

    def _fill(self, n: int, deadline: float, what: str, first_wait: Optional[float] = None) -> None:
        """Read until the receive buffer holds at least ``n`` bytes (usually one recv for a whole message).

        The first wait may use ``first_wait`` (the whole timeout, which is usually the socket's current one, so
        no settimeout call is needed); later waits use what is left before ``deadline``."""
        buf, sock = self._rbuf, self.sock
        while len(buf) < n:
            if first_wait is not None:
                wait, first_wait = first_wait, None
            else:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise self.error(f"timed out waiting for {what} (no complete reply within the timeout)")
            self._set_timeout(wait)
            try:
                chunk = sock.recv(max(n - len(buf), 65536))
            except socket.timeout:
                raise self.error(f"timed out waiting for {what} (no complete reply within the timeout)") from None
            except OSError as e:
                raise self.error(f"the connection broke while waiting for {what} ({e})") from None
            if not chunk:
                raise self.error(
                    f"the instance closed the connection (EOF) while we waited for {what}"
                    + (" after a partial message" if buf else "")
                )
            buf += chunk

    def recv(self, timeout: Optional[float] = None, expect: Optional[str] = None) -> dict:
        """Read one message; ``expect`` checks its "type". Raises GodotConnectionError on any failure."""
        if self.closed:
            raise self.error("the connection is already closed")
        t = self.timeout if timeout is None else float(timeout)
        what = f"a {expect!r} reply" if expect else "a message"
        deadline = time.monotonic() + t
        self._fill(4, deadline, what, first_wait=t)
        (n,) = _LEN.unpack_from(self._rbuf, 0)
        if n > MAX_MESSAGE_BYTES:
            raise self.error(
                f"announced a message of {n} bytes, above the {MAX_MESSAGE_BYTES}-byte limit (corrupt stream?)"
            )
        self._fill(4 + n, deadline, what)
        body = bytes(self._rbuf[4:4 + n])
        del self._rbuf[:4 + n]
        try:
            msg = decode_body(body)
        except (UnicodeDecodeError, ValueError) as e:
            raise self.error(f"sent a malformed message ({e}): {body[:200]!r}") from None
        if expect is not None and msg.get("type") != expect:
            raise self.error(f"expected a {expect!r} message, got type {msg.get('type')!r}: {str(msg)[:200]}")
        return msg

    # ------------------------------------------------------------------ messages
    def handshake(self, obs_encoding: Optional[str] = None) -> None:
        message = {"type": "handshake", "major_version": MAJOR_VERSION, "minor_version": MINOR_VERSION}
        if obs_encoding is not None:
            message["obs_encoding"] = obs_encoding
        self.send(message)

    def env_info(self, timeout: Optional[float] = None) -> dict:
        self.send({"type": "env_info"})
        info = self.recv(timeout, expect="env_info")
        for key in ("n_agents", "observation_space", "action_space"):
            if key not in info:
                raise self.error(f"env_info reply lacks {key!r}: {str(info)[:300]}")
        return info

    def reset_send(self) -> None:
        self.send({"type": "reset"})

    def reset_recv(self, timeout: Optional[float] = None) -> list:
        return self.recv(timeout, expect="reset")["obs"]

    def reset(self, timeout: Optional[float] = None) -> list:
        """Reset every agent of the instance; returns godot-rl's list of per-agent obs dicts."""
        self.reset_send()
        return self.reset_recv(timeout)

    def step_send(self, actions: Sequence[dict]) -> None:
        """Send one action dict per agent. Send to every instance first, then step_recv each (they run in parallel)."""
        self.send({"type": "action", "action": actions})

    def step_recv(self, timeout: Optional[float] = None) -> dict:
        """The "step" reply: {"obs": [...] or "obs_f32": base64, "reward": [...], "done": [...], "info": [...]}."""
        msg = self.recv(timeout, expect="step")
        for key in ("reward", "done"):
            if key not in msg:
                raise self.error(f"step reply lacks {key!r}: {str(msg)[:300]}")
        if "obs" not in msg and "obs_f32" not in msg:
            raise self.error(f"step reply lacks 'obs': {str(msg)[:300]}")
        return msg

    def call(self, method: str, timeout: Optional[float] = None) -> list:
        self.send({"type": "call", "method": method})
        return self.recv(timeout, expect="call").get("returns")

    def request(self, msg_type: str, timeout: Optional[float] = None, **fields) -> dict:
        """Send {"type": msg_type, **fields} and return the reply of the same type (e.g. our "stats" extension)."""
        self.send({"type": msg_type, **fields})
        return self.recv(timeout, expect=msg_type)

    def stats(self, timeout: Optional[float] = None) -> dict:
        """Our extension: the engine's own counters (the game answers {"type": "stats", ...})."""
        return self.request("stats", timeout)

    def close(self, send_close: bool = True) -> None:
        """Ask the game to quit (it exits 0 and sends no reply), then close the socket. Never raises."""
        if self.closed:
            return
        if send_close:
            try:
                self._set_timeout(1.0)
                self.sock.sendall(encode_message({"type": "close"}))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    def fileno(self) -> int:
        return self.sock.fileno()

