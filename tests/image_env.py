"""A tiny vector env whose observations hold a camera image, for the trainer's tests without a game: each agent sees
a 20 x 20 grayscale picture (the simple encoder's smallest) with its left or its right half bright, and one vector
value; acting towards the bright side (0: left, 1: right) gives +1. Episodes last 8 steps (terminated), so a random
policy returns 4 and one that reads its image 8. The rows are laid out as a Godot game's (envs/images.py): the
vector column, then the image's 400 values 0..255; ``image_layout`` says so, as GodotVecEnv's does."""

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from python_trainer.envs.gym_env import EpisodeStatistics
from python_trainer.envs.images import ImageLayout

SIDE, LENGTH = 20, 8


class BrightSide(gym.vector.VectorEnv):
    metadata = {"autoreset_mode": "same-step"}

    def __init__(self, num_envs: int, seed: int = 0, side: int = SIDE):
        self.num_envs, self.groups = num_envs, [slice(0, num_envs)]
        self.image_layout = ImageLayout("camera_2d", side, side, 1, 1)
        low = np.zeros(self.image_layout.row_size, np.float32)
        high = np.full(self.image_layout.row_size, 255, np.float32)
        low[0], high[0] = -1.0, 1.0
        self.single_observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.rng = np.random.default_rng(seed)
        self.stats = EpisodeStatistics(num_envs)
        self.t = np.zeros(num_envs, np.int64)

    def _rows(self):
        self.bright = self.rng.integers(0, 2, self.num_envs)  # 0: the left half, 1: the right half
        image = np.full((self.num_envs, SIDE, SIDE, 1), 20.0, np.float32)
        half = SIDE // 2
        for i, b in enumerate(self.bright):
            image[i, :, b * half : (b + 1) * half] = 230.0
        vector = self.rng.uniform(-1, 1, (self.num_envs, 1)).astype(np.float32)  # noise: nothing to read there
        return np.concatenate([vector, image.reshape(self.num_envs, -1)], axis=1)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t[:] = 0
        self.stats.reset()
        self.obs = self._rows()
        return self.obs.copy(), {}

    def step(self, actions):
        reward = (np.asarray(actions) == self.bright).astype(np.float64)
        self.t += 1
        terminated, truncated = self.t >= LENGTH, np.zeros(self.num_envs, bool)
        final = self.obs.copy()
        self.obs = self._rows()
        infos = {}
        if terminated.any():
            infos = {"final_obs": final, "_final_obs": terminated.copy(),
                     "final_info": np.array([{} for _ in range(self.num_envs)]), "_final_info": terminated.copy()}
            self.t[terminated] = 0
        infos = self.stats.update(reward, terminated, truncated, infos)
        return self.obs.copy(), reward, terminated, truncated, infos

    def step_async(self, actions, group=0):
        self._result = self.step(actions)

    def step_wait(self, group=0):
        return self._result
