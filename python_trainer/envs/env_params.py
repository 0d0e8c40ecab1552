"""Environment parameters, the trainer's side: what a game declares, the values a run gives it, and their checks.

A game made with the rl_sync addon declares numbers its episodes read (a gap, a size: docs/env_params.md), each with
a default and a range; the binary reports them in its one short query (``--list_envs``, our extension) and in every
instance's env_info. A run gives a parameter a value (`Value`): a constant, or a sampler the game draws from at every
episode of every agent (uniform or Gaussian, from a generator of the game's own, seeded by --env_seed). The game takes
a value at each agent's next episode (the ``env_params`` message, `GodotVecEnv.set_env_params`); the constants in
force at start also go on its command line (`binary_flags`). A parameter declared ``"fixed": true`` is read once, as
the agents start: one constant for the run, or it is refused (`check_params`). A game made with
godot_rl_agents' plugin has no parameters.

    --env-param gap_max=3.0   --env-param gap_max=uniform(2.6,3.4)   --env-param gap_max=gaussian(3.0,0.2)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from python_trainer.base.contract import arg
from python_trainer.base.errors import UserError
from python_trainer.envs.editor import EditorPlay
from python_trainer.envs.game import ADDON_GUIDE, GameExport, GameProject, GodotGame, list_games

CONSTANT, UNIFORM, GAUSSIAN = "constant", "uniform", "gaussian"
FLAG_FORMS = "NAME=NUMBER, NAME=uniform(LOW,HIGH) or NAME=gaussian(MEAN,STD)"
_SAMPLER = re.compile(r"^\s*(uniform|gaussian)\s*\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*$")


class EnvParamError(UserError, ValueError):
    """A parameter the game does not declare, a value out of its range, a value that is not a number, a flag or a
    curriculum file that cannot be read; one line naming the parameter (and where it was given)."""


@dataclass(frozen=True)
class Value:
    """What a parameter is given: a constant (``args``: the value) or a sampler (uniform: low, high; gaussian: mean,
    standard deviation)."""

    kind: str
    args: tuple

    def wire(self):
        """The env_params message's form: a number, or {"uniform": [lo, hi]} / {"gaussian": [mean, std]}."""
        return float(self.args[0]) if self.kind == CONSTANT else {self.kind: [float(a) for a in self.args]}

    def center(self) -> float:
        """The value, or the sampler's mean (what TensorBoard's curriculum/<name> shows)."""
        return float(self.args[0]) if self.kind != UNIFORM else (self.args[0] + self.args[1]) / 2.0

    def __str__(self) -> str:
        if self.kind == CONSTANT:
            return f"{self.args[0]:g}"
        return f"{self.kind}({self.args[0]:g},{self.args[1]:g})"


def binary_flags(values: dict) -> list[str]:
    """The binary's own flags (``--env_param=NAME=VALUE``, env_params.gd) for the constants among ``values`` (name
    -> number or Value). They are in force from an agent's first episode, before env_info is read, so a parameter
    that shapes what an agent observes (forager's vision) takes effect: the env_params message comes too late for
    that. Samplers have no such flag; the message sets them."""
    flags = []
    for name, value in values.items():
        if isinstance(value, Value):
            if value.kind != CONSTANT:
                continue
            value = value.args[0]
        flags.append(arg("env_param", f"{name}={float(value)!r}"))
    return flags


def finite_number(text, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond a float's range
        value = math.nan
    if isinstance(text, bool) or not math.isfinite(value):
        raise EnvParamError(f"{where}: {repr(text)[:40]} is not a finite number")
    return value


def sampler(kind: str, a, b, where: str) -> Value:
    """A sampler's Value, its two numbers checked (low <= high, a standard deviation >= 0)."""
    a, b = finite_number(a, where), finite_number(b, where)
    if kind == UNIFORM and a > b:
        raise EnvParamError(f"{where}: uniform({a:g},{b:g}) has its low above its high")
    if kind == GAUSSIAN and b < 0:
        raise EnvParamError(f"{where}: gaussian({a:g},{b:g}) has a negative standard deviation")
    return Value(kind, (a, b))


def parse_value(text: str, where: str) -> Value:
    """``3.0``, ``uniform(2.6,3.4)`` or ``gaussian(3.0,0.2)``."""
    match = _SAMPLER.match(text)
    if match:
        return sampler(match.group(1), match.group(2), match.group(3), where)
    try:
        return Value(CONSTANT, (finite_number(text.strip(), where),))
    except EnvParamError:
        raise EnvParamError(f"{where}: {text!r} is not a number, uniform(LOW,HIGH) or gaussian(MEAN,STD)") from None


def parse_flag(text: str) -> tuple[str, Value]:
    """One --env-param: (name, value)."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise EnvParamError(f"--env-param {text!r} is not valid: give {FLAG_FORMS}, e.g. --env-param gap_max=3.0")
    return name.strip(), parse_value(value, f"--env-param {text}")


def declared_params(game) -> dict:
    """name -> {"default", "min", "max"} of what ``game`` (a GodotGame) declares, from its binary's --list_envs
    (cached), or the env_info of the game the editor runs; {} for a stand-in program or a game made with
    godot_rl_agents' plugin."""
    if not isinstance(game, GodotGame) or not game.rl_sync:
        return {}
    if isinstance(game.export, (GameExport, GameProject)):
        return list_games(game.export).env_params.get(game.env, {})
    if isinstance(game.export, EditorPlay):  # the editor's game, connected already: its env_info says them
        return dict(game.export.instance.env_info.get("env_params") or {})
    return {}


def check_params(game, values: dict, where: dict) -> None:
    """Every given parameter must be declared by ``game`` and each value (a constant, or a sampler's range or mean)
    lie within its declared range. ``values``: name -> list of Values; ``where``: name -> where they were given
    (a flag, a file's line). Raises EnvParamError naming the first that does not fit."""
    if not values:
        return
    if not isinstance(game, GodotGame):
        raise EnvParamError(f"{where[next(iter(values))]}: environment parameters are for Godot games; {game} is a "
                            "gymnasium id: drop --env-param / --curriculum")
    label = game.env_path or game.env
    if not game.rl_sync:
        raise EnvParamError(f"{where[next(iter(values))]}: {label} is a game made with godot_rl_agents' plugin, which "
                            f"has no environment parameters: drop --env-param / --curriculum, or move the game to our "
                            f"addon ({ADDON_GUIDE})")
    declared = declared_params(game)
    for name, given in values.items():
        if name not in declared:
            names = ", ".join(sorted(declared)) or "none"
            raise EnvParamError(f"{where[name]}: {game.env} has no environment parameter {name!r} (it declares: "
                                f"{names}; `godot-ppo envs` lists them)")
        low, high = declared[name]["min"], declared[name]["max"]
        for value in given:
            ends = value.args if value.kind != GAUSSIAN else value.args[:1]
            if any(not low <= v <= high for v in ends):
                raise EnvParamError(f"{where[name]}: {name}={value} is outside its declared range [{low:g}, {high:g}]")
        if declared[name].get("fixed"):
            _check_fixed(game, name, given, where[name], declared[name])
    _check_pairs(declared, values, where)


def _check_fixed(game, name: str, given: list, where: str, spec: dict) -> None:
    """A parameter the game declares ``"fixed": true`` is read once, as its agents start (forager's vision chooses
    their observation space): it takes one constant for the run, which goes on the games' command lines (binary_flags)
    before env_info. A sampler, a lesson after the first that changes it, or, for the game the editor runs (started
    with no flags), a value other than its default is refused."""
    why = f"{game.env} fixes {name} when its agents start (it shapes what they observe)"
    first = given[0]
    if first.kind != CONSTANT:
        raise EnvParamError(f"{where}: {name}={first} is a sampler, but {why}, so it cannot vary by episode: give it one "
                            f"value, e.g. --env-param {name}={spec['min']:g}")
    changed = next((k for k, value in enumerate(given) if value != first), None)
    if changed is not None:
        raise EnvParamError(f"{where}: {name} goes from {first} in lesson 0 to {given[changed]} in lesson {changed}, but "
                            f"{why}, so no later lesson can change it: give it one value in every lesson, or use "
                            f"--env-param {name}={first} and drop it from the curriculum")
    if isinstance(game.export, EditorPlay) and first.args[0] != spec["default"]:
        raise EnvParamError(f"{where}: {name}={first}, but {why}, and the game the Godot editor runs started with "
                            f"{name}={spec['default']:g}: drop the setting, or train an export (without --editor)")


def _check_pairs(declared: dict, values: dict, where: dict) -> None:
    """A game's NAME_min and NAME_max (both declared, one given at least): in each lesson, NAME_min's value (a uniform
    sampler's high end) must not exceed NAME_max's (its low end); a declared default stands in for one not given."""
    for low_name in sorted(declared):
        high_name = low_name[: -len("_min")] + "_max"
        if not low_name.endswith("_min") or high_name not in declared or not (low_name in values or high_name in values):
            continue
        lows, highs = (values.get(n) or [Value(CONSTANT, (declared[n]["default"],))] for n in (low_name, high_name))
        for k in range(max(len(lows), len(highs))):
            low, high = lows[min(k, len(lows) - 1)], highs[min(k, len(highs) - 1)]
            if (low.args[1] if low.kind == UNIFORM else low.args[0]) > high.args[0]:
                named = high_name if high_name in values else low_name
                lesson = f" in lesson {k}" if max(len(lows), len(highs)) > 1 else ""
                default = {n: "" if n in values else " (its default)" for n in (low_name, high_name)}
                raise EnvParamError(f"{where[named]}: {low_name}={low}{default[low_name]} is above {high_name}={high}"
                                    f"{default[high_name]}{lesson}: a range's {low_name} must not exceed its "
                                    f"{high_name}; lower {low_name} or raise {high_name}")


def describe(declared: dict) -> list[str]:
    """One line per declared parameter: name, default, range (`godot-ppo envs`)."""
    return [f"{name}: default {p['default']:g}, range [{p['min']:g}, {p['max']:g}]"
            f"{', fixed at start (--env-param only)' if p.get('fixed') else ''}" for name, p in sorted(declared.items())]


def wire_values(values: dict) -> dict:
    """name -> Value as the env_params message's "values"."""
    return {name: value.wire() for name, value in values.items()}
