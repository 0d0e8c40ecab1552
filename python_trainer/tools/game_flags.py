"""The flags of every tool that starts a game (--env-path or --project, --env-id, --connect-timeout, --env-param), worded
once as dataclasses that each command's arguments extend, and --env-param's values checked by train's rule.

--env-path, --env-id and --connect-timeout are declared in base/flags.py (SHARED_FLAGS), which train's arguments share
too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro

from python_trainer.base.flags import CONNECT_TIMEOUT_FLAG, DEFAULT_CONNECT_TIMEOUT_S, ENV_ID_FLAG, ENV_PATH_FLAG
from python_trainer.envs.env_params import CONSTANT, EnvParamError, binary_flags, check_params, wire_values
from python_trainer.run.curriculum import from_flags, start_values


@dataclass
class GameArgs:
    env_path: ENV_PATH_FLAG.type(" (default: this repository's exports/headless/rl_games.x86_64)"
                                 ) = ENV_PATH_FLAG.default(None)
    env_id: ENV_ID_FLAG.type(" (default: the binary's default game)") = ENV_ID_FLAG.default(None)
    connect_timeout: CONNECT_TIMEOUT_FLAG.type() = CONNECT_TIMEOUT_FLAG.default(DEFAULT_CONNECT_TIMEOUT_S)


# --env-param for the tools (envs, launch, play): train's flag (run/curriculum.py's CurriculumArgs) and its rule.
EnvParam = Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=VALUE")]


@dataclass
class EnvParamArgs:
    env_param: EnvParam = ()
    """one of the game's environment parameters, as train's --env-param: NAME=NUMBER (or a sampler,
    NAME=uniform(LOW,HIGH) / NAME=gaussian(MEAN,STD)); repeat the flag for several (`godot-ppo envs` lists a game's
    parameters, docs/env_params.md)"""


def game_env_params(game, flags, samplers: bool = True) -> tuple[list, dict]:
    """--env-param ``flags`` checked against ``game`` by train's rule (curriculum.from_flags, env_params.check_params):
    (the binary's --env_param flags of the constants, which are in force before env_info; the samplers as the
    env_params message's values). ``samplers`` False: a sampler is refused (the engine plays alone: no message)."""
    params, where = from_flags(flags)
    check_params(game, {name: [lesson.value for lesson in lessons] for name, lessons in params.items()}, where)
    values = start_values(params)
    drawn = {name: value for name, value in values.items() if value.kind != CONSTANT}
    if drawn and not samplers:
        name = next(iter(drawn))
        raise EnvParamError(f"{where[name]}: the game takes a number here (samplers are for training and launch)")
    return binary_flags({n: v for n, v in values.items() if v.kind == CONSTANT}), wire_values(drawn)

