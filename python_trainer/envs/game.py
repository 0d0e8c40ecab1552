"""Which game to run, and the command line of one game instance.

Every command names a game the same way: ``--env-path PATH`` (an exported binary of any Godot 3 project that uses
the rl_sync addon, headless or windowed; default: this repository's ``exports/headless/rl_games.x86_64``; or the
project's folder itself, ``--project DIR``, run in place with no export) and ``--env-id NAME`` (a game in that binary;
may be left out, and the binary's default game runs). The names of the games come from the binary itself
(``--list_envs``), never from a list kept here.

    resolve_env(env_id, env_path)   -> a gymnasium id (str) or a `GodotGame`: the one place that decides which
    GodotGame(export, env)             a game inside an export (`GameExport`) or a project folder (`GameProject`)
    GameInstance(game, agents, ...) -> .command(*mode_args) and .environ(): one instance's command line and
                                       environment, used alike by the launcher, playback and profiling

An export runs headless or windowed whatever kind it is: Debian's templates are copied unchanged into an export, so
a binary that is a copy of ``godot3-server`` is headless, one of ``godot3-runner`` is windowed, and the other mode
runs the same ``.pck`` with the other template (``godot3-runner --main-pack game.pck``).
"""

from __future__ import annotations

import argparse
import dataclasses
import filecmp
import functools
import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

from python_trainer.base.contract import (
    ENGINE_AT, ENGINE_ERROR, ENVS_DEFAULT_KEY, ENVS_PARAMS_KEY, ENVS_REPORT, PLUGIN_CONNECT_LINE, arg, flag,
)
from python_trainer.base.errors import UserError
from python_trainer.base import paths
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S, SLOW_GAME_HINT
from python_trainer.base.processes import describe_exit, run_to_end
from python_trainer.envs.project_import import ImportFailed, ensure_imported
from python_trainer.envs.logs import shown_lines

HEADLESS_TEMPLATE = "godot3-server"
WINDOWED_TEMPLATE = "godot3-runner"
# Engine flag (two words, consumed by Godot itself): every frame is one physics step of 1/60 s, and a headless
# instance runs as fast as the CPU allows instead of at real time.
FIXED_FPS = 60
# Engine flag for a windowed instance whose agents see through cameras: the window is never drawn (the sensors still
# render their own viewports on decision frames), as godot-rl's scripts run it; training that way is about 5x faster.
NO_RENDER_LOOP = "--disable-render-loop"


class GameError(UserError, ValueError):
    """A game that cannot be used as named: the message says what is wrong and how to fix it."""


class GameBugError(GameError):
    """A bug in a game that a restart would only repeat (an observation of another size than it declared, a reward
    that is not a number, an empty action space, script errors over and over): one line naming the agent, the key and
    what the game declared; never restarted."""


def game_environ(base=None, display: Optional[str] = None) -> dict:
    """The environment for a game process. Godot reads its locale from LANG and prints 4 lines of errors for
    "C"/"POSIX"/unset, which would crowd the log tails quoted in our error messages. ``display`` sets DISPLAY."""
    env = dict(os.environ if base is None else base)
    if env.get("LANG", "").split(".")[0] in ("", "C", "POSIX"):
        env["LANG"] = "en_US.UTF-8"
    if display is not None:
        env["DISPLAY"] = display
    return env


# ---------------------------------------------------------------------------------------------- exports
@functools.lru_cache(maxsize=32)
def _template_kind(path: str, size: int, mtime: float) -> Optional[str]:
    for kind, template in (("headless", HEADLESS_TEMPLATE), ("windowed", WINDOWED_TEMPLATE)):
        exe = shutil.which(template)
        if exe and os.path.getsize(exe) == size and filecmp.cmp(exe, path, shallow=False):
            return kind
    return None


@dataclass(frozen=True)
class GameExport:
    """An exported game binary (with its ``.pck`` beside it) that can run headless or windowed."""

    path: Path

    @classmethod
    def open(cls, env_path: Union[str, os.PathLike]) -> "GameExport":
        """Check that ``env_path`` is an executable export; raises GameError naming the fix."""
        path = Path(env_path).expanduser()
        hint = ("give an exported game binary, e.g. exports/headless/rl_games.x86_64 (`godot-ppo export` makes it), or "
                "a Godot project's folder (--project DIR)")
        if not path.exists():
            raise GameError(f"--env-path {path}: no such file; {hint}")
        if path.is_dir():
            raise GameError(f"--env-path {path}: a folder with no project.godot in it, so not a Godot project; {hint}")
        if not os.access(path, os.X_OK):
            raise GameError(f"--env-path {path}: not executable; run `chmod +x {path}` if it is an export, or {hint}")
        return cls(path.resolve())

    @property
    def pck(self) -> Path:
        return self.path.with_suffix(".pck")

    @property
    def kind(self) -> Optional[str]:
        """'headless' or 'windowed' for a copy of Debian's template; None for anything else (used as it is)."""
        st = self.path.stat()
        return _template_kind(str(self.path), st.st_size, st.st_mtime)

    def command(self, headless: bool) -> list[str]:
        """The argv prefix that runs this export headless or windowed: the binary itself, else its sibling of the
        other kind (`godot-ppo export` writes OUT/headless/NAME and OUT/windowed/NAME), else the same .pck with the
        other template."""
        want = "headless" if headless else "windowed"
        kind = self.kind
        if kind is None or kind == want:
            return [str(self.path)]
        sibling = GameExport(self.path.parent.parent / want / self.path.name)
        if sibling.path.is_file() and sibling.pck.is_file() and sibling.kind == want:
            return [str(sibling.path)]
        template = shutil.which(HEADLESS_TEMPLATE if headless else WINDOWED_TEMPLATE)
        if template is None or not self.pck.is_file():
            raise GameError(
                f"{self.path} is a {kind} export; running it {want} needs "
                f"{HEADLESS_TEMPLATE if headless else WINDOWED_TEMPLATE} and {self.pck.name} beside the binary: "
                f"give the {want} export instead (godot-ppo export writes both)"
            )
        return [template, "--main-pack", str(self.pck)]


@dataclass(frozen=True)
class GameProject:
    """A Godot 3 project folder run in place, with no export: ``godot3-server --path DIR`` headless,
    ``godot3-runner --path DIR`` windowed. Opening it imports its assets first (project_import.py)."""

    path: Path

    @classmethod
    def open(cls, project: Union[str, os.PathLike]) -> "GameProject":
        """Check that ``project`` is a Godot project with the rl_sync addon, and import its assets when needed;
        raises GameError naming the fix."""
        path = Path(project).expanduser().resolve()
        if not (path / "project.godot").is_file():
            raise GameError(f"--project {path}: no project.godot in it: give the folder of a Godot 3 project (the one "
                            "holding project.godot)")
        if not (path / ADDON_SYNC).is_file():
            raise GameError(f"--project {path}: a Godot project without {ADDON_SYNC}: copy this repository's "
                            "godot_project/addons/rl_sync into its addons/ and add an RLSync node to its game scene "
                            "(docs/own_game.md)")
        try:
            ensure_imported(path, env=game_environ())
        except (ImportFailed, FileNotFoundError) as e:  # FileNotFoundError: godot3-server is not installed
            raise GameError(str(e)) from None
        return cls(path)

    def command(self, headless: bool) -> list[str]:
        template = HEADLESS_TEMPLATE if headless else WINDOWED_TEMPLATE
        exe = shutil.which(template)
        if exe is None:
            how = "headless" if headless else "in a window"
            raise GameError(f"{template} is not installed (it runs {self.path} {how}): run `sudo apt-get install "
                            f"{template}`")
        return [exe, "--path", str(self.path)]


def open_game_path(env_path: Union[str, os.PathLike]) -> Union[GameExport, GameProject]:
    """--env-path's game: the folder of a Godot project (holding project.godot) runs in place, anything else must be
    an export."""
    path = Path(env_path).expanduser()
    if path.is_dir() and (path / "project.godot").is_file():
        return GameProject.open(path)
    return GameExport.open(path)


@dataclass(frozen=True)
class Program:
    """A fixed argv prefix standing in for an export (tests run a fake game this way)."""

    argv: tuple

    def command(self, headless: bool) -> list[str]:
        return list(self.argv)


# A game made with godot_rl_agents' plugin (its Godot 3 sync.gd) prints PLUGIN_CONNECT_LINE just before its one try to
# connect, and PLUGIN_PHYSICS_LINE with what it applied (contract.py). Such a game does not answer --list_envs: it
# holds one game, named here after its binary. (That version reads --speedup before it parses the command line, so its
# Sync node's speed_up wins.)
ADDON_GUIDE = "docs/godot_rl_plugin.md"
ADDON_SYNC = Path("addons") / "rl_sync" / "sync.gd"  # the sync node's script, where a project keeps it


@dataclass(frozen=True)
class GameList:
    envs: tuple
    default: str
    rl_sync: bool = True  # the export has our addon (False: a game made with godot_rl_agents' plugin)
    # game -> its environment parameters (name -> {"default", "min", "max"}), for the games that declare some
    env_params: dict = dataclasses.field(default_factory=dict)


@functools.lru_cache(maxsize=32)
def _list_envs(export: Union[GameExport, GameProject], mtime: float, timeout: float) -> GameList:
    path = export.path
    # The engine's --quit ends the run after its first frame, which answers --list_envs: a binary whose .pck is
    # damaged would otherwise fall back to the (headless) project manager and never exit. It runs in an empty
    # folder: a binary that cannot read its project settings writes Godot's user logs into its working folder.
    # --port names a port bound but not listening: a game made with godot_rl_agents' plugin (which ignores
    # --list_envs) tries its one connection there and is refused at once, instead of trying its default port
    # (contract.EDITOR_PORT), where some other trainer may listen.
    with tempfile.TemporaryDirectory(prefix="godot-ppo-list-") as cwd, socket.socket() as closed_port:
        closed_port.bind(("127.0.0.1", 0))
        argv = [flag("list_envs"), "--quit", arg("port", closed_port.getsockname()[1])]  # (--quit: the engine's)
        result = run_to_end(export.command(headless=True) + argv, timeout=timeout, env=game_environ(), cwd=cwd)
    code, out, err = result.returncode, result.stdout, result.stderr
    fix = ("does its main scene hold an RLSync node (addons/rl_sync/sync.gd)?" if isinstance(export, GameProject) else
           "is it an export of a Godot 3 project that uses addons/rl_sync or godot_rl_agents' plugin?")
    if code is None:
        raise GameError(f"{path} did not answer --list_envs within {timeout:g} s: {SLOW_GAME_HINT} (or {fix})")
    for line in out.splitlines():
        if line.startswith('{"%s"' % ENVS_REPORT):
            try:
                listing = json.loads(line)
                return GameList(tuple(listing[ENVS_REPORT]), str(listing[ENVS_DEFAULT_KEY]),
                                env_params=listing.get(ENVS_PARAMS_KEY, {}))
            except (ValueError, KeyError, TypeError):
                break
    if PLUGIN_CONNECT_LINE in out:
        return GameList((path.stem,), path.stem, rl_sync=False)
    # Godot's own first error says most (a damaged .pck: "Corrupted header in binary project.binary"); its harmless
    # lines (logs.shown_lines) and its noise about TLS certificates say nothing.
    noise = ("certificate", ENGINE_AT + " ")
    printed = [line.strip() for line in shown_lines(err + out) if line.strip() and not any(n in line for n in noise)]
    errors = [line for line in printed if line.startswith(ENGINE_ERROR)]
    said = (errors or printed[-1:] or ["nothing"])[0][:200]
    raise GameError(f"{path} does not list its games ({describe_exit(code)}; it said {said!r}): {fix}")


def list_games(export: Union[GameExport, GameProject], timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> GameList:
    """The games in an export (or a project folder) and its default, as the game reports them (cached per version of
    the binary, or of project.godot)."""
    version = export.path / "project.godot" if isinstance(export, GameProject) else export.path
    return _list_envs(export, version.stat().st_mtime, float(timeout))


@dataclass(frozen=True)
class GodotGame:
    """A game inside an export, a project folder (or a stand-in `Program`)."""

    export: Union[GameExport, GameProject, Program]
    env: str
    rl_sync: bool = True  # False: a game made with godot_rl_agents' plugin (no in-engine policies, no --list_envs)

    @property
    def env_path(self) -> Optional[str]:
        return str(self.export.path) if isinstance(self.export, (GameExport, GameProject)) else None

    def require_addon(self, what: str) -> None:
        """Raise GameError (one line) when ``what`` needs our addon in the game and this game does not have it."""
        if not self.rl_sync:
            raise GameError(
                f"{what} runs the policy inside the game, which needs the rl_sync addon; {self.env_path or self.env} "
                "is a game made with godot_rl_agents' plugin: use `godot-ppo play RUN --python` (the PyTorch "
                f"checkpoint drives the game), or move the game to our addon ({ADDON_GUIDE})"
            )


def is_gym_id(env_id: Optional[str]) -> bool:
    if env_id is None:
        return False
    import gymnasium as gym

    return env_id in gym.registry


def resolve_env(env_id: Optional[str], env_path=None, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> Union[str, GodotGame]:
    """The one place that decides Godot versus gymnasium.

    With ``env_path``: a game in that export (``env_id`` None: its default game). Without: a registered gymnasium id
    stays a gymnasium id; any other name is a game in this repository's default export.
    """
    if env_path is None:
        if is_gym_id(env_id):
            return env_id
        try:
            export = GameExport.open(paths.default_export(headless=True))
        except GameError:
            raise GameError(
                f"unknown env id {env_id!r}: not a registered gymnasium id (e.g. CartPole-v1), and no --env-path "
                f"was given while this repository's export {paths.default_export(True)} is missing: pass --env-path "
                "PATH to your game's export, or run `godot-ppo export`"
            ) from None
    else:
        export = open_game_path(env_path)
    games = list_games(export, timeout)
    if env_id is None:
        return GodotGame(export, games.default, games.rl_sync)
    if env_id not in games.envs:
        where = f"--env-path {export.path}" if env_path is not None else f"the default export {export.path}"
        also = "" if env_path is not None else " nor a registered gymnasium id (e.g. CartPole-v1)"
        raise GameError(
            f"unknown env id {env_id!r}: neither a game in {where} (its games: {', '.join(games.envs)}){also}; "
            "pick one of those, or pass --env-path to the export that holds it"
            + ("" if games.rl_sync else " (a game made with godot_rl_agents' plugin holds one game, named after its "
               "binary: drop --env-id)")
        )
    return GodotGame(export, env_id, games.rl_sync)


def godot_game(env_id: Optional[str], env_path=None, program: Optional[Sequence[str]] = None,
               timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> GodotGame:
    """``resolve_env`` for callers that need a Godot game; ``program`` runs a stand-in binary under that name."""
    if program is not None:
        argv = [program] if isinstance(program, (str, os.PathLike)) else program
        return GodotGame(Program(tuple(str(p) for p in argv)), env_id or "game")
    game = resolve_env(env_id, env_path, timeout)
    if isinstance(game, str):
        raise GameError(f"{env_id!r} is a gymnasium id, not a Godot game: pass --env-path to a Godot export")
    return game


# ---------------------------------------------------------------------------------------------- one instance
@dataclass(frozen=True)
class GameInstance:
    """Everything that makes one game instance's command line and environment.

    ``agents`` None lets the game choose (its env_info then says how many it simulates); ``fixed_fps`` None runs
    at real time (watching); ``display`` is the X display of a windowed instance (None: the user's $DISPLAY);
    ``copies`` > 1 runs that many copies of the game's scene in the process, copy k seeded ``seed + k``.
    """

    game: GodotGame
    agents: Optional[int] = None
    seed: int = 0
    speedup: float = 1
    action_repeat: int = 1
    max_episode_steps: Optional[int] = None
    headless: bool = True
    display: Optional[str] = None
    fixed_fps: Optional[int] = FIXED_FPS
    extra_args: tuple = ()
    copies: int = 1  # copies of the game's scene in the process (the addon's scene_copies.gd), each seeded seed + k

    def replace(self, **changes) -> "GameInstance":
        return dataclasses.replace(self, **changes)

    def command(self, *mode_args: str) -> list[str]:
        """argv: the program, the game's settings, ``mode_args`` (--port=..., --policy=..., ...), extra args."""
        # The seed, speedup and action repeat always go explicitly: a game made with godot_rl_agents' plugin has
        # defaults of its own for them (action_repeat 8 when the flag is absent).
        cmd = self.game.export.command(self.headless) + [
            arg("env", self.game.env), arg("env_seed", self.seed), arg("speedup", f"{self.speedup:g}"),
            arg("action_repeat", int(self.action_repeat)),
        ]
        if self.agents is not None:
            cmd.append(arg("agents", int(self.agents)))
        if self.max_episode_steps is not None:
            cmd.append(arg("max_episode_steps", int(self.max_episode_steps)))
        if self.copies != 1:
            cmd.append(arg("copies", int(self.copies)))
        cmd += [str(a) for a in mode_args] + [str(a) for a in self.extra_args]
        if self.fixed_fps is not None:
            cmd += ["--fixed-fps", str(int(self.fixed_fps))]
        return cmd

    def environ(self, base=None) -> dict:
        return game_environ(base, None if self.headless else self.display)


def add_game_arguments(parser: argparse.ArgumentParser, env_flag: str = "--env-id") -> None:
    """--env-path and --env-id, worded alike in every command."""
    parser.add_argument("--env-path", default=None, metavar="PATH",
                        help="an exported game binary (headless or windowed) of any Godot 3 project with the rl_sync "
                             "addon (default: this repository's exports/headless/rl_games.x86_64)")
    parser.add_argument(env_flag, *(["--env"] if env_flag != "--env" else []), dest="env_id", default=None,
                        metavar="NAME", help="a game in that binary (default: the binary's default game)")
