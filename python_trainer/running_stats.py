"""Running mean and variance of a stream of batches (one fact, one place: the observation normaliser, the reward
scaler and RND's two normalisers all use this)."""

from __future__ import annotations

import numpy as np
import torch


class RunningMeanStd:
    """Running mean and variance (parallel/Welford algorithm, Chan et al.); ``count`` starts at ``epsilon`` so the
    first batch replaces the initial (0, 1) almost entirely."""

    def __init__(self, shape: tuple = (), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x: np.ndarray) -> None:
        """Folds in a batch ``x`` of shape (batch, *shape)."""
        x = np.asarray(x, dtype=np.float64)
        self.update_from_moments(x.mean(axis=0), x.var(axis=0), x.shape[0])

    def update_from_moments(self, batch_mean, batch_var, batch_count: int) -> None:
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        self.mean = self.mean + delta * batch_count / tot_count
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / tot_count
        self.var = m2 / tot_count
        self.count = tot_count

    def state_dict(self) -> dict:
        return {
            "mean": torch.from_numpy(np.array(self.mean)),
            "var": torch.from_numpy(np.array(self.var)),
            "count": float(self.count),
        }

    def load_state_dict(self, d: dict) -> None:
        self.mean, self.var, self.count = d["mean"].numpy().copy(), d["var"].numpy().copy(), float(d["count"])
