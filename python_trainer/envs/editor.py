"""The game a person runs with Play in the Godot editor, as the one instance of `godot-ppo train --editor`.

The editor starts the game, not us, so the launcher's way (a port of our choosing on the game's command line, a
token in its environment, the connecting process checked against the one started) cannot apply. Instead the trainer
listens on 127.0.0.1:PORT (godot-rl's default 11008, or --port), says to press Play, and takes the first connection
that answers our handshake and env_info request as a game of godot-rl's protocol. A game of ours run from its project
folder with no mode flag tries that port once, for at most 0.5 s, with no token (addons/rl_sync/run_mode.gd); it reads
the port from the project setting ``rl_sync/editor_port`` or ``$RL_SYNC_EDITOR_PORT``. A game made with godot_rl_agents'
plugin connects there too, from the editor, as godot-rl's own editor training has it.

    game = wait_for_play(port, say)       # a GodotGame whose export is an `EditorPlay` holding the connection
    EditorLauncher(game, options)         # the vector env's launcher of that one instance (vec_env.py picks it)

Nothing can restart a game the editor runs: when it stops (its window closed, Stop pressed, or silent for
--step-timeout), `EditorLauncher.restart` raises `GameClosedError`, which ends training with a checkpoint.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import Callable, Optional

from python_trainer.base.errors import one_line
from python_trainer.envs.failures import GameClosedError
from python_trainer.envs.game import GameBugError, GameError, GodotGame
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING, DEFAULT_TIMEOUT_S, PACKED_OBS_ENCODING, RL_SYNC, GodotConnection, GodotConnectionError,
    dialect, handshake_message,
)

DEFAULT_EDITOR_PORT = 11008  # godot-rl's (GodotEnv.DEFAULT_PORT); the game's side: addons/rl_sync/run_flags.gd
GREETING_TIMEOUT_S = 10.0  # a connection that answers nothing meanwhile is not a game
PORT_SETTINGS = "the game's project setting rl_sync/editor_port (or $RL_SYNC_EDITOR_PORT where Godot runs)"


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
        raise GameError("--editor: the Godot editor runs this game, so godot-ppo cannot start another copy of it: give "
                        "the project as --project DIR (or its export as --env-path) for that")  # fmt: skip


def wait_for_play(port: int, say: Callable[[str], None], env_id: Optional[str] = None,
                  step_timeout: float = DEFAULT_TIMEOUT_S) -> GodotGame:
    """Listen on 127.0.0.1:``port`` until a game connects and says what it is (Ctrl-C stops the wait); a connection
    that is not a game, or not ``env_id``, is refused and the wait goes on."""
    try:
        listener = socket.create_server(("127.0.0.1", port))
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        raise GameError(f"--port {port} is taken on 127.0.0.1 (another trainer, or a game's editor session?): give "
                        f"another --port, and the same port in {PORT_SETTINGS}") from None  # fmt: skip
    with listener:
        say(f"press Play in the Godot editor: the trainer is listening on 127.0.0.1:{port} (Ctrl-C stops it)")
        while True:
            sock, _ = listener.accept()
            inst = EditorInstance(port)
            inst.conn = GodotConnection(sock, label=inst.label, timeout=step_timeout)
            try:
                _greet(inst)
            except GameBugError:
                inst.conn.close(send_close=False)
                raise
            except (GodotConnectionError, ValueError) as e:
                inst.conn.close(send_close=False)
                say(f"godot-ppo: refused a connection on 127.0.0.1:{port}: {one_line(e)}; still waiting for Play")
                continue
            if env_id is not None and inst.game != env_id:
                inst.conn.close(send_close=True)
                say(f"godot-ppo: refused {inst.label()}: this run trains {env_id}; still waiting for Play")
                continue
            return GodotGame(EditorPlay(port, inst), inst.game, rl_sync=inst.dialect == RL_SYNC)


def _greet(inst: EditorInstance) -> None:
    """Our handshake (asking for our packed encodings, which a plain game ignores) and the env_info request at once;
    what comes back tells the dialect. Our hello may come first, from a game that holds a token."""
    conn = inst.conn
    conn.send(handshake_message(PACKED_OBS_ENCODING, BINARY_STEP_ENCODING))
    conn.send({"type": "env_info"})
    msg = conn.recv(GREETING_TIMEOUT_S)
    if msg.get("type") == "hello":
        inst.hello, msg = msg, conn.recv(GREETING_TIMEOUT_S)
    inst.dialect = dialect(inst.hello, msg)
    inst.env_info = msg


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
                              f"editor): {reason}")  # fmt: skip

    def close(self, send_close: bool = True) -> None:
        """Ask the game to quit (the editor's Play window closes), and close the connection. Idempotent."""
        if not self.closed:
            self.closed = True
            self.instances[0].conn.close(send_close=send_close)

    def script_errors(self) -> None:
        return None  # Godot's script errors go to the editor's Debugger panel, not to us

    def pids(self) -> list:
        return []
