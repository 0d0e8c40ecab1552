"""`godot-ppo tune`'s search space: the train flags it searches and their ranges, a --space FILE that narrows or widens
them, and one trial's flags as Optuna samples them, its batch kept within half of --trial-steps.

The default space (each key a flag of `godot-ppo train`, spelled without dashes):

    learning_rate    1e-5 to 3e-3, log scale        num_steps        32, 64, 128, 256, 512, 1024
    num_instances    1, 2, 4 (up to the cores)      num_minibatches  1, 2, 4, 8, 16, 32
      (a gymnasium id: num_envs 1, 2, 4, 8, 16)     update_epochs    1 to 10
    gamma            0.9 to 0.9999 (choices)        gae_lambda       0.8 to 1.0 (choices)
    ent_coef         1e-5 to 0.1, log scale         clip_coef        0.1, 0.2, 0.3
    action_repeat    not by default: a space file's `action_repeat = [1, 2, 4, 8]` searches it (Godot games), where
                     a return means the same at every decision rate (the addon's time limit counts decisions: at 4
                     frames a decision an episode lasts 4 times as long, and its return grows with it)
    lstm_size        32, 64, 128, 256 (only with lstm = true in [fixed]: the MLP agent is CleanRL's 64-64, no flag)

A space file (TOML) changes it:

    drop = ["clip_coef"]              # leave these out (train's default then)
    replace = false                   # true: [search] is the whole space
    [fixed]                           # flags every trial gets, and best.toml keeps (e.g. the game's own)
    copies = 4
    env_param = ["difficulty=2"]
    [search]
    gamma = 0.99                      # a value alone: fixed at it
    learning_rate = {low = 1e-4, high = 1e-3, log = true}
    num_steps = [64, 128]             # a list: the choices
    vf_coef = {low = 0.25, high = 1.0}   # any train flag with a number can be searched

Each bound and choice is checked by its flag's rule, in one line naming the key.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from python_trainer.base.combinations import refusal
from python_trainer.base.flags import FlagError
from python_trainer.base.inputs import read_text
from python_trainer.run.config_file import check_value, tomllib

# Flags a trial never takes from the space: tune sets them (the budget, the seed, the evaluation, the run folder) or
# they say where a run goes, not how it learns.
TUNE_SETS = ("total_timesteps", "seed", "eval_every", "run_dir_root", "exp_name", "resume", "env_id", "env_path",
             "max_seconds", "checkpoint_every", "eval_episodes", "track", "watch", "window", "editor")
SPACE_KEYS = {"drop", "replace", "fixed", "search"}


@dataclass(frozen=True)
class Param:
    """One searched flag: ``choices`` (categorical), or a range ``low``..``high`` (``log`` scale; ``integer``)."""

    name: str
    choices: Optional[tuple] = None
    low: Any = None
    high: Any = None
    log: bool = False
    integer: bool = False

    def suggest(self, trial):
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return _round(trial.suggest_float(self.name, float(self.low), float(self.high), log=self.log))

    def describe(self) -> str:
        if self.choices is not None:
            return ", ".join(map(str, self.choices))
        return f"{self.low:g} to {self.high:g}{', log scale' if self.log else ''}"


def _round(x: float) -> float:
    """A sampled float to 3 significant digits: a command line a person reads, and the same value in every file."""
    return float(f"{x:.3g}")


def default_space(gym_id: bool, fixed: dict) -> dict:
    """{name: Param}: the default space for a gymnasium id or a Godot game; ``fixed`` flags are left out of it."""
    cores = os.cpu_count() or 1
    params = [
        Param("learning_rate", low=1e-5, high=3e-3, log=True),
        Param("num_steps", choices=(32, 64, 128, 256, 512, 1024)),
        Param("num_envs", choices=(1, 2, 4, 8, 16)) if gym_id else
        Param("num_instances", choices=tuple(n for n in (1, 2, 4) if n <= max(1, cores))),
        Param("num_minibatches", choices=(1, 2, 4, 8, 16, 32)),
        Param("update_epochs", low=1, high=10, integer=True),
        Param("gamma", choices=(0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)),
        Param("gae_lambda", choices=(0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0)),
        Param("ent_coef", low=1e-5, high=0.1, log=True),
        Param("clip_coef", choices=(0.1, 0.2, 0.3)),
    ]
    if fixed.get("lstm"):  # the width the agent has a flag for: the LSTM's (the MLP's 64-64 is fixed)
        params.append(Param("lstm_size", choices=(32, 64, 128, 256)))
    return {p.name: p for p in params if p.name not in fixed}


@dataclass
class Space:
    """The searched ``params`` ({name: Param}) and the ``fixed`` flags every trial gets."""

    params: dict
    fixed: dict = field(default_factory=dict)

    def table(self) -> list:
        return [f"  {name:<16} {p.describe()}" for name, p in self.params.items()] + \
               [f"  {name:<16} {value} (fixed)" for name, value in self.fixed.items()]


def load_space(path: Optional[str], gym_id: bool, args_class) -> Space:
    """The default space, changed by the space file at ``path`` (None: the default alone)."""
    if path is None:
        return Space(default_space(gym_id, {}))
    label = f"--space {path}"
    try:
        doc = tomllib.loads(read_text(path, label, FlagError, "a TOML search space"))
    except tomllib.TOMLDecodeError as e:
        raise FlagError(f"{label}: not valid TOML: {e}") from None
    unknown = set(doc) - SPACE_KEYS
    if unknown:
        raise FlagError(f"{label}: unknown key {sorted(unknown)[0]!r}: a space file holds drop, replace, [fixed] and "
                        "[search] (docs/tune.md)")
    fields = {f.name for f in dataclasses.fields(args_class)}
    fixed = {_name(label, k, fields): check_value(label, k, v, args_class) for k, v in _table(label, doc, "fixed").items()}
    search, params = _table(label, doc, "search"), {}
    for key, value in search.items():
        name = _name(label, key, fields)
        if isinstance(value, dict):
            params[name] = _range(label, key, name, value, args_class)
        elif isinstance(value, list):
            if not value:
                raise FlagError(f"{label}: search.{key} = []: give at least one choice")
            params[name] = Param(name, choices=tuple(check_value(label, key, v, args_class) for v in value))
        else:
            fixed[name] = check_value(label, key, value, args_class)
    base = {} if doc.get("replace") else default_space(gym_id, fixed)
    drop = doc.get("drop", [])
    if not (isinstance(drop, list) and all(isinstance(d, str) for d in drop)):
        raise FlagError(f"{label}: drop = {drop!r}: give a list of flag names, e.g. drop = [\"clip_coef\"]")
    dropped = {_name(label, d, fields) for d in drop}
    merged = {n: p for n, p in {**base, **params}.items() if n not in dropped and n not in fixed}
    return Space(merged, fixed)


def _table(label: str, doc: dict, key: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise FlagError(f"{label}: {key} must be a table ([{key}]), not {value!r}")
    return value


def _name(label: str, key: str, fields: set) -> str:
    name = key.replace("-", "_")
    if name not in fields:
        raise FlagError(f"{label}: unknown key {key!r}: not a flag of godot-ppo train (see godot-ppo train --help)")
    if name in TUNE_SETS:
        raise FlagError(refusal("tune/tune_sets", label=label, key=key))
    return name


def _range(label: str, key: str, name: str, spec: dict, args_class) -> Param:
    extra = set(spec) - {"low", "high", "log"}
    if extra or "low" not in spec or "high" not in spec:
        raise FlagError(f"{label}: search.{key} = {spec!r}: give {{low = A, high = B}} (and log = true for a log "
                        "scale), or a list of choices")
    low, high = (check_value(label, key, spec[b], args_class) for b in ("low", "high"))
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float))) or isinstance(low, bool) or low > high:
        raise FlagError(f"{label}: search.{key}: low {low!r} and high {high!r} must be numbers with low <= high")
    log = bool(spec.get("log", False))
    if log and low <= 0:
        raise FlagError(f"{label}: search.{key}: a log scale needs low > 0 (low is {low!r})")
    integer = isinstance(low, int) and isinstance(high, int)
    return Param(name, low=low, high=high, log=log, integer=integer)


# ======================================================================================================================
# One trial's flags
# ======================================================================================================================
# The smallest minibatch a trial takes (samples): 4 one-agent instances x 32 steps in 16 minibatches of 8, 9 epochs,
# trained Dodge the Creeps at 457 steps/s, where its games alone step thousands; the minibatch count is lowered to fit.
MIN_MINIBATCH = 64


class Rejected(Exception):
    """A trial whose sampled sizes cannot fit the budget (its message says why); it is not trained."""


def trial_flags(trial, space: Space, trial_steps: int, agents_per_instance: int) -> dict:
    """The flags of one trial: the fixed ones, then each searched one as sampled. Its batch (envs x num_steps) is
    kept within half of ``trial_steps`` by lowering num_steps to the largest that fits (the flags say what ran; the
    trial's params what was sampled), and num_minibatches to a divisor of the batch with minibatches of at least
    MIN_MINIBATCH samples; Rejected when no num_steps fits."""
    flags = {**space.fixed, **{name: p.suggest(trial) for name, p in space.params.items()}}
    envs = envs_of(flags, agents_per_instance)
    most = trial_steps // 2 // envs
    if flags.get("num_steps", 128) > most:
        param = space.params.get("num_steps")
        fits = [c for c in (param.choices or ()) if c <= most] if param is not None and param.choices else []
        low = param.low if param is not None and param.choices is None else 1
        steps = max(fits) if fits else (most if most >= (low or 1) else None)
        if steps is None or steps < 1:
            raise Rejected(f"{envs} envs leave no --num-steps within half of --trial-steps {trial_steps}")
        flags["num_steps"] = steps
    batch = envs * flags.get("num_steps", 128)
    minibatches = flags.get("num_minibatches", 4)
    whole = envs if flags.get("lstm") else batch  # an LSTM's minibatches hold whole envs
    if not flags.get("lstm"):  # a gradient step per few samples costs the trial its time, not its data
        minibatches = min(minibatches, max(1, batch // MIN_MINIBATCH))
    flags["num_minibatches"] = max(d for d in range(1, min(minibatches, whole) + 1) if whole % d == 0)
    return flags


def envs_of(flags: dict, agents_per_instance: int) -> int:
    """The envs a trial's flags make: num_envs, or instances x copies x agents per instance."""
    if flags.get("num_envs"):
        return int(flags["num_envs"])
    return int(flags.get("num_instances", 1)) * int(flags.get("copies", 1)) * agents_per_instance


def batch_of(flags: dict, agents_per_instance: int) -> int:
    return envs_of(flags, agents_per_instance) * int(flags.get("num_steps", 128))
