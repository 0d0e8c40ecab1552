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

import numpy as np

from python_trainer.base import bounds
from python_trainer.base.errors import Fault
# The wire's facts the game shares (contract.py): the handshake version, our extensions' encodings (the handshake may
# ask for observations packed as base64 little-endian float32, "obs_f32" in step replies, and for the binary step
# exchange: packed actions in, one packed step reply out, see `pack_actions` and `unpack_step`; env_info's
# "step_encoding" says which is in force; godot-rl never asks, so it gets JSON), a packed body's layout (Godot's
# var2bytes() of a pool array: a uint32 type word, a uint32 count, the values) and the statuses in a step reply.
from python_trainer.base.contract import (  # noqa: F401  (read from here too)
    BINARY_STEP_ENCODING, CONNECT_TIMEOUT_S, ENV_INFO_KEYS, EXTENSION_KEY, MAJOR_VERSION, MINOR_VERSION,
    PACKED_HEADER_BYTES, PACKED_OBS_ENCODING, POOL_BYTE_ARRAY, POOL_INT_ARRAY, POOL_REAL_ARRAY, STATUS_RUNNING,
    STATUS_TERMINATED, STATUS_TRUNCATED, TYPE_KEY, is_message, message)
from python_trainer.envs.game import GameBugError

PACKED_HEADER = struct.Struct("<II")
# The two dialects a game may speak (`dialect` tells them apart from the game's first messages):
#   RL_SYNC:  our addon. It says hello (with the launcher's token) as soon as it connects, its env_info carries
#             "extension_version" (and the encodings in force), step replies carry "info" with
#             "TimeLimit.truncated" and "terminal_observation", and the game resets an ended episode in the same step.
#   GODOT_RL: godot_rl_agents' own plugin (its Godot 3 version, branch godot3 at 5b6e1bf, handshake version 0.3). It
#             sends nothing before the trainer's handshake; env_info gives ONE observation space and ONE action space
#             for all agents (dicts, not lists) and no "agent_policy_names"; step replies have no "info"; "done" is
#             the agent's done flag, which the game sets both on success/failure and when its own time limit makes
#             it reset, so a time limit cannot be told from a termination; there is no terminal observation.
#             Which observation comes with done=True depends on when the game resets. The plugin's Sync node reads
#             every agent's reward, done and get_obs() at the start of the decision frame (it is the scene's first
#             node), every `action_repeat` physics frames; a game made the plugin's way sets done and needs_reset
#             in its _physics_process and resets at the start of its next one. So an episode that ended in the
#             last frame of the window (always, with action_repeat 1) arrives with its own last observation, and
#             the game resets during the following step (that step's action is lost, its reward is usually 0);
#             one that ended earlier in the window arrives with the next episode's first observation (or one a
#             few frames into it). A game that resets in the frame it sets done always sends the next episode's
#             first. We map it as terminated = done, truncated = False, final_obs = that observation, and the
#             next step goes on from it: nothing bootstraps from a terminated episode, each reported done counts
#             one episode, and a step spent resetting counts in the next episode's length.
RL_SYNC = "rl_sync"
GODOT_RL = "godot_rl"
DIALECT_NAMES = {RL_SYNC: "the rl_sync addon's protocol (with our extensions)",
                 GODOT_RL: "godot_rl_agents' plugin protocol (plain JSON, done = terminated, no terminal observation)"}
# The game rejects messages above bounds.MESSAGE_BYTES; we refuse to allocate for anything bigger either.
MAX_MESSAGE_BYTES = bounds.MESSAGE_BYTES.value
DEFAULT_TIMEOUT_S = CONNECT_TIMEOUT_S

_LEN = struct.Struct("<I")


class GodotConnectionError(Fault, ConnectionError):
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


class MessageTooLargeError(GodotConnectionError):
    """An instance announced a message over the limit of one message (bounds.MESSAGE_BYTES): a restart would send
    the same again, so the vector env restarts nothing."""


class ImageSizeError(ValueError):
    """A packed step reply whose camera images are not the size the game declared: a bug of the game's own, which a
    restart would repeat."""


def encode_message(obj: Any) -> bytes:
    """One framed message: little-endian byte length of the UTF-8 JSON, then the JSON."""
    body = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    return _LEN.pack(len(body)) + body


def pack_actions(floats=None, ints=None) -> bytes:
    """One framed packed action message: the float32 array of every continuous value (agents in order, keys
    sorted), then the int32 array of every discrete value; an empty or absent array is left out."""
    parts = []
    for values, type_word, dtype in ((floats, POOL_REAL_ARRAY, "<f4"), (ints, POOL_INT_ARRAY, "<i4")):
        if values is None:
            continue
        data = np.ascontiguousarray(values, dtype=dtype).ravel()
        if data.size:
            parts += [PACKED_HEADER.pack(type_word, data.size), data.tobytes()]
    if not parts:
        raise ValueError("packed actions need at least one value")
    body = b"".join(parts)
    return _LEN.pack(len(body)) + body


def is_packed(body) -> bool:
    """Whether a message body is packed (starts with a pool array's type word) rather than JSON."""
    return len(body) >= PACKED_HEADER.size and body[0] in (POOL_INT_ARRAY, POOL_REAL_ARRAY) and body[1:4] == b"\0\0\0"


def unpack_step(body, n_agents: int, obs_dim: int, frame_size: int = 0):
    """A packed step reply: (obs (n, obs_dim), rewards (n,), statuses (n,), terminal obs (ended agents, obs_dim),
    infos {agent index: info of an ended agent}). The arrays are float32 views of ``body`` (frombuffer, no copy;
    statuses too: 0 running, 1 terminated, 2 truncated). Raises ValueError for anything but that layout.

    With ``frame_size`` (the bytes of each agent's camera image), the observations hold the vector keys only and the
    float block is followed by one byte array of every agent's frame, then each ended agent's terminal frame; the
    tuple then also holds those two (frames (n, frame_size), terminal frames (ended, frame_size)), uint8 views."""
    if not is_packed(body) or body[0] != POOL_REAL_ARRAY:
        raise ValueError(f"expected a packed step reply (a float32 array), got {bytes(body[:40])!r}")
    _, count = PACKED_HEADER.unpack_from(body, 0)
    end = PACKED_HEADER.size + 4 * count
    if end > len(body):
        raise ValueError(f"a packed step reply announces {count} float32 values but holds {len(body) - 8} bytes")
    values = np.frombuffer(body, dtype="<f4", count=count, offset=PACKED_HEADER.size)
    n, d = n_agents, obs_dim
    head = n * (d + 2)
    if count < head or (count - head) % max(d, 1):
        raise ValueError(f"a packed step reply of {count} float32 values does not fit {n} agents with observations "
                         f"of {d} values ({n} x {d} + {n} rewards + {n} statuses + {d} per ended episode)")
    statuses = values[n * (d + 1):head]
    ended = int(np.count_nonzero(statuses))
    if ended and not ((statuses == STATUS_RUNNING) | (statuses == STATUS_TERMINATED)
                      | (statuses == STATUS_TRUNCATED)).all():
        raise ValueError(f"agent statuses must be 0 (running), 1 (terminated) or 2 (truncated); got "
                         f"{statuses.tolist()[:20]}")
    if count != head + ended * d:
        raise ValueError(f"a packed step reply of {count} float32 values for {ended} ended episodes; expected "
                         f"{head + ended * d} ({n} agents, observations of {d} values)")
    frames = None
    if frame_size:
        frames, end = _unpack_frames(body, end, n, ended, frame_size)
    elif len(body) >= end + PACKED_HEADER.size and body[end] == POOL_BYTE_ARRAY and body[end + 1:end + 4] == b"\0\0\0":
        raise ValueError("a packed step reply carries a byte array (camera images) after its float32 values, but the "
                         "game's env_info declares no image observation (a key containing \"2d\")")
    infos = {}
    if end < len(body):
        info = decode_body(body[end:]).get("info")
        if not isinstance(info, dict) or not all(k.isdigit() and int(k) < n for k in info):
            raise ValueError(f"the JSON after a packed step reply must be {{\"info\": {{agent index: info}}}}; got "
                             f"{bytes(body[end:end + 200])!r}")
        infos = {int(k): v for k, v in info.items()}
    step = (values[:n * d].reshape(n, d), values[n * d:n * (d + 1)], statuses, values[head:].reshape(ended, d), infos)
    return step if frames is None else step + (frames[:n * frame_size].reshape(n, frame_size),
                                               frames[n * frame_size:].reshape(ended, frame_size))


def _unpack_frames(body, at: int, n: int, ended: int, frame_size: int):
    """(the uint8 view of the byte array at ``at`` of a packed step reply, where what follows it starts), checked:
    n agents' frames, then ``ended`` terminal frames, of ``frame_size`` bytes each, zero-padded to 4 bytes."""
    expected = (n + ended) * frame_size
    if len(body) < at + PACKED_HEADER.size:
        raise ValueError(f"a packed step reply without its camera images: expected a byte array of {n} + {ended} "
                         f"frames of {frame_size} bytes after its float32 values")
    type_word, count = PACKED_HEADER.unpack_from(body, at)
    if type_word != POOL_BYTE_ARRAY:
        raise ValueError(f"a packed step reply's camera images must be a byte array (type {POOL_BYTE_ARRAY}); got "
                         f"type word {type_word} after its float32 values")
    if count != expected:
        raise ImageSizeError(f"a packed step reply holds {count} bytes of camera images, expected {expected} ({n} agents "
                         f"+ {ended} ended episodes x {frame_size} bytes, the size the game declared): a camera must "
                         "keep the size it declared (a size that changes mid-run?)")
    start = at + PACKED_HEADER.size
    stop = start + count + (-count) % 4
    if stop > len(body):
        raise ValueError(f"a packed step reply announces {count} bytes of camera images but holds "
                         f"{len(body) - start}")
    if any(body[start + count:stop]):
        raise ValueError("a packed step reply's camera images are padded with bytes other than zero")
    return np.frombuffer(body, np.uint8, count=count, offset=start), stop


def decode_body(body: bytes | bytearray | memoryview) -> dict:
    """Parse a message body (without its length prefix); raises ValueError if it is not a JSON object."""
    body = bytes(body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte 0x{body[e.start]:02x} at offset {e.start})") from None
    try:
        obj = json.loads(text)
    except RecursionError:  # json's decoder recurses once per nesting level
        raise ValueError("JSON nested too deeply (thousands of levels)") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def handshake_message(obs_encoding: Optional[str] = None, step_encoding: Optional[str] = None) -> dict:
    """The trainer's handshake; the encodings are our extension (godot_rl_agents' plugin ignores unknown keys)."""
    asked = {"obs_encoding": obs_encoding, "step_encoding": step_encoding}
    return message("handshake", major_version=MAJOR_VERSION, minor_version=MINOR_VERSION,
                   **{key: value for key, value in asked.items() if value is not None})


def dialect(hello: Optional[dict], env_info: dict) -> str:
    """RL_SYNC or GODOT_RL, from what a game said before any episode: our hello (None if it sent none) and its
    env_info reply. Raises ValueError with one line naming what is missing from a game that speaks neither."""
    if is_message(env_info, "error"):  # our addon found a bug of the game's own (see GodotConnection.game_bug)
        raise GameBugError(str(env_info.get("message"))[:500])
    if not is_message(env_info, "env_info"):
        raise ValueError(f"its first message is neither our hello nor an env_info reply (type "
                         f"{env_info.get(TYPE_KEY)!r}): is it a Godot game with the rl_sync addon or godot_rl_agents' "
                         "plugin?")
    missing = [k for k in ENV_INFO_KEYS if k not in env_info]
    if missing:
        raise ValueError(f"its env_info reply lacks {', '.join(map(repr, missing))} (it has "
                         f"{', '.join(map(repr, sorted(k for k in env_info if k != 'type'))) or 'nothing'}): "
                         "a godot-rl game says how many agents it has and their observation and action spaces")
    n = env_info["n_agents"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"its env_info reports n_agents={n!r}: it has no agents (are its AIController nodes in "
                         "the group AGENT?)")
    for key in ("observation_space", "action_space"):
        space = env_info[key]
        if isinstance(space, (dict, list)) and not space:  # a game of ours or the plugin's that declares nothing
            raise GameBugError(f"its agents declare the {key.replace('_', ' ')} {space!r} (its env_info): an agent "
                               f"needs at least one {'observation' if key[0] == 'o' else 'action'} key")
        if not isinstance(space, (dict, list)):
            raise ValueError(f"its env_info's {key!r} is {str(space)[:100]!r}: expected one space for all agents (a "
                             "dict) or one per agent (a list)")
    return RL_SYNC if hello is not None or EXTENSION_KEY in env_info else GODOT_RL


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
        self.send_bytes(encode_message(obj), f"a {obj.get('type')!r} message")

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

    def recv_body(self, timeout: Optional[float] = None, what: str = "a message") -> bytes:
        """Read one message's body (without its length prefix), undecoded."""
        if self.closed:
            raise self.error("the connection is already closed")
        t = self.timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + t
        self._fill(4, deadline, what, first_wait=t)
        (n,) = _LEN.unpack_from(self._rbuf, 0)
        if n > MAX_MESSAGE_BYTES:
            error = self.error(f"announced a message of {n:,} bytes, over the {MAX_MESSAGE_BYTES:,}-byte limit of one "
                               "message: fewer agents per instance (--agents-per-instance, --copies) or smaller camera "
                               "images")
            raise MessageTooLargeError(error.instance, error.reason, error.log_tail)
        self._fill(4 + n, deadline, what)
        if len(self._rbuf) == 4 + n:  # the usual case: one whole message and nothing after it
            body = bytes(memoryview(self._rbuf)[4:])
            self._rbuf.clear()
        else:
            body = bytes(self._rbuf[4:4 + n])
            del self._rbuf[:4 + n]
        return body

    def recv(self, timeout: Optional[float] = None, expect: Optional[str] = None) -> dict:
        """Read one message; ``expect`` checks its "type". Raises GodotConnectionError on any failure."""
        what = f"a {expect!r} reply" if expect else "a message"
        body = self.recv_body(timeout, what)
        if is_packed(body):
            raise self.error(f"sent a packed message ({len(body)} bytes) where {what} in JSON was expected")
        try:
            msg = decode_body(body)
        except (UnicodeDecodeError, ValueError) as e:
            raise self.error(f"sent a malformed message ({e}): {body[:200]!r}") from None
        if expect is not None and not is_message(msg, expect):
            if is_message(msg, "error"):
                raise self.game_bug(msg)
            raise self.error(f"expected a {expect!r} message, got type {msg.get(TYPE_KEY)!r}: {str(msg)[:200]}")
        return msg

    def game_bug(self, msg: dict) -> GameBugError:
        """Our addon's {"type": "error", "message"}: the game found a bug of its own (an observation of another size
        than it declared) and quits; a restart would repeat it (our extension: godot-rl's plugin never sends it)."""
        return GameBugError(f"{self.label}: {str(msg.get('message'))[:500]}")

    # ------------------------------------------------------------------ messages
    def handshake(self, obs_encoding: Optional[str] = None, step_encoding: Optional[str] = None) -> None:
        self.send(handshake_message(obs_encoding, step_encoding))

    def env_info(self, timeout: Optional[float] = None) -> dict:
        self.send(message("env_info"))
        info = self.recv(timeout, expect="env_info")
        for key in ("n_agents", "observation_space", "action_space"):
            if key not in info:
                raise self.error(f"env_info reply lacks {key!r}: {str(info)[:300]}")
        return info

    def reset_send(self) -> None:
        self.send(message("reset"))

    def reset_recv(self, timeout: Optional[float] = None) -> list:
        """godot-rl's list of per-agent obs dicts of a JSON reset reply (the vector env decodes packed ones)."""
        msg = self.recv(timeout, expect="reset")
        if "obs" not in msg:
            raise self.error("its reset reply has packed observations (obs_f32), not godot-rl's obs list: read it "
                             "with recv(expect='reset') or through GodotVecEnv")
        return msg["obs"]

    def reset(self, timeout: Optional[float] = None) -> list:
        """Reset every agent of the instance; returns godot-rl's list of per-agent obs dicts."""
        self.reset_send()
        return self.reset_recv(timeout)

    def step_send(self, actions: Sequence[dict]) -> None:
        """Send one action dict per agent. Send to every instance first, then step_recv each (they run in parallel)."""
        self.send(message("action", action=actions))

    def step_recv(self, timeout: Optional[float] = None) -> dict:
        """The "step" reply: {"obs": [...] or "obs_f32": base64, "reward": [...], "done": [...], "info": [...]}."""
        msg = self.recv(timeout, expect="step")
        for key in ("reward", "done"):
            if key not in msg:
                raise self.error(f"step reply lacks {key!r}: {str(msg)[:300]}")
        if "obs" not in msg and "obs_f32" not in msg:
            raise self.error(f"step reply lacks 'obs': {str(msg)[:300]}")
        return msg

    def send_bytes(self, data: bytes, what: str = "packed actions") -> None:
        """Send an already framed message (e.g. from `pack_actions`)."""
        if self.closed:
            raise self.error("the connection is already closed")
        try:
            self._set_timeout(self.timeout)
            self.sock.sendall(data)
        except socket.timeout:
            raise self.error(f"timed out after {self.timeout:g}s sending {what}") from None
        except OSError as e:
            raise self.error(f"the connection broke while sending {what} ({e})") from None

    def step_recv_packed(self, n_agents: int, obs_dim: int, timeout: Optional[float] = None, frame_size: int = 0):
        """The packed step reply of the binary step exchange, as `unpack_step` returns it."""
        body = self.recv_body(timeout, "a packed 'step' reply")
        try:
            return unpack_step(body, n_agents, obs_dim, frame_size)
        except ImageSizeError as e:
            raise GameBugError(f"{self.label}: {e}") from None
        except ValueError as e:
            if not is_packed(body):  # in JSON: our addon's report of a bug of the game's own, instead of the reply?
                try:
                    msg = decode_body(body)
                except ValueError:
                    msg = {}
                if is_message(msg, "error"):
                    raise self.game_bug(msg) from None
            raise self.error(f"sent a malformed step reply ({e})") from None

    def call(self, method: str, args: Optional[Sequence] = None, agent_args: Optional[Sequence] = None,
             timeout: Optional[float] = None) -> list:
        """godot-rl's "call": each agent's result of ``method``. Our extension (godot-rl sends neither): ``args``,
        the arguments every agent's method gets, or ``agent_args``, one list of arguments per agent."""
        msg: dict = message("call", method=method)
        if args is not None:
            msg["args"] = list(args)
        if agent_args is not None:
            msg["agent_args"] = [list(a) for a in agent_args]
        self.send(msg)
        return self.recv(timeout, expect="call").get("returns")

    def request(self, msg_type: str, timeout: Optional[float] = None, **fields) -> dict:
        """Send {"type": msg_type, **fields} and return the reply of the same type (e.g. our "stats" extension)."""
        self.send(message(msg_type, **fields))
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
                self.sock.sendall(encode_message(message("close")))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    def fileno(self) -> int:
        return self.sock.fileno()

