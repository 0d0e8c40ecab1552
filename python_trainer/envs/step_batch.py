"""One step's arrays for a part of a vector env's batch (observations, rewards, terminations, truncations, and
gymnasium's final_obs / final_info of the episodes that ended), filled in from the instances' replies."""

from __future__ import annotations

from typing import Optional

import numpy as np


class StepBatch:
    """step()'s arrays for a part of the batch, filled in from its instances' replies; ``final_obs`` and
    ``final_info`` are made when the first episode ends."""

    def __init__(self, obs: np.ndarray):
        n = obs.shape[0]
        self.obs = obs  # the next observations (same-step autoreset: a new episode's first where one ended)
        self.rewards = np.zeros(n, dtype=np.float64)
        self.terminated = np.zeros(n, dtype=np.bool_)
        self.truncated = np.zeros(n, dtype=np.bool_)
        self.final_obs: Optional[np.ndarray] = None
        self.final_info: Optional[np.ndarray] = None

    def end(self, rows, truncated, final_obs, final_info) -> None:
        """The episodes of ``rows`` ended (truncated or terminated), with their last observations and infos."""
        if self.final_obs is None:
            self.final_obs = np.zeros(self.obs.shape, dtype=np.float32)
            self.final_info = np.full(self.obs.shape[0], None, dtype=object)
        self.truncated[rows] = truncated
        self.terminated[rows] = np.logical_not(truncated)
        self.final_obs[rows] = final_obs
        self.final_info[rows] = final_info

    def infos(self) -> dict:
        """gymnasium's final_obs / final_info entries (and their masks) when an episode ended."""
        if self.final_obs is None:
            return {}
        return {"final_obs": self.final_obs, "_final_obs": self.terminated | self.truncated,
                "final_info": self.final_info, "_final_info": self.terminated | self.truncated}
