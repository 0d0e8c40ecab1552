"""--env-param and --curriculum FILE: the values a run gives the game's environment parameters, and the lessons that
raise them as the agent learns (ML-Agents' ``environment_parameters``, in TOML; docs/env_params.md has an example).

Each parameter has a list of lessons, each a value (a constant or a sampler, env_params.Value) and, except the last,
a completion criterion: a measure (``reward``: the episodic return; ``progress``: the share of --total-timesteps
done; any other name: that numeric key of the game's get_info(), e.g. ``reached_goal``), a threshold the mean over the
lesson's last ``min_lesson_length`` episodes must reach, and ``signal_smoothing`` (ML-Agents': that mean is smoothed
as 0.25 x the previous + 0.75 x the new one). A parameter given by --env-param has one lesson. `Schedule` holds the
lesson each parameter is at; train.py asks it for the values to send, feeds it the ended episodes, logs what it says
(TensorBoard, episodes.csv) and saves its state in the checkpoint, so --resume continues the same lesson.

A new lesson reaches each agent at its next episode: the episode it is playing started under the previous one. So
after a change the next num_envs episodes that end still count for the previous lesson (one per env, the usual case;
an env that ends two short episodes first counts one of them wrongly), in episodes.csv and for the criterion.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import numpy as np
import tyro

from python_trainer.base.errors import one_line
from python_trainer.base.inputs import read_text
from python_trainer.envs.env_params import (
    CONSTANT, EnvParamError, GAUSSIAN, UNIFORM, Value, finite_number, parse_flag, sampler,
)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the package tomli (a dependency there)
    import tomli as tomllib

REWARD, PROGRESS = "reward", "progress"
CRITERION_KEYS = {"measure", "threshold", "min_lesson_length", "signal_smoothing", "behavior", "require_reset"}
LESSON_KEYS = {"name", "value", "completion_criteria"}
SAMPLER_PARAMETERS = {UNIFORM: ("min_value", "max_value"), GAUSSIAN: ("mean", "st_dev")}
# The most episodes a lesson's criterion averages over (its window is kept in memory and in the checkpoint).
MAX_LESSON_LENGTH = 1_000_000


@dataclass
class CurriculumArgs:
    env_param: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """Godot games: an environment parameter of the game, NAME=NUMBER, NAME=uniform(LOW,HIGH) or
    NAME=gaussian(MEAN,STD) (a sampler: drawn again for every episode of every agent); repeat the flag for several
    (`godot-ppo envs` lists a game's parameters, docs/env_params.md)"""
    curriculum: Optional[str] = None
    """Godot games: a TOML file of environment parameters whose lessons advance as the agent learns (ML-Agents'
    environment_parameters; docs/env_params.md)"""


@dataclass(frozen=True)
class Criterion:
    measure: str
    threshold: float
    min_lesson_length: int = 100
    signal_smoothing: bool = True


@dataclass(frozen=True)
class Lesson:
    name: str
    value: Value
    criterion: Optional[Criterion] = None


# ======================================================================================================================
# Reading: --env-param flags and the TOML file, each error one line naming the parameter (and the file's line)
# ======================================================================================================================
def from_flags(flags) -> tuple[dict, dict]:
    """({name: [Lesson]}, {name: where}) of the --env-param flags."""
    params, where = {}, {}
    for text in flags:
        name, value = parse_flag(text)
        if name in params:
            raise EnvParamError(f"--env-param {text}: {name} is given twice; give it once")
        params[name], where[name] = [Lesson("flag", value)], f"--env-param {text}"
    return params, where


def load(path) -> tuple[dict, dict]:
    """({name: [Lesson]}, {name: "FILE:LINE"}) of a curriculum file."""
    path = Path(path)
    label = f"--curriculum {path}"  # read once, a regular file in UTF-8 (a BOM is dropped): base.inputs
    text = read_text(path, label, EnvParamError, "a TOML curriculum file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:  # its message ends "(at line L, column C)"
        raise EnvParamError(f"{label}: not valid TOML: {e}") from None
    except RecursionError:
        raise EnvParamError(f"{label}: its arrays or tables are nested too deeply for a curriculum (see "
                            "docs/env_params.md for the file's shape)") from None
    except ValueError as e:  # Python's limit on an integer's digits
        raise EnvParamError(f"{label}: {one_line(e)}: give the numbers of a curriculum (docs/env_params.md)") from None
    section = doc.get("environment_parameters")
    if not isinstance(section, dict) or not section:
        raise EnvParamError(f"--curriculum {path}: no [environment_parameters] table with at least one parameter "
                            "(see docs/env_params.md for the file's shape)")
    params, where = {}, {}
    for name, entry in section.items():
        lines = _lines_of(text, name)
        where[name] = f"{path}:{lines[0]}"
        params[name] = _lessons(name, entry, path, lines)
    return params, where


def _lines_of(text: str, name: str) -> list[int]:
    """The file's lines where parameter ``name``'s lessons begin ([[environment_parameters.NAME.curriculum]]), else
    where its name first appears (1-based)."""
    quoted = rf'(?:{re.escape(name)}|"{re.escape(name)}")'
    header = re.compile(rf"^\s*\[\[\s*environment_parameters\s*\.\s*{quoted}\s*\.\s*curriculum\s*\]\]")
    plain = re.compile(rf"^\s*(?:{quoted}\s*=|\[\s*environment_parameters\s*\.\s*{quoted}\s*[\].])")
    lines = text.splitlines()
    found = [i + 1 for i, line in enumerate(lines) if header.match(line)]
    return found or [next((i + 1 for i, line in enumerate(lines) if plain.match(line)), 1)]


def _lessons(name: str, entry, path: Path, lines: list[int]) -> list[Lesson]:
    at = f"{path}:{lines[0]}: parameter {name}"
    if not isinstance(entry, dict) or "curriculum" not in entry:
        return [Lesson("constant", _value(entry, at))]
    lessons = entry["curriculum"]
    if set(entry) != {"curriculum"} or not isinstance(lessons, list) or not lessons:
        raise EnvParamError(f"{at}: a curriculum is a list of lessons ([[environment_parameters.{name}.curriculum]] "
                            "tables) and nothing else")
    out = []
    for k, lesson in enumerate(lessons):
        where = f"{path}:{lines[min(k, len(lines) - 1)]}: parameter {name}, lesson {k}"
        if not isinstance(lesson, dict) or "value" not in lesson:
            raise EnvParamError(f"{where}: a lesson needs a value (value = NUMBER or a sampler table)")
        unknown = set(lesson) - LESSON_KEYS
        if unknown:
            raise EnvParamError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (a lesson has "
                                f"{', '.join(sorted(LESSON_KEYS))})")
        last = k == len(lessons) - 1
        criterion = lesson.get("completion_criteria")
        if criterion is None and not last:
            raise EnvParamError(f"{where}: a lesson without a completion criterion (completion_criteria = {{ measure "
                                "= \"reward\", threshold = ..., min_lesson_length = ... }); only the last may have none")
        out.append(Lesson(str(lesson.get("name", f"lesson {k}")), _value(lesson["value"], where),
                          None if last else _criterion(criterion, where)))
    return out


def _value(entry, where: str) -> Value:
    """A number, or ML-Agents' {sampler_type = "uniform", sampler_parameters = {min_value, max_value}} (gaussian:
    mean, st_dev)."""
    if isinstance(entry, (int, float)) and not isinstance(entry, bool):
        return Value(CONSTANT, (finite_number(entry, where),))
    if isinstance(entry, dict) and entry.get("sampler_type") in SAMPLER_PARAMETERS:
        kind, args = entry["sampler_type"], entry.get("sampler_parameters")
        keys = SAMPLER_PARAMETERS[kind]
        if set(entry) != {"sampler_type", "sampler_parameters"} or not isinstance(args, dict) or set(args) != set(keys):
            raise EnvParamError(f"{where}: a {kind} sampler is {{ sampler_type = \"{kind}\", sampler_parameters = "
                                f"{{ {keys[0]} = ..., {keys[1]} = ... }} }}")
        return sampler(kind, args[keys[0]], args[keys[1]], where)
    raise EnvParamError(f"{where}: {entry!r} is not a number, nor a sampler table (sampler_type = \"uniform\" or "
                        "\"gaussian\"), nor a curriculum")


def _criterion(entry, where: str) -> Criterion:
    if not isinstance(entry, dict):
        raise EnvParamError(f"{where}: completion_criteria must be a table (measure, threshold, min_lesson_length)")
    unknown = set(entry) - CRITERION_KEYS
    if unknown or "measure" not in entry or "threshold" not in entry:
        raise EnvParamError(f"{where}: completion_criteria needs measure and threshold (and may have "
                            f"min_lesson_length, signal_smoothing){'; unknown: ' + ', '.join(sorted(unknown)) if unknown else ''}")
    measure, threshold = entry["measure"], entry["threshold"]
    length = entry.get("min_lesson_length", Criterion.min_lesson_length)
    smoothing = entry.get("signal_smoothing", Criterion.signal_smoothing)
    if not isinstance(measure, str) or not measure:
        raise EnvParamError(f"{where}: measure must be \"reward\", \"progress\" or a get_info() key, got {measure!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise EnvParamError(f"{where}: threshold must be a number, got {threshold!r}")
    threshold = finite_number(threshold, f"{where}: threshold")
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_LESSON_LENGTH:
        raise EnvParamError(f"{where}: min_lesson_length must be an integer from 1 to {MAX_LESSON_LENGTH} (episodes), "
                            f"got {repr(length)[:40]}")
    if not isinstance(smoothing, bool):
        raise EnvParamError(f"{where}: signal_smoothing must be true or false, got {smoothing!r}")
    return Criterion(measure, float(threshold), length, smoothing)


def read(env_param_flags, curriculum_file) -> tuple[dict, dict]:
    """The run's parameters: the file's and the flags' ({name: [Lesson]}, {name: where}); a parameter in both is
    refused."""
    params, where = load(curriculum_file) if curriculum_file else ({}, {})
    flagged, flag_where = from_flags(env_param_flags or ())
    for name in flagged:
        if name in params:
            raise EnvParamError(f"{flag_where[name]}: {name} is set by --curriculum {curriculum_file} too ({where[name]}); "
                                "set it in one place")
    return {**params, **flagged}, {**where, **flag_where}


def start_values(params: dict, state: Optional[dict] = None) -> dict:
    """name -> the Value in force as the games start: each parameter's first lesson, or the lesson of a resumed run's
    checkpoint (its curriculum ``state``; one that does not fit is refused later, by Schedule.load_state_dict). They go
    on the games' command lines as --env-param's constants do, before env_info (learners.env_kwargs)."""
    lessons = (state or {}).get("lesson") or {}
    at = {n: lessons.get(n, 0) if isinstance(lessons.get(n, 0), int) and 0 <= lessons.get(n, 0) < len(ls) else 0
          for n, ls in params.items()}
    return {name: params[name][at[name]].value for name in params}


# ======================================================================================================================
# The schedule: the lesson of each parameter, and the ended episodes that move it on
# ======================================================================================================================
class Schedule:
    """The lesson each parameter is at. ``num_envs``: the episodes that still count for the previous lesson after a
    change (see the module's docstring); ``total_timesteps``: the ``progress`` measure's whole; ``say``: warnings."""

    def __init__(self, params: dict, num_envs: int, total_timesteps: int, say: Callable[[str], None] = print):
        self.params, self.names = params, sorted(params)
        self.num_envs, self.total_timesteps, self.say = int(num_envs), int(total_timesteps), say
        self.lesson = dict.fromkeys(self.names, 0)
        self._window = {n: deque(maxlen=self._criterion(n).min_lesson_length if self._criterion(n) else 1)
                        for n in self.names}
        self._smoothed = dict.fromkeys(self.names)
        self._stale = dict.fromkeys(self.names, 0)  # episodes that still count for the previous lesson
        self._seen_measure = dict.fromkeys(self.names, False)
        self._episodes_without = dict.fromkeys(self.names, 0)

    def _criterion(self, name) -> Optional[Criterion]:
        return self.params[name][self.lesson[name]].criterion

    def value(self, name, lesson=None) -> Value:
        return self.params[name][self.lesson[name] if lesson is None else lesson].value

    def message(self) -> dict:
        """The env_params message's "values": every parameter's value in its current lesson."""
        return {name: self.value(name).wire() for name in self.names}

    def current_lesson(self) -> int:
        """The lesson every curriculum has reached (the lowest lesson index of the parameters that have lessons)."""
        staged = [self.lesson[n] for n in self.names if len(self.params[n]) > 1]
        return min(staged) if staged else 0

    # ---------------------------------------------------------------- episodes
    def columns(self) -> list[str]:
        """episodes.csv's columns after global_step, return, length."""
        return ["lesson", *self.names]

    def episodes(self, infos) -> list[list]:
        """The episodes that ended at one step (gymnasium's infos, as RunLog.record_episodes reads them): each
        one's episodes.csv columns, in the order of np.flatnonzero(infos["_episode"]); their measures go to the
        criteria."""
        rows = []
        if "_episode" not in infos:
            return rows
        final, has_final = infos.get("final_info"), infos.get("_final_info")
        for i in np.flatnonzero(infos["_episode"]):
            info = (final[i] if has_final is not None and has_final[i] else None) or {}
            ret = float(infos["episode"]["r"][i])
            lessons = {}
            for name in self.names:
                stale = self._stale[name] > 0
                lessons[name] = self.lesson[name] - 1 if stale else self.lesson[name]
                if stale:
                    self._stale[name] -= 1
                    continue
                criterion = self._criterion(name)
                if criterion is None or criterion.measure == PROGRESS:
                    continue
                measure = ret if criterion.measure == REWARD else info.get(criterion.measure)
                if isinstance(measure, (int, float, np.number)) and not isinstance(measure, bool):
                    self._window[name].append(float(measure))
                    self._seen_measure[name] = True
                else:
                    self._episodes_without[name] += 1
            staged = [lessons[n] for n in self.names if len(self.params[n]) > 1]
            rows.append([min(staged) if staged else 0, *(str(self.value(n, lessons[n])) for n in self.names)])
        return rows

    def advance(self, global_step: int) -> list[str]:
        """Moves on every parameter whose lesson's criterion is met; returns one line per lesson reached ([] for
        none): parameters with the same criterion move on together, in one line."""
        changes = {}
        for name in self.names:
            criterion = self._criterion(name)
            if criterion is None:
                continue
            if not self._seen_measure[name] and self._episodes_without[name] >= 100 and criterion.measure != PROGRESS:
                self.say(f"warning: curriculum: {self._episodes_without[name]} episodes ended without a numeric "
                         f"get_info() key {criterion.measure!r} (the criterion of {name}'s lesson "
                         f"{self.lesson[name]}); it cannot advance")
                self._episodes_without[name] = -10**9  # said once
            window = self._window[name]
            if criterion.measure == PROGRESS:
                measure = global_step / max(1, self.total_timesteps)
            elif len(window) < criterion.min_lesson_length:
                continue
            else:
                measure = float(np.mean(window))
            if criterion.signal_smoothing and criterion.measure != PROGRESS:
                previous = self._smoothed[name]
                measure = measure if previous is None else 0.25 * previous + 0.75 * measure
                self._smoothed[name] = measure
            if measure >= criterion.threshold:
                old = self.params[name][self.lesson[name]]
                self.lesson[name] += 1
                new = self.params[name][self.lesson[name]]
                self._window[name] = deque(maxlen=new.criterion.min_lesson_length if new.criterion else 1)
                self._smoothed[name] = None
                self._stale[name] = self.num_envs
                why = (f"lesson {self.lesson[name]} {new.name!r} ({criterion.measure} {measure:.3g} >= "
                       f"{criterion.threshold:g}) at global step {global_step}")
                changes.setdefault(why, []).append(f"{name} {old.value} -> {new.value}")
        return [f"curriculum: {why}: {', '.join(moved)}" for why, moved in changes.items()]

    def scalars(self) -> dict:
        """TensorBoard: curriculum/<name> (the value, or the sampler's mean) and curriculum/lesson (and, when several
        parameters have lessons, each one's as curriculum/lesson/<name>)."""
        out = {f"curriculum/{name}": self.value(name).center() for name in self.names}
        out["curriculum/lesson"] = self.current_lesson()
        staged = [n for n in self.names if len(self.params[n]) > 1]
        if len(staged) > 1:
            out.update({f"curriculum/lesson/{n}": self.lesson[n] for n in staged})
        return out

    # ---------------------------------------------------------------- the checkpoint
    def state_dict(self) -> dict:
        return {"lessons": {n: len(self.params[n]) for n in self.names}, "lesson": dict(self.lesson),
                "window": {n: list(self._window[n]) for n in self.names}, "smoothed": dict(self._smoothed),
                "stale": dict(self._stale)}

    def load_state_dict(self, state: dict, where: str) -> None:
        """A checkpoint's state; its parameters and their numbers of lessons must be this schedule's."""
        saved = state.get("lessons", {})
        mine = {n: len(self.params[n]) for n in self.names}
        if saved != mine:
            raise EnvParamError(f"{where}: the checkpoint's curriculum has the parameters and lessons {saved}, this "
                                f"run's --curriculum / --env-param {mine}: resume with the run's own curriculum file")
        for name in self.names:
            self.lesson[name] = int(state["lesson"][name])
            criterion = self._criterion(name)
            self._window[name] = deque(state["window"][name], maxlen=criterion.min_lesson_length if criterion else 1)
            self._smoothed[name] = state["smoothed"][name]
            self._stale[name] = int(state["stale"][name])
