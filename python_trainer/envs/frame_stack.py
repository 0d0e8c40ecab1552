"""--frame-stack K: each agent's K newest camera frames on the image's channels, a wrapper of the vector env.

The rows of a game with a camera end with its image (images.ImageLayout); with K frames the image block becomes
(H, W, C*K), the oldest frame's channels first and the newest last (CleanRL's ppo_atari.py stacks 4 grayscale frames
the same way, with gymnasium's FrameStackObservation). At an episode's start the K-1 older slots are zeros (same-step
autoreset: the row after an ended episode is the next one's first), and an ended episode's ``final_obs`` is stacked
with its own history. The vector part of a row is the game's, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from python_trainer.base import bounds
from python_trainer.base.combinations import refusal
from python_trainer.base.flags import flag, in_range
from python_trainer.envs.game import GameError
from python_trainer.envs.grouped_env import GroupedVecEnv


@dataclass
class FrameStackArgs:
    frame_stack: int = flag(1, in_range(1, bounds.FRAME_STACK.value, f"1 to {bounds.FRAME_STACK.value} (the engine's "
                                        "policy file takes at most that many frames)", "4"))
    """games with a camera image: the K newest frames on the image's channels (H, W, C*K), oldest first, cleared at
    each episode's start (1: the current frame only)"""


def resume_refusal(args, saved: dict) -> Optional[str]:
    """Why a checkpoint whose run had the flags ``saved`` does not resume with this run's --frame-stack, or None."""
    if int(saved.get("frame_stack", 1)) != args.frame_stack:
        return refusal("resume/frame_stack", where=f"--resume {args.resume}", saved=saved.get("frame_stack", 1),
                       asked=args.frame_stack)
    return None


class FrameStack(gym.vector.VectorEnv, GroupedVecEnv):
    """``env`` (a vector env whose rows end with a camera image: ``env.image_layout``) with its K newest frames per
    agent; everything else (the game's env_info, its launcher, its calls) is ``env``'s."""

    def __init__(self, env, k: int):
        layout = getattr(env, "image_layout", None)
        if layout is None:
            raise GameError(refusal("no_camera/frame_stack", k=k, env_id=getattr(env, "env_id", "this env")))
        if len(getattr(env, "policies", ())) > 1:
            raise GameError(refusal("policies/frame_stack", k=k, env_id=env.env_id))
        self.env, self.k, self.frame_layout = env, int(k), layout
        self.image_layout = layout.stacked(k)
        self.num_envs, self.groups, self.metadata = env.num_envs, env.groups, env.metadata
        box = env.single_observation_space
        low = np.concatenate([box.low[: layout.start], np.zeros(self.image_layout.size, np.float32)])
        self.single_observation_space = gym.spaces.Box(low, np.concatenate([box.high[: layout.start], np.full(
            self.image_layout.size, 255, np.float32)]), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space, self.action_space = env.single_action_space, env.action_space
        h, w, c = layout.height, layout.width, layout.channels
        self._frames = np.zeros((self.num_envs, h, w, self.k, c), np.uint8)  # [..., -1, :]: the newest frame

    def __getattr__(self, name):
        if name == "env":  # not set yet (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    # ---------------------------------------------------------------- the stack
    def _frames_of(self, rows: np.ndarray) -> np.ndarray:
        """(n, H, W, 1, C) uint8: the image of each of ``rows`` (the inner env's flat rows)."""
        lay = self.frame_layout
        return rows[:, lay.start :].reshape(len(rows), lay.height, lay.width, 1, lay.channels).astype(np.uint8)

    def _rows(self, rows: np.ndarray, stacks: np.ndarray) -> np.ndarray:
        """(n, stacked row) float32: the vector part of ``rows``, then ``stacks`` flattened as (H, W, C*K)."""
        out = np.empty((len(rows), self.image_layout.row_size), np.float32)
        out[:, : self.frame_layout.start] = rows[:, : self.frame_layout.start]
        out[:, self.frame_layout.start :] = stacks.reshape(len(rows), -1)
        return out

    @staticmethod
    def _pushed(history: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """Each stack of ``history`` with its oldest frame dropped and ``frames`` put last."""
        return np.concatenate([history[:, :, :, 1:], frames], axis=3)

    def _stacked(self, part: slice, result):
        """The inner env's step tuple for the envs of ``part``, with stacked rows (obs and final_obs)."""
        obs, rewards, terminated, truncated, infos = result
        history = self._frames[part]
        stacks = self._pushed(history, self._frames_of(obs))
        ended = np.asarray(infos.get("_final_obs", np.zeros(len(obs), bool)))
        if ended.any():
            infos = dict(infos)
            final = np.zeros((len(obs), self.image_layout.row_size), np.float32)
            final[ended] = self._rows(infos["final_obs"][ended],
                                      self._pushed(history[ended], self._frames_of(infos["final_obs"][ended])))
            infos["final_obs"] = final
            stacks[ended, :, :, :-1] = 0  # the next episode's first row: no frames before it
        self._frames[part] = stacks
        return self._rows(obs, stacks), rewards, terminated, truncated, infos

    # ---------------------------------------------------------------- the vector env's API
    def reset(self, *, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self._frames[:] = 0
        self._frames[:, :, :, -1:] = self._frames_of(obs)
        return self._rows(obs, self._frames), infos

    def step(self, actions):
        return self._stacked(slice(0, self.num_envs), self.env.step(actions))

    def step_async(self, actions, group: int) -> None:
        self.env.step_async(actions, group)

    def step_wait(self, group: int):
        return self._stacked(self.groups[group], self.env.step_wait(group))

    @property
    def closed(self) -> bool:
        return self.env.closed

    def close(self, **kwargs) -> None:
        self.env.close(**kwargs)

    def __del__(self):
        pass  # the inner env closes itself

    def __repr__(self) -> str:
        return f"FrameStack({self.env!r}, {self.k})"
