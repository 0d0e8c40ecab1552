"""Running mean and variance of a stream of batches, and the two operations on their moments: merging a batch's in
(Chan et al.) and taking back out what was folded in since a point, which Ray workers send their learner to merge (one
fact, one place: the observation normaliser, the reward scaler and RND's two normalisers all use this)."""

from __future__ import annotations

from typing import Optional

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
        """Folds in a batch ``x`` of shape (batch, *shape). The batch's mean and variance are numpy's x.mean(0) and
        x.var(0), computed with the ufuncs those call (the same numbers without their Python wrappers: the rollout
        folds in a batch at every step)."""
        x = np.asarray(x, dtype=np.float64)
        n = x.shape[0]
        batch_mean = np.add.reduce(x, axis=0) / n
        d = x - batch_mean
        self.update_from_moments(batch_mean, np.add.reduce(np.multiply(d, d, out=d), axis=0) / n, n)

    def update_from_moments(self, batch_mean, batch_var, batch_count: int) -> None:
        """Chan et al.'s merge: with w = n / (count + n), mean += delta * w and
        var = var * count / (count + n) + batch_var * w + delta^2 * count * w / (count + n); the scalar weights are
        Python floats, so each step's statistics cost a few array operations."""
        tot_count = self.count + batch_count
        w = batch_count / tot_count
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * w
        self.var = self.var * (self.count / tot_count) + batch_var * w + delta * delta * (self.count * w / tot_count)
        self.count = tot_count

    def moments(self) -> tuple:
        """(mean, var, count) as they stand now, copied: the point `moments_since` measures from."""
        return self.mean.copy(), self.var.copy(), self.count

    def moments_since(self, mean0, var0, count0) -> Optional[tuple]:
        """The (mean, var, count) of what was folded in since the statistics stood at (mean0, var0, count0), None
        when nothing was: update_from_moments inverted, so another RunningMeanStd that stood at the same point can
        merge them (each of several workers' additions in turn)."""
        n = self.count - count0
        if n <= 0:
            return None
        mean = (self.mean * self.count - mean0 * count0) / n
        m2 = self.var * self.count - var0 * count0 - (mean - mean0) ** 2 * count0 * n / self.count
        return mean, np.maximum(m2 / n, 0.0), n

    def state_dict(self) -> dict:
        return {
            "mean": torch.from_numpy(np.array(self.mean)),
            "var": torch.from_numpy(np.array(self.var)),
            "count": float(self.count),
        }

    def load_state_dict(self, d: dict) -> None:
        self.mean, self.var, self.count = d["mean"].numpy().copy(), d["var"].numpy().copy(), float(d["count"])
