"""A gymnasium VectorEnv over N copies of a gymnasium id, stepped in this process, with same-step autoreset.

Conventions shared with the Godot vector env (python_trainer.envs.vec_env), so the rollout treats both alike:

* ``metadata["autoreset_mode"] == "same-step"``: when sub-env i ends (terminated or truncated) during ``step``,
  it is reset inside that same call. The returned ``obs[i]`` is the first observation of the NEXT episode;
  the last observation of the finished episode is ``infos["final_obs"][i]`` (object array, ``None`` where no
  episode ended; boolean mask ``infos["_final_obs"]``), its info dict ``infos["final_info"][i]``.
* Episode statistics exactly as gymnasium 1.x's vector ``RecordEpisodeStatistics`` reports them, for the
  sub-envs whose episode ended at this step: ``infos["episode"] = {"r": float array (num_envs,), "l": int array,
  "t": float array}`` (zeros where no episode ended) and the mask ``infos["_episode"]``. The bookkeeping lives in
  ``EpisodeStatistics`` so the Godot env reuses it.
* ``groups``: the envs (contiguous slices of the batch) that ``step_async(actions, group)`` / ``step_wait(group)``
  step together, with ``step``'s conventions for the group's envs (grouped_env.GroupedVecEnv; the rollout goes
  through them). Here one group, the whole batch; the Godot env has two with 2 or more instances, stepped while the
  trainer serves the other.
* Observations are flat float32 vectors: ``single_observation_space`` is a 1-D float32 Box (Dict, Tuple,
  Discrete, image... observation spaces are flattened with ``gymnasium.spaces.flatten``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from python_trainer.base.errors import UserError
from python_trainer.envs.grouped_env import GroupedVecEnv


DEFAULT_NUM_ENVS = 4  # sub-envs of a gymnasium id when num_envs is not given


class UnknownEnvError(UserError, ValueError):
    """An env id that is neither a registered gymnasium id nor a Godot game."""


class UnsupportedSpaceError(UserError, ValueError):
    """An observation or action space the trainer cannot handle."""


class MissingDependencyError(UserError, ValueError):
    """A gymnasium env (or its rendering) needs a Python package that is not installed."""


# Modules gymnasium's envs import on demand -> the PyPI package that provides them. Box2D comes from `box2d`, which
# ships wheels (gymnasium's own hint, gymnasium[box2d], builds box2d-py from source and needs swig).
PYPI_PACKAGES = {
    "Box2D": "box2d",
    "pygame": "pygame",
    "mujoco": "mujoco",
    "ale_py": "ale-py",
    "moviepy": "moviepy",
    "cv2": "opencv-python",
}


def missing_dependency(what: str, error: BaseException) -> MissingDependencyError:
    """One line naming the package to install, from gymnasium's DependencyNotInstalled (or the ImportError under it)
    raised while ``what`` (e.g. "LunarLander-v3") was being made or rendered."""
    cause = error if isinstance(error, ImportError) else error.__cause__ or error.__context__
    module = getattr(cause, "name", None) or ""
    package = PYPI_PACKAGES.get(module.split(".")[0])
    if package is None:
        return MissingDependencyError(f"{what} needs a Python package that is not installed: {error}")
    return MissingDependencyError(f"{what} needs the Python package {package!r}, which is not installed: "
                                  f"pip install {package}")


def make_gym_env(env_id: str, what: Optional[str] = None, **make_kwargs) -> gym.Env:
    """``gym.make(env_id)``, with a MissingDependencyError naming the package when an optional dependency is
    missing."""
    try:
        return gym.make(env_id, **make_kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as e:
        raise missing_dependency(what or env_id, e) from None


class EpisodeStatistics:
    """Per-sub-env episode return / length / wall-time bookkeeping for a same-step-autoreset vector env.

        stats = EpisodeStatistics(num_envs)
        stats.reset()                       # after envs.reset()
        infos = stats.update(rewards, terminated, truncated, infos)   # after every step

    ``update`` counts this step's reward for every sub-env, then for the sub-envs whose episode ended at this step
    adds ``infos["episode"] = {"r", "l", "t"}`` and ``infos["_episode"]`` (as gymnasium 1.x's vector
    RecordEpisodeStatistics does) and starts their next episode at zero. ``return_queue`` / ``length_queue`` /
    ``time_queue`` hold the last ``buffer_length`` finished episodes.
    """

    def __init__(self, num_envs: int, buffer_length: int = 100, stats_key: str = "episode"):
        self.num_envs = num_envs
        self.stats_key = stats_key
        self.episode_count = 0
        self.return_queue: deque = deque(maxlen=buffer_length)
        self.length_queue: deque = deque(maxlen=buffer_length)
        self.time_queue: deque = deque(maxlen=buffer_length)
        self.reset()

    def reset(self, mask=None):
        """Start new episodes for all sub-envs (or only where the boolean ``mask`` is True)."""
        now = time.perf_counter()
        if mask is None:
            self.episode_returns = np.zeros(self.num_envs, dtype=np.float64)
            self.episode_lengths = np.zeros(self.num_envs, dtype=np.int64)
            self.episode_start_times = np.full(self.num_envs, now)
        else:
            self.episode_returns[mask] = 0.0
            self.episode_lengths[mask] = 0
            self.episode_start_times[mask] = now

    def update(self, rewards, terminated, truncated, infos: dict, part: slice = slice(None)) -> dict:
        """``part``: the sub-envs the arrays are about (a contiguous slice of the batch, e.g. one group of a
        pipelined step); the statistics added to ``infos`` have the part's size."""
        # views of the part's entries (basic slicing): updating them updates the whole arrays
        returns, lengths = self.episode_returns[part], self.episode_lengths[part]
        start_times = self.episode_start_times[part]
        returns += rewards
        lengths += 1
        dones = np.logical_or(terminated, truncated)
        if dones.any():
            key = self.stats_key
            if key in infos or f"_{key}" in infos:
                raise ValueError(f"episode statistics already in infos (keys: {list(infos)})")
            now = time.perf_counter()
            elapsed = np.round(now - start_times, 6)
            infos[key] = {
                "r": np.where(dones, returns, 0.0),
                "l": np.where(dones, lengths, 0),
                "t": np.where(dones, elapsed, 0.0),
            }
            infos[f"_{key}"] = dones
            idx = np.flatnonzero(dones)
            self.episode_count += len(idx)
            self.return_queue.extend(returns[idx].tolist())
            self.length_queue.extend(lengths[idx].tolist())
            self.time_queue.extend(elapsed[idx].tolist())
            returns[dones], lengths[dones], start_times[dones] = 0.0, 0, now  # their next episodes start
        return infos


class GymVecEnv(gym.vector.VectorEnv, GroupedVecEnv):
    """``num_envs`` copies of ``gym.make(env_id)`` stepped one after the other in this process (same-step autoreset)."""

    metadata = {"autoreset_mode": "same-step"}

    def __init__(self, env_id: str, num_envs: int = 4, seed: int | None = None, video_dir=None, **make_kwargs):
        """``video_dir``: record the first env's episodes there with gymnasium's RecordVideo (CleanRL's
        --capture-video: episodes 0, 1, 8, 27, ... k^3 ... 1000, then every 1000th), as mp4."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.num_envs = num_envs
        self.envs = []  # close() must work on an env whose __init__ failed halfway
        try:
            for i in range(num_envs):
                if i == 0 and video_dir is not None:
                    self.envs.append(_recording_env(env_id, video_dir, **make_kwargs))
                else:
                    self.envs.append(make_gym_env(env_id, **make_kwargs))
        except BaseException:
            self.close_extras()
            self.closed = True
            raise
        self.metadata = {**self.envs[0].metadata, "autoreset_mode": "same-step"}
        self.spec = self.envs[0].spec
        self.render_mode = self.envs[0].render_mode

        self._raw_observation_space = self.envs[0].observation_space
        raw = self._raw_observation_space
        # Flat float32 observations: a 1-D float32 Box passes through untouched (the fast path).
        self._flatten = not (isinstance(raw, gym.spaces.Box) and len(raw.shape) == 1 and raw.dtype == np.float32)
        try:
            flat = gym.spaces.flatten_space(raw)
        except NotImplementedError as e:
            raise UnsupportedSpaceError(
                f"{env_id}: observation space {raw} cannot be flattened into a vector ({e}); "
                "wrap the env so it returns a Box observation"
            ) from None
        self.single_observation_space = gym.spaces.Box(
            low=flat.low.astype(np.float32), high=flat.high.astype(np.float32), dtype=np.float32
        )
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._discrete = isinstance(self.single_action_space, gym.spaces.Discrete)

        self._obs = np.zeros((num_envs,) + self.single_observation_space.shape, dtype=np.float32)
        self.episode_stats = EpisodeStatistics(num_envs)
        self.closed = False
        self._seed = seed
        # One group (the whole batch): step_async/step_wait exist so a trainer has one code path for every env,
        # but nothing runs in the background here (the envs step in step_wait).
        self.groups = [slice(0, num_envs)]
        self._pending_actions = None

    def _flat(self, obs):
        if self._flatten:
            return gym.spaces.flatten(self._raw_observation_space, obs)
        return obs

    def reset(self, *, seed=None, options=None):
        if seed is None:
            seed = self._seed
            self._seed = None  # seed only the first reset; later resets continue the envs' RNG streams
        seeds = (
            seed
            if isinstance(seed, (list, tuple))
            else [None if seed is None else seed + i for i in range(self.num_envs)]
        )
        infos: dict = {}
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=seeds[i], options=options)
            self._obs[i] = self._flat(obs)
            if info:
                infos = self._add_info(infos, info, i)
        self.episode_stats.reset()
        self._pending_actions = None
        return self._obs.copy(), infos

    def step(self, actions):
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        infos: dict = {}
        final_obs = final_info = None
        acts = np.asarray(actions).tolist() if self._discrete else actions
        for i, env in enumerate(self.envs):
            obs, reward, term, trunc, info = env.step(acts[i])
            rewards[i] = reward
            if term or trunc:
                terminated[i] = term
                truncated[i] = trunc
                if final_obs is None:
                    final_obs = np.full(n, None, dtype=object)
                    final_info = np.full(n, None, dtype=object)
                final_obs[i] = np.asarray(self._flat(obs), dtype=np.float32)
                final_info[i] = info
                obs, info = env.reset()
            self._obs[i] = self._flat(obs)
            if info:
                infos = self._add_info(infos, info, i)
        if final_obs is not None:
            mask = terminated | truncated
            infos["final_obs"], infos["_final_obs"] = final_obs, mask
            infos["final_info"], infos["_final_info"] = final_info, mask.copy()
        infos = self.episode_stats.update(rewards, terminated, truncated, infos)
        return self._obs.copy(), rewards, terminated, truncated, infos

    def step_async(self, actions, group: int = 0) -> None:
        """Keep the actions of the (only) group for step_wait, which steps the envs."""
        if group != 0:
            raise IndexError(f"GymVecEnv has one group (0), not {group}")
        if self._pending_actions is not None:
            raise RuntimeError("step_async twice without step_wait")
        self._pending_actions = actions

    def step_wait(self, group: int = 0):
        """step() with the actions step_async kept."""
        if group != 0:
            raise IndexError(f"GymVecEnv has one group (0), not {group}")
        if self._pending_actions is None:
            raise RuntimeError("step_wait without step_async")
        actions, self._pending_actions = self._pending_actions, None
        return self.step(actions)

    def render(self):
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()


def _recording_env(env_id: str, video_dir, **make_kwargs) -> gym.Env:
    """``env_id`` rendering rgb_array frames, wrapped in gymnasium's RecordVideo (its mp4 encoder, moviepy, runs the
    ffmpeg of the imageio-ffmpeg wheel: no system ffmpeg). One frame is rendered first, so a missing renderer
    (pygame) is one clear error now, not a traceback at the first episode."""
    what = f"--capture-video of {env_id}"
    env = make_gym_env(env_id, what, render_mode="rgb_array", **make_kwargs)
    try:
        env.reset(seed=0)
        env.render()
        # gymnasium's file names (rl-video-episode-N.mp4), which the LunarLander article's notebook looks for
        return gym.wrappers.RecordVideo(env, str(video_dir), disable_logger=True)
    except (gym.error.DependencyNotInstalled, ImportError) as e:
        env.close()
        raise missing_dependency(what, e) from None


def make_gym_vec_env(env_id: str, num_envs: int | None = None, seed: int | None = 0, video_dir=None) -> GymVecEnv:
    """The gymnasium branch of ``make_vec_env``; a clear error for an id gymnasium does not know."""
    check_gym_id(env_id)
    return GymVecEnv(env_id, num_envs=DEFAULT_NUM_ENVS if num_envs is None else num_envs, seed=seed,
                     video_dir=video_dir)


def check_gym_id(env_id: str) -> None:
    """Raise UnknownEnvError when ``env_id`` is not a registered gymnasium id."""
    if env_id not in gym.registry:
        raise UnknownEnvError(
            f"unknown env id {env_id!r}: not a registered gymnasium id (e.g. CartPole-v1, Pendulum-v1; "
            "`python -c 'import gymnasium; gymnasium.pprint_registry()'` lists them)"
        )
