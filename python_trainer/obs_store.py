"""The rollout buffer's observations of a game with a camera image: the vector columns as float32 and the image block
as uint8 (H*W*C bytes per agent-step, a quarter of the float row's), written and read back as float rows.

rollout.RolloutBuffer keeps its observations in an `ObsStore` when the agent reads an image (its ``image_layout``,
envs/images.py), in a float32 array otherwise (the vector games' buffers are what they always were). The store
answers what the rollout, the update and the Ray fragments ask of that array:

    store[t, envs] = rows                  # float rows (n, row_size); the image columns hold whole numbers 0..255
    store[:, cols] = other_store           # a Ray worker's fragment into the learner's buffer
    store[t, envs]                         # float rows again
    store.shape, store.nbytes              # (num_steps, num_envs, row_size), the bytes it holds
    b_obs = store.rows()                   # the flat batch for the update: b_obs.index_select(0, mb_inds)

The image block arrives as floats that are whole numbers (the games' bytes, and the normaliser leaves image columns
alone), so storing it as uint8 loses nothing.
"""

from __future__ import annotations

import numpy as np
import torch


class ObsStore:
    """(num_steps, num_envs, row_size) observation rows, kept as a float32 vector part and a uint8 image part."""

    dtype = np.dtype(np.float32)  # what reading gives back

    def __init__(self, num_steps: int, num_envs: int, layout):
        self.layout = layout
        self.vector = np.zeros((num_steps, num_envs, layout.start), np.float32)
        self.image = np.zeros((num_steps, num_envs, layout.size), np.uint8)

    @property
    def shape(self) -> tuple:
        return self.vector.shape[:2] + (self.layout.row_size,)

    @property
    def nbytes(self) -> int:
        return self.vector.nbytes + self.image.nbytes

    def __setitem__(self, index, rows) -> None:
        if isinstance(rows, ObsStore):
            self.vector[index], self.image[index] = rows.vector, rows.image
            return
        rows = np.asarray(rows)
        start = self.layout.start
        self.vector[index] = rows[..., :start]
        self.image[index] = rows[..., start:]  # whole numbers 0..255: the cast is exact

    def __getitem__(self, index) -> np.ndarray:
        return np.concatenate([self.vector[index], self.image[index].astype(np.float32)], axis=-1)

    def rows(self) -> "StoredRows":
        """The whole store as one flat batch (num_steps * num_envs rows) for the update, without a copy."""
        return StoredRows(self)


class StoredRows:
    """An ObsStore as the update's flat batch: ``index_select(0, inds)`` gives those rows as one float32 tensor (the
    image block converted from uint8 then, one minibatch at a time), as ``torch.Tensor.index_select`` would."""

    def __init__(self, store: ObsStore):
        n = store.vector.shape[0] * store.vector.shape[1]
        self.vector = torch.from_numpy(store.vector.reshape(n, -1))
        self.image = torch.from_numpy(store.image.reshape(n, -1))
        self.shape = (n, store.layout.row_size)

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        if dim != 0:
            raise ValueError("the stored rows are selected by row (dim 0)")
        return torch.cat([self.vector.index_select(0, index), self.image.index_select(0, index).float()], dim=1)
