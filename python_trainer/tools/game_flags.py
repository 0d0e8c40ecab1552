"""The flags of every tool that starts a game (--env-path or --project, --env-id, --connect-timeout), worded once as a
dataclass that each command's arguments extend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import tyro

from python_trainer.base.flags import CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_S, aliases, flag


# The two flags' types, for a command that words their help its own way (a field of the same name, in its subclass).
EnvPath = Annotated[Optional[str], tyro.conf.arg(metavar="PATH", aliases=("--project",))]
EnvId = Annotated[Optional[str], aliases("--env"), tyro.conf.arg(metavar="NAME")]


@dataclass
class GameArgs:
    env_path: EnvPath = None
    """an exported game binary (headless or windowed) of any Godot 3 project with the rl_sync addon (default: this
    repository's exports/headless/rl_games.x86_64), or the project's folder (--project DIR), run with no export"""
    env_id: EnvId = None
    """a game in that binary (default: the binary's default game)"""
    connect_timeout: Annotated[float, tyro.conf.arg(metavar="SECONDS")] = flag(DEFAULT_CONNECT_TIMEOUT_S,
                                                                               CONNECT_TIMEOUT)
    """seconds a game may take to load, list its games and connect; raise it for a game that loads slowly"""
