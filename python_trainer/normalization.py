"""Observation normalisation and reward scaling (what CleanRL's ppo_continuous_action.py gets from
gym.wrappers.NormalizeObservation / NormalizeReward), kept with the model so the statistics are saved with it.

    obs    -> clip((obs - mean) / sqrt(var + eps), +-10)
    reward -> clip(reward / sqrt(Var[discounted return] + eps), +-10)

`NormArgs` are their flags (default: on for continuous actions, off for discrete, as CleanRL's two scripts). A row
with a camera image (envs/images.py) is normalised in its vector columns only (``vector_mask``: the layout's
vector_mask()); the image's 0..255 values pass through, and the CNN encoder scales them by 1/255.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import numpy as np
import torch
import tyro

from python_trainer.base.running_stats import RunningMeanStd

_AUTO = tyro.conf.arg(help_behavior_hint="(default: auto = on for continuous actions, off for discrete)")


@dataclass
class NormArgs:
    norm_obs: Annotated[Optional[bool], _AUTO] = None
    """normalise observations with running mean/std, clipped to +-10 (--norm-obs / --no-norm-obs)"""
    norm_reward: Annotated[Optional[bool], _AUTO] = None
    """scale rewards by the running std of the discounted return, clipped to +-10 (--norm-reward / --no-norm-reward)"""


def bool_flag_aliases(argv):
    """Accept --norm-obs / --no-norm-obs (and --norm-reward, --in-engine) as flags for the three-state auto options."""
    out, argv = [], list(argv)
    for i, a in enumerate(argv):
        for name in ("norm-obs", "norm-reward", "in-engine"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if a == f"--{name}" and nxt not in ("True", "False", "None"):
                out += [a, "True"]
                break
            if a == f"--no-{name}":
                out += [f"--{name}", "False"]
                break
        else:
            out.append(a)
    return out


def _clip(x: np.ndarray, bound: float) -> np.ndarray:
    """np.clip(x, -bound, bound) in place (np.clip's Python wrapper costs more than the work on a step's batch)."""
    np.minimum(x, bound, out=x)
    return np.maximum(x, -bound, out=x)


class Normalizer:
    """obs -> clip((obs - mean) / sqrt(var + eps), +-10); reward -> clip(reward / sqrt(Var[return] + eps), +-10).

    Disabled parts pass values through (as float32 observations / float rewards). ``num_envs``: the batch whose
    running discounted returns the reward scaling keeps. ``vector_mask`` (a bool per column of the row, or None for
    all): the columns the observation statistics cover and normalise; the others pass through unchanged.
    """

    def __init__(self, obs_dim, num_envs, gamma, norm_obs, norm_reward, clip_obs=10.0, clip_reward=10.0, epsilon=1e-8,
                 vector_mask=None):
        self.norm_obs, self.norm_reward = bool(norm_obs), bool(norm_reward)
        self.gamma, self.clip_obs, self.clip_reward, self.epsilon = gamma, clip_obs, clip_reward, epsilon
        self.vector_mask = None if vector_mask is None else np.asarray(vector_mask, bool)
        self.obs_rms = RunningMeanStd(shape=(obs_dim if vector_mask is None else int(self.vector_mask.sum()),))
        self.return_rms = RunningMeanStd(shape=())
        self.returns = np.zeros(num_envs, np.float64)  # running discounted return per env (not saved)

    @classmethod
    def frozen(cls, state: dict) -> "Normalizer":
        """A normaliser with a checkpoint's statistics, for acting (playback, evaluation): nothing updates them."""
        mask = state.get("vector_mask")
        mask = None if mask is None else np.asarray(mask, bool)
        obs_dim = int(np.asarray(state["obs_rms"]["mean"]).shape[0]) if mask is None else mask.size
        normalizer = cls(obs_dim, 1, state["gamma"], False, False, vector_mask=mask)
        normalizer.load_state_dict(state)
        return normalizer

    def normalize_obs(self, obs, update=True):
        obs = np.asarray(obs, dtype=np.float32)
        if not self.norm_obs:
            return obs
        if self.vector_mask is not None:  # the vector columns only: an image's pass through
            out = obs.copy()
            out[:, self.vector_mask] = self._normalized(obs[:, self.vector_mask], update)
            return out
        return self._normalized(obs, update)

    def _normalized(self, obs, update):
        if update:
            self.obs_rms.update(obs)
        out = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon)
        return _clip(out, self.clip_obs).astype(np.float32)

    def raw_obs(self, obs):
        """normalize_obs undone (but where its clip bit), as float64: the observations these statistics normalised."""
        if not self.norm_obs:
            return obs
        scale = np.sqrt(self.obs_rms.var + self.epsilon)
        if self.vector_mask is None:
            return obs * scale + self.obs_rms.mean
        out = np.asarray(obs, np.float64).copy()
        out[:, self.vector_mask] = obs[:, self.vector_mask] * scale + self.obs_rms.mean
        return out

    def scale_reward(self, rewards, dones, envs=slice(None)):
        """``envs``: which envs of the batch the rewards are (a group's slice in the rollout; default: all)."""
        rewards = np.asarray(rewards, dtype=np.float64)
        if not self.norm_reward:
            return rewards
        returns = self.returns[envs] * self.gamma + rewards  # envs: a slice or (one policy's) index array
        self.return_rms.update(returns)
        returns[dones] = 0.0
        self.returns[envs] = returns
        return _clip(rewards / np.sqrt(self.return_rms.var + self.epsilon), self.clip_reward)

    def state_dict(self):
        mask = {} if self.vector_mask is None else {"vector_mask": torch.from_numpy(self.vector_mask.copy())}
        return {
            "norm_obs": self.norm_obs, "norm_reward": self.norm_reward, "gamma": self.gamma,
            "clip_obs": self.clip_obs, "clip_reward": self.clip_reward, "epsilon": self.epsilon,
            "obs_rms": self.obs_rms.state_dict(), "return_rms": self.return_rms.state_dict(), **mask,
        }

    def load_state_dict(self, d):
        mask = d.get("vector_mask")
        self.vector_mask = None if mask is None else np.asarray(mask, bool)
        self.norm_obs, self.norm_reward, self.gamma = d["norm_obs"], d["norm_reward"], d["gamma"]
        self.clip_obs, self.clip_reward, self.epsilon = d["clip_obs"], d["clip_reward"], d["epsilon"]
        self.obs_rms.load_state_dict(d["obs_rms"])
        self.return_rms.load_state_dict(d["return_rms"])

    def obs_statistics(self):
        """{mean, var, epsilon, clip} of the observation normalisation (None when it is off), for the policy file.
        With a camera image (``vector_mask``) they are the vector columns' only: the row's first len(mean) columns."""
        if not self.norm_obs:
            return None
        return {"mean": self.obs_rms.mean, "var": self.obs_rms.var, "epsilon": self.epsilon, "clip": self.clip_obs}
