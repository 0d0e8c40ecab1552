"""What the agents do, at a glance: a histogram of each action key's values in the rollout (`actions/<key>`), the
share of ended episodes that the time limit cut (`charts/truncated_share`), and a one-line warning when that share
jumps against its own recent history (a reset that leaves agents unable to fail).

The run's logging asks a `Behaviour` per policy once per update, with data the rollout left in its buffer
(rollout.RolloutBuffer): the actions taken, and how each step's episodes ended (terminated or truncated).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

import gymnasium as gym
import numpy as np

from python_trainer.agent import env_action
from python_trainer.base import bounds
from python_trainer.envs.spaces import spaces_from_env_info

CONTINUOUS_BINS = 20  # a continuous value's histogram: this many bins over its space's bounds, the same every update


def action_keys(action_space: gym.Space, env_info: Optional[dict]) -> list[tuple[str, int]]:
    """[(key, size)] of the env's actions as the game names them (godot-rl's action keys, from spaces.py's layout, in
    sorted key order: the order of a Box's values and a MultiDiscrete's entries); a gymnasium id's one "action" (a
    MultiDiscrete's entries "0", "1", ...)."""
    if env_info is not None:
        return spaces_from_env_info(env_info)[4]
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return [(str(i), 1) for i in range(len(action_space.nvec))]
    if isinstance(action_space, gym.spaces.Dict):
        return [(key, int(np.prod(space.shape)) or 1) for key, space in action_space.spaces.items()]
    return [("action", int(np.prod(action_space.shape)) or 1)]


def key_values(action_space: gym.Space, keys: list[tuple[str, int]], actions: np.ndarray) -> dict:
    """{key: (values, bins)} of a rollout's actions (the agent's rows, any leading shape) as the env received them
    (agent.env_action: Box values clipped to the space), with each key's fixed bins: one per discrete choice, or
    CONTINUOUS_BINS over a bounded Box's range (None: numpy's own)."""
    agent_shape = () if isinstance(action_space, gym.spaces.Discrete) else actions.shape[-1:]
    sent = env_action(action_space, actions.reshape((-1,) + agent_shape))
    if isinstance(action_space, gym.spaces.Dict):
        return {key: (np.asarray(sent[key]), _bins(action_space[key], 0, size)) for key, size in keys}
    if isinstance(action_space, gym.spaces.Discrete):
        return {keys[0][0]: (sent, _bins(action_space, 0))}
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return {key: (sent[:, i], _bins(action_space, i)) for i, (key, _) in enumerate(keys)}
    out, start = {}, 0  # a Box: each key's columns, in the layout's order
    for key, size in keys:
        out[key] = (sent[:, start : start + size], _bins(action_space, start, size))
        start += size
    return out


def _bins(space: gym.Space, first: int, size: int = 1):
    """The histogram's bin edges of a key: one bin per choice (centred on each index) or CONTINUOUS_BINS over the Box
    columns' bounds [first, first + size) when they are finite and the same for each."""
    if isinstance(space, gym.spaces.Discrete):
        return np.arange(int(space.start), int(space.start) + int(space.n) + 1) - 0.5
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = int(np.asarray(space.start).reshape(-1)[first])
        return np.arange(start, start + int(space.nvec.reshape(-1)[first]) + 1) - 0.5
    low, high = space.low.reshape(-1)[first : first + size], space.high.reshape(-1)[first : first + size]
    if not (np.isfinite(low).all() and np.isfinite(high).all()) or low.min() != low.max() or high.min() != high.max():
        return "tensorflow"  # torch's add_histogram default
    return np.linspace(float(low[0]), float(high[0]), CONTINUOUS_BINS + 1)


class ShareJump:
    """Whether the truncated share jumped: the share of the last ``recent`` logs (updates with ended episodes,
    pooled) against the ``baseline`` logs before them (pooled), a test of a rise only.

    The rule, and why: a jump is a rise of at least ``min_rise`` (0.15, e.g. 3% -> 18%) that is also at least
    ``min_z`` (4) standard errors of the two shares' difference (a two-proportion z-test on the episode counts). The
    rise compares the share with the game's own recent history, so a game whose episodes always ran to the limit
    (cart_pole at its cap: 1.0 against 1.0) or always had a high share never fires; the z-test lets a rise of 0.15
    count only when enough episodes ended to tell it from noise (a steady share's noise passes 4 standard errors about
    once in 30,000 updates, and a few episodes per update, as in a long-episode game, need a much larger rise). Both
    windows must be full, so the first 13 updates with ended episodes build the history. Once it fires the history
    starts again: the new level becomes the baseline, and the warning is said once per jump, not every update. A
    policy that learns to last to the time limit raises the share too (cart_pole as it learns to balance): the
    warning says both readings."""

    def __init__(self, recent: int = 3, baseline: int = 10, min_rise: float = 0.15, min_z: float = 4.0):
        self.recent, self.baseline, self.min_rise, self.min_z = recent, baseline, min_rise, min_z
        self.history: deque = deque(maxlen=recent + baseline)  # (truncated, ended) of each log

    def add(self, truncated: int, ended: int) -> Optional[tuple[float, float]]:
        """One log's counts (``ended`` > 0); returns (the baseline's share, the recent share) when the share
        jumped, else None."""
        self.history.append((truncated, ended))
        if len(self.history) < self.history.maxlen:
            return None
        counts = np.array(self.history, np.float64)
        (t_base, n_base), (t_new, n_new) = counts[: self.baseline].sum(0), counts[self.baseline :].sum(0)
        before, now = t_base / n_base, t_new / n_new
        pooled = (t_base + t_new) / (n_base + n_new)
        error = np.sqrt(pooled * (1.0 - pooled) * (1.0 / n_base + 1.0 / n_new))
        if now - before < self.min_rise or error == 0.0 or (now - before) / error < self.min_z:
            return None
        self.history.clear()
        return float(before), float(now)


class Behaviour:
    """One policy's behaviour statistics: its action keys' histograms and its truncated share, with the jump's
    warning. ``tag`` prefixes its TensorBoard tags ("" for a game's only policy, "<policy>/" otherwise)."""

    def __init__(self, action_space: gym.Space, env_info: Optional[dict], tag: str = "",
                 say: Optional[Callable[[str], None]] = None):
        self.action_space, self.tag, self.say = action_space, tag, say
        self.keys = action_keys(action_space, env_info)
        self.jump = ShareJump()
        self.truncated = self.ended = 0  # the episodes that ended since the last log

    def histograms(self, actions: np.ndarray) -> dict:
        """{tag: (values, bins)}: ``actions/<key>`` for every key (a discrete key's chosen indices; a continuous key's
        values, every dimension's), then ``actions/<key>/<i>`` for each dimension of a continuous key of several: at
        most bounds.ACTION_HISTOGRAMS in all (a wide key's first dimensions; the rest are in ``actions/<key>``)."""
        out, dimensions = {}, []
        for key, (values, bins) in key_values(self.action_space, self.keys, actions).items():
            out[f"{self.tag}actions/{key}"] = (values, bins)
            if values.ndim == 2 and values.shape[1] > 1:
                dimensions += [(f"{self.tag}actions/{key}/{i}", values[:, i], bins) for i in range(values.shape[1])]
        for tag, values, bins in dimensions[: max(0, bounds.ACTION_HISTOGRAMS.value - len(out))]:
            out[tag] = (values, bins)
        return dict(list(out.items())[: bounds.ACTION_HISTOGRAMS.value])

    def truncated_share(self, terminated: np.ndarray, truncated: np.ndarray) -> dict:
        """{``charts/truncated_share``: the share of the episodes that ended since the last log which the time limit
        cut} from a rollout's terminated / truncated flags; {} while none has ended (the next log counts these steps
        too). An instance's crash also ends its agents' episodes truncated (and is said on its own). Says the
        warning when the share jumped (ShareJump)."""
        cut = np.logical_and(truncated, np.logical_not(terminated))
        self.truncated += int(cut.sum())
        self.ended += int(np.logical_or(terminated, truncated).sum())
        if self.ended == 0:
            return {}
        share, counts = self.truncated / self.ended, (self.truncated, self.ended)
        self.truncated = self.ended = 0
        jumped = self.jump.add(*counts)
        if jumped is not None and self.say is not None:
            self.say(jump_warning(*jumped, self.tag[:-1] or None, self.jump.recent))
        return {f"{self.tag}charts/truncated_share": share}

    def log(self, writer, buf, global_step: int) -> None:
        """This update's histograms and truncated share into TensorBoard (``writer``: a SummaryWriter), from the
        rollout buffer ``buf``."""
        for tag, (values, bins) in self.histograms(buf.actions).items():
            writer.add_histogram(tag, values, global_step, bins=bins)
        for tag, value in self.truncated_share(buf.terminated, buf.truncated).items():
            writer.add_scalar(tag, value, global_step)


def jump_warning(before: float, now: float, policy: Optional[str], updates: int) -> str:
    """The one line said when the truncated share jumped."""
    whose = f"policy {policy!r}: " if policy else ""
    return (f"warning: {whose}the time limit ended {now:.0%} of the episodes of the last {updates} updates, against "
            f"{before:.0%} before (charts/truncated_share): agents that stopped failing. If they did not learn to "
            "last, a reset may leave them unable to fail (a deferred call racing it): docs/training.md, "
            "\"When it does not learn\"")
