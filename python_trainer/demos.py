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

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

from python_trainer.agent import CONTINUOUS, action_heads
from python_trainer.base.errors import UserError
from python_trainer.base.files import write_atomic

FORMAT = "rl_sync_demo/1"


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


def _check_numbers(values, what: str, where: str, size: int, fix: str) -> list:
    if not isinstance(values, list):
        values = [values] if isinstance(values, (int, float)) and size == 1 else None
    if values is None or len(values) != size:
        raise DemoError(f"{where}: {what} has {len(values) if isinstance(values, list) else 'no list of'} values, "
                        f"not {size}: {fix}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise DemoError(f"{where}: {what} holds {str(v)[:40]!r}, not a number: {fix}")
        if not math.isfinite(v):
            raise DemoError(f"{where}: {what} holds {v} (NaN/inf): re-record the episode or drop it from the file")
    return values


def read_episodes(path) -> list:
    """The file's JSON array of episodes, or a DemoError (missing, empty, truncated, not JSON, not an array)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise DemoError(f"{path}: cannot read the demonstration file ({e.strerror}): check the path") from None
    if not text.strip():
        raise DemoError(f"{path}: the file is empty, not a JSON array of episodes: record again (godot-ppo record) "
                        "or drop it from --demos")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        end = " (the file ends early: truncated?)" if e.pos >= len(text.rstrip()) else ""
        raise DemoError(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}{end}: a demonstration file is a "
                        "JSON array of [observations, actions] episodes; record again or drop it from --demos") from None
    if not isinstance(data, list) or not data:
        raise DemoError(f"{path}: {'an empty array' if data == [] else 'not a JSON array'}: a demonstration file is a "
                        "JSON array of [observations, actions] episodes with at least one episode")
    return data


def load_demos(paths: Sequence, obs_dim: int, action_space: gym.Space, declared: Optional[dict] = None,
               env_id: Optional[str] = None) -> Demos:
    """Every episode of ``paths`` for a game whose observations have ``obs_dim`` values and whose agent acts in
    ``action_space`` (``declared``: a Godot game's action space dict from its env_info, in the game's key order;
    None for a gymnasium env). Raises DemoError naming the file and the episode."""
    default_layout = action_layout(action_space, declared)
    order = _agent_order(action_space, default_layout, declared)
    discrete_space = isinstance(action_space, gym.spaces.Discrete)
    obs, actions, starts, returns, files = [], [], [], [], []
    fix = f"this file was not recorded in {env_id or 'this game'} with its current spaces; record it again there"
    for path in paths:
        for i, episode in enumerate(read_episodes(path)):
            where = _where(path, i)
            if not isinstance(episode, list) or len(episode) < 2 or not all(isinstance(p, list) for p in episode[:2]):
                raise DemoError(f"{where}: not [observations, actions]: each episode is a two-element array (a third, "
                                "our meta, is optional)")
            ep_obs, ep_actions = episode[0], episode[1]
            meta = episode[2] if len(episode) > 2 and isinstance(episode[2], dict) else {}
            if meta.get("game") and env_id and meta["game"] != env_id:
                raise DemoError(f"{where}: recorded in the game {meta['game']!r}, not {env_id!r}: train {meta['game']} "
                                "with it, or drop it from --demos")
            if declared and meta.get("action_space") and meta["action_space"] != declared:
                raise DemoError(f"{where}: its action keys {json.dumps(meta['action_space'])} differ from the game's "
                                f"{json.dumps(declared)}: {fix}")
            layout = default_layout
            if meta.get("action_keys") and declared:  # the row's own layout: the same keys, maybe in another order
                layout = [(str(k), str(kind), int(size)) for k, kind, size in meta["action_keys"]]
                if sorted(layout) != sorted(default_layout):
                    raise DemoError(f"{where}: its action keys {json.dumps(meta['action_keys'])} differ from the "
                                    f"game's {json.dumps(declared)}: {fix}")
            row_size = sum(size if kind == CONTINUOUS else 1 for _, kind, size in layout)
            if not ep_actions:
                raise DemoError(f"{where}: has no actions: drop the episode from the file")
            if len(ep_obs) != len(ep_actions) + 1:
                raise DemoError(f"{where}: {len(ep_obs)} observations for {len(ep_actions)} actions (one more "
                                "observation than actions is needed: the last follows the final action): the episode "
                                "was cut; drop it from the file")
            for t, o in enumerate(ep_obs):
                _check_numbers(o, f"observation {t}", where, obs_dim, fix)
            for t, a in enumerate(ep_actions):
                a = _check_numbers(a, f"action {t}", where, row_size, fix)
                values, column = {}, 0
                for key, kind, size in layout:
                    if kind == CONTINUOUS:
                        values[key] = [min(1.0, max(-1.0, float(v))) for v in a[column : column + size]]
                        column += size
                    else:
                        index = a[column]
                        if index != int(index) or not 0 <= index < size:
                            raise DemoError(f"{where}: action {t}'s key {key!r} is {index}, not an index in [0, {size})"
                                            f": {fix}")
                        values[key] = [int(index)]
                        column += 1
                actions.append([v for key in order for v in values[key]])
            obs.extend(ep_obs[:-1])
            starts.extend([True] + [False] * (len(ep_actions) - 1))
            rewards = meta.get("rewards")
            returns.append(float(sum(rewards)) if isinstance(rewards, list) else None)
        files.append(str(path))
    obs_a = np.asarray(obs, dtype=np.float32)
    act_a = np.asarray(actions, dtype=np.float32)
    act_a = act_a[:, 0].astype(np.int64) if discrete_space else act_a
    return Demos(obs_a, act_a, np.asarray(starts, dtype=bool), returns, files)


def episode(observations, actions, *, game=None, action_space=None, action_keys=None, rewards=None,
            truncated=None) -> list:
    """One episode as the recorder writes it: [observations, actions] (godot_rl_agents' shape), with our meta when
    anything of it is given."""
    meta = {k: v for k, v in (("format", FORMAT), ("game", game), ("action_space", action_space), ("action_keys", action_keys),
                              ("rewards", rewards)) if v is not None}  # fmt: skip
    if truncated is not None:
        meta.update(terminated=not truncated, truncated=bool(truncated))
    if observations:
        meta["obs_size"] = len(observations[0])
    return [observations, actions] + ([meta] if game or rewards or action_space else [])


def write_demos(path, episodes: list) -> Path:
    """The episodes as a demonstration file, written atomically (a failed write keeps the previous file)."""
    return write_atomic(path, json.dumps(episodes))
