"""Demonstration files: reading, checking and writing them (no torch here; cloning.py learns from them).

The format is godot_rl_agents' demo.json (their Godot 4 plugin's recorder writes it, their sb3_imitation.py reads
it), which our addon's recorder (addons/rl_sync/demo_recorder.gd) keeps: a JSON array of episodes, each

    [observations, actions]            # theirs
    [observations, actions, meta]      # ours: meta is a third element their reader never looks at

``observations``: the agent's flat observation lists, one more than ``actions`` (the last follows the final
action); ``actions``: one flat list per step, a continuous key's values then a discrete key's index, the keys in
the order meta's "action_keys" lists them (ours: sorted, the order of the game's env_info; a file without it, as
theirs: the env_info's order); a bare number is accepted for a one-value action. ``meta`` (ours): {"format",
"game", "obs_size", "action_space" (the game's dict), "action_keys" ([[key, action_type, size], ...], the row's
layout), "rewards" (one per action), "terminated", "truncated"}. docs/demonstrations.md is the reference.

`load_demos` reads one or more files for a game and its spaces and turns each action into the agent's own layout
(agent.action_heads: continuous keys first, then discrete ones, each in sorted key order); anything wrong is a
`DemoError`, one line naming the file, the episode and the fix.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

from python_trainer.agent import CONTINUOUS, action_heads
from python_trainer.base import contract
from python_trainer.base.errors import UserError, one_line
from python_trainer.base.files import write_atomic
from python_trainer.base.inputs import decode_text, read_bytes

FORMAT = contract.DEMO_FORMAT


class DemoError(UserError):
    """A demonstration file that cannot be used: one line naming the file, the episode and the fix."""


@dataclass
class Demos:
    """Every step of the demonstrations, episodes one after the other: ``obs[s]`` (float32) and the agent's action
    for it ``actions[s]`` (int64 for a Discrete space, else a float32 row), ``starts[s]`` True where an episode
    begins; ``returns`` one per episode (None without rewards in the file)."""

    obs: np.ndarray
    actions: np.ndarray
    starts: np.ndarray
    returns: list = field(default_factory=list)
    files: list = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.obs)

    @property
    def episodes(self) -> int:
        return int(self.starts.sum())

    def summary(self) -> str:
        known = [r for r in self.returns if r is not None]
        mean = f", mean return {np.mean(known):.3g}" if known else ""
        return f"{self.episodes} demonstration episodes, {self.steps} steps{mean} ({', '.join(self.files)})"


def action_layout(action_space: gym.Space, declared: Optional[dict]) -> list[tuple[str, str, int]]:
    """[(key, kind, size)] of one recorded action row, in the file's order: a Godot game's declared keys (its
    env_info's action space, in the game's order), or for a gymnasium space the agent's own heads."""
    if declared:
        return [(str(k), str(v.get("action_type")), int(v.get("size", 1))) for k, v in declared.items()]
    return [(str(k), kind, size) for k, kind, size in action_heads(action_space)]


def _agent_order(action_space: gym.Space, layout: list, declared: Optional[dict]) -> list[str]:
    """The keys in the agent's row order: a gymnasium space's heads as they are; a Godot game's Dict heads
    (continuous keys first); otherwise sorted (vec_env's Box and MultiDiscrete concatenate the keys in sorted order)."""
    if not declared:
        return [k for k, _, _ in layout]
    if isinstance(action_space, gym.spaces.Dict):
        return [str(k) for k, _, _ in action_heads(action_space)]
    return sorted(k for k, _, _ in layout)


def _where(path, episode: int) -> str:
    return f"{path}: episode {episode}"


_NUMBERS = frozenset((int, float))
FLOAT32_MAX = float(np.finfo(np.float32).max)
_short = reprlib.Repr()
_short.maxlevel, _short.maxstring, _short.maxother, _short.maxlist = 2, 40, 40, 4


def _number_error(v, what: str, where: str, fix: str, float32: bool) -> Optional[str]:
    """Why ``v`` cannot be one of ``what``'s values (None: it can); ``float32``: it must also fit a float32."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{where}: {what} holds {_short.repr(v)}, not a number: {fix}"
    try:
        x = float(v)
    except OverflowError:
        x = math.inf
    if math.isfinite(x) and not (float32 and abs(x) > FLOAT32_MAX):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return f"{where}: {what} holds {v} (NaN/inf): re-record the episode or drop it from the file"
    shown = f"{v:g}" if isinstance(v, float) else f"an integer of {len(str(abs(v)))} digits"
    limit = "float32's range (+-3.4e38)" if float32 else "a float's range"
    return f"{where}: {what} holds {shown}, beyond {limit}: re-record the episode or drop it from the file"


def _rows(rows: list, what: str, where: str, size: int, fix: str, float32: bool = False) -> np.ndarray:
    """The episode's observation or action ``rows`` as a float64 array (len(rows), size), each a list of ``size``
    numbers (a bare number for size 1), finite (``float32``: within float32's range); else a DemoError naming the first
    bad row. The usual file takes the fast way: its rows are checked by type at once, then converted and bounded."""
    if isinstance(rows, np.ndarray):  # made compact when read (_compact): only its size and range to check
        if rows.ndim == 2 and rows.shape[1] == size and bool((np.abs(rows) <= (FLOAT32_MAX if float32 else np.inf)).all()):
            return rows
        rows = rows.tolist()  # the slow way names the row
    if all(type(r) is list and len(r) == size and _NUMBERS.issuperset(map(type, r)) for r in rows):
        try:
            array = np.array(rows, dtype=np.float64).reshape(len(rows), size)
        except OverflowError:  # an integer too large for a float: the slow way names it
            array = None
        if array is not None and bool((np.abs(array) <= (FLOAT32_MAX if float32 else np.inf)).all()):
            return array
    for t, values in enumerate(rows):  # the slow way: the first bad row, by name
        label = f"{what} {t}"
        if not isinstance(values, list):
            values = [values] if isinstance(values, (int, float)) and size == 1 else None
        if values is None or len(values) != size:
            raise DemoError(f"{where}: {label} has {len(values) if isinstance(values, list) else 'no list of'} values, "
                            f"not {size}: {fix}")
        for v in values:
            error = _number_error(v, label, where, fix, float32)
            if error is not None:
                raise DemoError(error)
    return np.array([r if isinstance(r, list) else [r] for r in rows], dtype=np.float64).reshape(len(rows), size)


def read_episodes(path) -> list:
    """The file's JSON array of episodes, or a DemoError (missing, not a regular file, not UTF-8, empty, truncated,
    not JSON, nested too deeply, not an array). The file is read once (base.inputs: a FIFO or a device is refused)."""
    what = "a demonstration file (a JSON array of episodes)"
    text = decode_text(read_bytes(path, str(path), DemoError, what), str(path), DemoError, what)
    if not text or text.isspace():
        raise DemoError(f"{path}: the file is empty, not a JSON array of episodes: record again (godot-ppo record) "
                        "or drop it from --demos")
    try:
        data = _episodes_of(text)
    except json.JSONDecodeError as e:
        end = " (the file ends early: truncated?)" if e.pos >= len(text.rstrip()) else ""
        raise DemoError(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}{end}: a demonstration file is a "
                        "JSON array of [observations, actions] episodes; record again or drop it from --demos") from None
    except RecursionError:
        raise DemoError(f"{path}: its JSON is nested too deeply to be a demonstration file (a JSON array of "
                        "[observations, actions] episodes, each a list of flat lists): record again or drop it from "
                        "--demos") from None
    except ValueError as e:  # Python's limit on an integer's digits
        raise DemoError(f"{path}: {one_line(e)}: a demonstration file holds numbers of float32's range; record again "
                        "or drop it from --demos") from None
    del text
    if not isinstance(data, list) or not data:
        raise DemoError(f"{path}: {'an empty array' if data == [] else 'not a JSON array'}: a demonstration file is a "
                        "JSON array of [observations, actions] episodes with at least one episode")
    return data


_BLANKS = re.compile(r"[ \t\n\r]*")


def _episodes_of(text: str) -> list:
    """The JSON array of ``text``, parsed one episode at a time, each made compact at once (_compact): a big file's
    numbers are never all Python objects together. Anything but an array of values is parsed whole by json.loads,
    whose error names the line."""
    decoder, episodes = json.JSONDecoder(), []
    i = _BLANKS.match(text).end()
    if not text.startswith("[", i):
        return json.loads(text)
    i = _BLANKS.match(text, i + 1).end()
    while not text.startswith("]", i):
        try:
            episode, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return json.loads(text)  # raises the same error, with its line
        episodes.append(_compact(episode))
        i = _BLANKS.match(text, i).end()
        if text.startswith(",", i):
            i = _BLANKS.match(text, i + 1).end()
        elif not text.startswith("]", i):
            return json.loads(text)
    if _BLANKS.match(text, i + 1).end() != len(text):
        return json.loads(text)  # extra data after the array
    return episodes


def _compact(episode):
    """An episode whose observations, actions and rewards are rows of numbers, with those as float64 arrays (8 bytes a
    number, not a Python float's 32); anything else as it was (load_demos names what is wrong with it)."""
    if not isinstance(episode, list) or len(episode) < 2:
        return episode
    for k in (0, 1):
        rows = episode[k]
        if isinstance(rows, list) and rows and all(type(r) is list and _NUMBERS.issuperset(map(type, r)) for r in rows):
            with contextlib.suppress(OverflowError, ValueError):  # a huge integer, rows of different sizes
                episode[k] = np.array(rows, dtype=np.float64)
    meta = episode[2] if len(episode) > 2 else None
    rewards = meta.get("rewards") if isinstance(meta, dict) else None
    if isinstance(rewards, list) and _NUMBERS.issuperset(map(type, rewards)):
        with contextlib.suppress(OverflowError):
            meta["rewards"] = np.array(rewards, dtype=np.float64)
    return episode


def _meta_layout(meta: dict, where: str, default_layout: list, declared: Optional[dict], fix: str) -> list:
    """The row's layout that the episode's meta declares ("action_keys": [[key, action_type, size], ...], the same keys
    as the game's, maybe in another order), or the default one."""
    keys = meta.get("action_keys")
    if not keys or not declared:
        return default_layout
    shape = ("its meta's \"action_keys\" is {}, not [[key, action_type, size], ...]: re-record the episode, or drop "
             "its meta (godot_rl_agents' shape: [observations, actions])")
    if not isinstance(keys, list):
        raise DemoError(f"{where}: " + shape.format(_short.repr(keys)))
    layout = []
    for entry in keys:
        ok = isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and isinstance(entry[1], str)
        size = entry[2] if ok else None
        if not ok or isinstance(size, bool) or not isinstance(size, (int, float)) or size != int(size) or size < 1:
            raise DemoError(f"{where}: " + shape.format(_short.repr(entry)))
        layout.append((entry[0], entry[1], int(size)))
    if sorted(layout) != sorted(default_layout):
        raise DemoError(f"{where}: its action keys {_short.repr(keys)} differ from the game's {json.dumps(declared)}: "
                        f"{fix}")
    return layout


def _episode_return(meta: dict, where: str, n_actions: int) -> Optional[float]:
    """The sum of the meta's "rewards" (one number per action), None without them."""
    rewards = meta.get("rewards")
    if rewards is None:
        return None
    if isinstance(rewards, np.ndarray):  # made compact when read (_compact)
        if rewards.ndim == 1 and len(rewards) == n_actions and bool(np.isfinite(rewards).all()):
            return float(rewards.sum())
        rewards = rewards.tolist()
    fix = "re-record the episode, or drop its meta's \"rewards\""
    if not isinstance(rewards, list) or len(rewards) != n_actions:
        count = f"{len(rewards)} values" if isinstance(rewards, list) else _short.repr(rewards)
        raise DemoError(f"{where}: its meta's \"rewards\" is {count}, not a list of {n_actions} numbers (one per "
                        f"action): {fix}")
    return float(_rows([[r] for r in rewards], "reward", where, 1, fix).sum())


def _actions(ep_actions: list, where: str, layout: list, order: list, fix: str) -> np.ndarray:
    """The episode's action rows (the file's ``layout``) as the agent's rows (``order`` of the keys): continuous values
    clipped to [-1, 1], discrete indices checked."""
    row_size = sum(size if kind == CONTINUOUS else 1 for _, kind, size in layout)
    a = _rows(ep_actions, "action", where, row_size, fix)
    columns, column = {}, 0
    for key, kind, size in layout:
        if kind == CONTINUOUS:
            columns[key] = np.clip(a[:, column : column + size], -1.0, 1.0)
            column += size
            continue
        index = a[:, column]
        bad = np.flatnonzero((index != np.floor(index)) | (index < 0) | (index >= size))
        if len(bad):
            t = int(bad[0])
            raise DemoError(f"{where}: action {t}'s key {key!r} is {index[t]:g}, not an index in [0, {size}): {fix}")
        columns[key] = index[:, None]
        column += 1
    return np.concatenate([columns[key] for key in order], axis=1)


def read_demo_files(paths: Sequence) -> dict:
    """{path: its episodes} of every file, each read and parsed once (read_episodes): what `load_demos` takes as
    ``parsed``, so that a file checked before the game starts is not read again."""
    return {str(path): read_episodes(path) for path in paths}


def load_demos(paths: Sequence, obs_dim: int, action_space: gym.Space, declared: Optional[dict] = None,
               env_id: Optional[str] = None, parsed: Optional[dict] = None) -> Demos:
    """Every episode of ``paths`` for a game whose observations have ``obs_dim`` values and whose agent acts in
    ``action_space`` (``declared``: a Godot game's action space dict from its env_info, in the game's key order;
    None for a gymnasium env). ``parsed``: read_demo_files' result for them, whose episodes are consumed (each one
    freed once converted). Raises DemoError naming the file and the episode."""
    default_layout = action_layout(action_space, declared)
    order = _agent_order(action_space, default_layout, declared)
    discrete_space = isinstance(action_space, gym.spaces.Discrete)
    obs, actions, starts, returns, files = [], [], [], [], []
    fix = f"this file was not recorded in {env_id or 'this game'} with its current spaces; record it again there"
    for path in paths:
        episodes = parsed.pop(str(path)) if parsed is not None and str(path) in parsed else read_episodes(path)
        for i in range(len(episodes)):
            episode, episodes[i] = episodes[i], None  # freed once converted: a big file is not held twice
            where = _where(path, i)
            if not isinstance(episode, list) or len(episode) < 2 or not all(isinstance(p, (list, np.ndarray))
                                                                                for p in episode[:2]):
                raise DemoError(f"{where}: not [observations, actions]: each episode is a two-element array (a third, "
                                "our meta, is optional)")
            ep_obs, ep_actions = episode[0], episode[1]
            meta = episode[2] if len(episode) > 2 and isinstance(episode[2], dict) else {}
            game = meta.get("game")
            if game and env_id and game != env_id:
                raise DemoError(f"{where}: recorded in the game {_short.repr(game)}, not {env_id!r}: train "
                                f"{game if isinstance(game, str) else 'that game'} with it, or drop it from --demos")
            if declared and meta.get("action_space") and meta["action_space"] != declared:
                raise DemoError(f"{where}: its action keys {_short.repr(meta['action_space'])} differ from the game's "
                                f"{json.dumps(declared)}: {fix}")
            layout = _meta_layout(meta, where, default_layout, declared, fix)
            if len(ep_actions) == 0:
                raise DemoError(f"{where}: has no actions: drop the episode from the file")
            if len(ep_obs) != len(ep_actions) + 1:
                raise DemoError(f"{where}: {len(ep_obs)} observations for {len(ep_actions)} actions (one more "
                                "observation than actions is needed: the last follows the final action): the episode "
                                "was cut; drop it from the file")
            # the observations the agent sees are float32: a value beyond its range would be inf there
            obs.append(_rows(ep_obs, "observation", where, obs_dim, fix, float32=True)[:-1].astype(np.float32))
            actions.append(_actions(ep_actions, where, layout, order, fix).astype(np.float32))
            starts.extend([True] + [False] * (len(ep_actions) - 1))
            returns.append(_episode_return(meta, where, len(ep_actions)))
        files.append(str(path))
    obs_a = np.concatenate(obs) if obs else np.zeros((0, obs_dim), np.float32)
    act_a = np.concatenate(actions) if actions else np.zeros((0, len(order)), np.float32)
    act_a = act_a[:, 0].astype(np.int64) if discrete_space else act_a
    return Demos(obs_a, act_a, np.asarray(starts, dtype=bool), returns, files)


def episode(observations, actions, *, game=None, action_space=None, action_keys=None, rewards=None,
            truncated=None) -> list:
    """One episode as the recorder writes it: [observations, actions] (godot_rl_agents' shape), with our meta when
    anything of it is given."""
    meta = {k: v for k, v in (("format", FORMAT), ("game", game), ("action_space", action_space), ("action_keys", action_keys),
                              ("rewards", rewards)) if v is not None}
    if truncated is not None:
        meta.update(terminated=not truncated, truncated=bool(truncated))
    if observations:
        meta["obs_size"] = len(observations[0])
    return [observations, actions] + ([meta] if game or rewards or action_space else [])


def write_demos(path, episodes: list) -> Path:
    """The episodes as a demonstration file, written atomically (a failed write keeps the previous file)."""
    return write_atomic(path, json.dumps(episodes))
