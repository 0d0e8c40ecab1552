"""The game a person runs with Play in the Godot editor, as the one instance of `godot-ppo train --editor`.

The editor starts the game, not us, so the launcher's way (a port of our choosing on the game's command line, a
token in its environment, the connecting process checked against the one started) cannot apply. Instead the trainer
listens on 127.0.0.1:PORT (godot-rl's default, contract.EDITOR_PORT, or --port), says to press Play, and greets every connection
side by side; the first to answer our handshake and env_info request in godot-rl's protocol is the game. A game of
ours run from its project folder with no mode flag tries that port once, for at most 0.5 s, with no token
(addons/rl_sync/run_mode.gd); it reads the port from ``$RL_SYNC_EDITOR_PORT``, else the project setting
``rl_sync/editor_port``. A game made with godot_rl_agents' plugin connects there too, from the editor, as godot-rl's
own editor training has it. At most EDITOR_CONNECTIONS (base/bounds.py) are greeted at once (a new one closes the
oldest), each buffering at most HANDSHAKE_BYTES; once the game is found the port stays ours, and a second game's Play
is told the trainer is busy (`BusyPort`).

    game = wait_for_play(port, say)       # a GodotGame whose export is an `EditorPlay` holding the connection
    EditorLauncher(game, options)         # the vector env's launcher of that one instance (vec_env.py picks it)

Nothing can restart a game the editor runs: when it stops (its window closed, Stop pressed, or silent for
--step-timeout), `EditorLauncher.restart` raises `GameClosedError`, which ends training with a checkpoint.
"""

from __future__ import annotations

import dataclasses
import errno
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from python_trainer.base.bounds import EDITOR_CONNECTIONS
from python_trainer.base.combinations import refusal
from python_trainer.base.contract import EDITOR_PORT, message
from python_trainer.base.errors import one_line
from python_trainer.envs.connect import Greeting
from python_trainer.envs.failures import GameClosedError, InstanceStartError
from python_trainer.envs.game import GameError, GodotGame
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING, DEFAULT_TIMEOUT_S, PACKED_OBS_ENCODING, RL_SYNC, GodotConnection, encode_message,
    handshake_message,
)

DEFAULT_EDITOR_PORT = EDITOR_PORT  # godot-rl's (GodotEnv.DEFAULT_PORT); the game's side: addons/rl_sync/run_flags.gd
GREETING_TIMEOUT_S = 5.0  # a connection that answers nothing meanwhile is not a game
PORT_SETTINGS = "the game's project setting rl_sync/editor_port (or $RL_SYNC_EDITOR_PORT where Godot runs)"
BUSY = message("busy")  # what a game that presses Play while another trains is told (addons/rl_sync/trainer_handshake.gd)


@dataclass(eq=False)
class EditorInstance:
    """The game the editor runs, in the shape of the launcher's `Instance` the vector env reads."""

    port: int
    conn: Optional[GodotConnection] = None
    env_info: Optional[dict] = None
    hello: Optional[dict] = None
    dialect: Optional[str] = None
    index: int = 0
    seed: int = 0  # the game's own --env_seed: the editor gives it none
    port_kept: Optional["BusyPort"] = None  # the listening port, kept while the game trains

    def close(self, send_close: bool = True) -> None:
        """Close the game's connection (``send_close``: asking it to quit first) and give the port back."""
        if self.conn is not None:
            self.conn.close(send_close=send_close)
        if self.port_kept is not None:
            self.port_kept.close()

    @property
    def game(self) -> str:
        """The game's name as it says it (a game made with godot_rl_agents' plugin says none: "game")."""
        return str((self.env_info or {}).get("env") or "game")

    def label(self) -> str:
        name = (self.env_info or {}).get("env")
        return f"the editor's game{f' {name}' if name else ''} (port {self.port})"

    def log_tail(self, lines: int = 0) -> str:
        return ""  # its output is in the editor's Output panel


@dataclass(eq=False)
class EditorPlay:
    """What stands for an export when the editor runs the game: its accepted connection."""

    port: int
    instance: EditorInstance

    def command(self, headless: bool) -> list[str]:
        raise GameError("--editor: the Godot editor runs this game, so godot-ppo cannot start another copy of it "
                        "(train it with --project DIR, or its export's --env-path, for that)")


def wait_for_play(port: int, say: Callable[[str], None], env_id: Optional[str] = None,
                  step_timeout: float = DEFAULT_TIMEOUT_S) -> GodotGame:
    """Listen on 127.0.0.1:``port`` until a game connects and says what it is (Ctrl-C stops the wait). Connections
    are greeted side by side, so a silent one cannot keep the game's short look waiting; one that is not a game, or
    not ``env_id``, is refused and the wait goes on."""
    try:
        listener = socket.create_server(("127.0.0.1", port))
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        raise GameError(f"--port {port} is taken on 127.0.0.1 (another trainer, or a game's editor session?): give "
                        f"another --port, and the same port in {PORT_SETTINGS}") from None
    say(f"press Play in the Godot editor: the trainer is listening on 127.0.0.1:{port} (Ctrl-C stops it)")
    wait = _PlayWait(listener, port, env_id, say)
    try:
        found = None
        while found is None:
            found = wait.step()
    except BaseException:
        listener.close()
        raise
    finally:
        wait.close()
    inst, sock = found
    inst.conn = GodotConnection(sock, label=inst.label, timeout=step_timeout)
    inst.port_kept = BusyPort(listener)
    return GodotGame(EditorPlay(port, inst), inst.game, rl_sync=inst.dialect == RL_SYNC)


class BusyPort:
    """The port, kept while its game trains: a game that presses Play meanwhile is told, in one message, that the
    trainer is busy (it then says so, and a person plays it), and closed. Nothing is read from a connection here."""

    def __init__(self, listener: socket.socket):
        self.listener = listener
        listener.setblocking(True)
        self.thread = threading.Thread(target=self._answer, name="editor-port-busy", daemon=True)
        self.thread.start()

    def _answer(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:  # closed (close() shuts it down, which wakes the accept)
                return
            try:
                sock.settimeout(1.0)
                sock.sendall(encode_message(BUSY))
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            finally:
                sock.close()

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=2)


class _PlayWait:
    """The listening socket and the connections being greeted: our handshake (asking for our packed encodings, which
    a plain game ignores) and the env_info request go out at once, and what comes back tells the dialect."""

    def __init__(self, listener: socket.socket, port: int, env_id: Optional[str], say: Callable[[str], None]):
        self.listener, self.port, self.env_id, self.say = listener, port, env_id, say
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ)
        self.greeting: dict = {}  # socket -> (Greeting, its deadline), oldest first: at most EDITOR_CONNECTIONS
        self.said_full = False

    def step(self) -> Optional[tuple]:
        """Wait for the next event: an accepted connection, or a greeting's bytes; (the game, its socket) once one is
        whole."""
        deadline = min((d for _, d in self.greeting.values()), default=None)
        events = self.sel.select(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for key, _ in events:
            if key.fileobj is self.listener:
                self._accept()
            elif key.fileobj in self.greeting:  # (not closed by an _accept of this same batch)
                found = self._read(key.fileobj)
                if found is not None:
                    return found
        for sock, (_, due) in list(self.greeting.items()):
            if due <= time.monotonic():
                self._refuse(sock, f"it answered nothing within {GREETING_TIMEOUT_S:g} s")
        return None

    def _accept(self) -> None:
        sock, _ = self.listener.accept()
        if len(self.greeting) >= EDITOR_CONNECTIONS.value:  # the oldest stranger goes: a game answers at once
            oldest = next(iter(self.greeting))
            self._refuse(oldest, f"it was the oldest of {EDITOR_CONNECTIONS.value} that had not answered (said once)",
                         said=self.said_full)
            self.said_full = True
        try:
            sock.settimeout(GREETING_TIMEOUT_S)  # a few hundred bytes: a peer that cannot take them is not a game
            sock.sendall(encode_message(handshake_message(PACKED_OBS_ENCODING, BINARY_STEP_ENCODING))
                         + encode_message(message("env_info")))
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            return self.say(f"godot-ppo: refused a connection on 127.0.0.1:{self.port}: it broke ({e}); still waiting "
                            "for Play")
        self.greeting[sock] = (Greeting(EditorInstance(self.port), owner=0), time.monotonic() + GREETING_TIMEOUT_S)
        self.sel.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket) -> Optional[tuple]:
        """(the game, its socket) once its env_info has come; None while more is to come or after a refusal. A bug of
        the game's own in its env_info (GameBugError) ends the wait."""
        greeting = self.greeting[sock][0]
        try:
            data = sock.recv(65536)
            verdict = greeting.feed(data, lambda inst, hello, owner: hello) if data else "it closed the connection"
        except (BlockingIOError, InterruptedError):
            return None
        except (OSError, InstanceStartError) as e:  # a peer that speaks neither dialect
            verdict = one_line(e)
        if verdict is None:
            return None  # more to come
        if isinstance(verdict, str):
            return self._refuse(sock, verdict)
        inst = greeting.inst
        inst.env_info, inst.hello, inst.dialect = verdict, greeting.hello, greeting.dialect
        if self.env_id is not None and inst.game != self.env_id:
            return self._refuse(sock, f"it runs {inst.game}, and this run trains {self.env_id}", send_close=True)
        self.sel.unregister(sock)
        del self.greeting[sock]
        sock.setblocking(True)
        return inst, sock

    def _refuse(self, sock: socket.socket, why: str, send_close: bool = False, said: bool = False) -> None:
        """Close a connection that is not the game to train (a game is sent "close" first, so it quits cleanly);
        ``said``: a refusal like this one was said already."""
        self.sel.unregister(sock)
        del self.greeting[sock]
        try:
            if send_close:
                sock.sendall(encode_message(message("close")))
        except OSError:
            pass
        sock.close()
        if not said:
            self.say(f"godot-ppo: refused a connection on 127.0.0.1:{self.port}: {why}; still waiting for Play")

    def close(self) -> None:
        """Close the connections being greeted (the listening socket is the caller's)."""
        for sock in self.greeting:
            sock.close()
        self.sel.close()


class EditorLauncher:
    """The vector env's launcher when the editor runs the game: the one instance, already connected."""

    def __init__(self, game: GodotGame, options):
        self.options = options
        self.instance = options.instance(game)  # what the vector env reports as given (the game's own settings)
        self.instances = [game.export.instance]
        self.events: list[str] = []
        self.closed = False
        self.xvfb_pid = None

    def start(self) -> list:
        return self.instances

    def restart(self, index: int, error: Optional[BaseException] = None):
        reason = getattr(error, "reason", None) or (one_line(error) if error is not None else "restart requested")
        self.close(send_close=False)
        raise GameClosedError(f"{self.instances[0].label()} stopped (its window closed, or Stop pressed in the "
                              f"editor): {reason}")

    def close(self, send_close: bool = True) -> None:
        """Ask the game to quit (the editor's Play window closes), close the connection and the port. Idempotent."""
        if not self.closed:
            self.closed = True
            self.instances[0].close(send_close=send_close)

    def script_errors(self) -> None:
        return None  # Godot's script errors go to the editor's Debugger panel, not to us

    def pids(self) -> list:
        return []


# What the editor's Play decides for the game it runs (its own settings, one window): no flag of train's can change it.
EDITOR_DECIDES = ("env_path", "num_instances", "agents_per_instance", "copies", "speedup", "action_repeat", "window",
                  "watch", "capture_video", "ray_address")


def flags_refusal(args) -> Optional[str]:
    """Why `train`'s flags ``args`` do not go with --editor, in one line, or None: --editor trains the one game the
    editor runs, as it runs it, so the flags that would start or set up games go."""
    if not args.editor:
        return None
    defaults = {f.name: f.default for f in dataclasses.fields(args)}
    for name in EDITOR_DECIDES:
        if getattr(args, name) != defaults[name]:
            flag = "--" + name.replace("_", "-") + (" (--project)" if name == "env_path" else "")
            return refusal("editor/game_flags", flag=flag)
    return None
