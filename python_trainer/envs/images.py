"""Image observations (camera sensors): where a policy's image sits in its flat observation row, and the rule that
tells an image key from a vector one.

godot-rl's rule: an observation key containing "2d" is an image, declared ``{"size": [H, W, C], "space": "box"}``
and sent as H x W x C uint8 values in row-major H, W, C order (hex over JSON; raw bytes over our binary step
exchange). The trainer keeps one flat float32 row per agent, as for every game: the vector keys first (sorted, as
spaces.py lays them out), then the image block, its H*W*C values as 0..255 floats. The rollout buffer stores the
image block as uint8, the normaliser leaves it alone, and the CNN encoder (variants/cnn.py) reads it back with
``split``. A frame stack of K keeps the K newest frames on the channels (H, W, C*K), oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from python_trainer.base import bounds
from python_trainer.base.contract import is_image_key  # noqa: F401  (godot-rl's rule; read from here too)

MAX_SIDE = bounds.CAMERA_SIDE.value  # the largest camera side a game may declare


@dataclass(frozen=True)
class ImageLayout:
    """A policy's image block: its observation key, its shape (H, W, C*K with a frame stack of K) and its first
    column in the flat row (the block is always the row's last ``size`` columns)."""

    key: str
    height: int
    width: int
    channels: int  # of one frame
    start: int  # the first column of the image block (= the number of vector columns)
    frame_stack: int = 1

    @property
    def shape(self) -> tuple:
        """(H, W, C*K): what the encoder sees."""
        return (self.height, self.width, self.channels * self.frame_stack)

    @property
    def frame_size(self) -> int:
        return self.height * self.width * self.channels

    @property
    def size(self) -> int:
        return self.frame_size * self.frame_stack

    @property
    def row_size(self) -> int:
        return self.start + self.size

    def stacked(self, k: int) -> "ImageLayout":
        return replace(self, frame_stack=int(k))

    def vector_mask(self) -> np.ndarray:
        """A bool mask over the row's columns: True for vector columns (what the normaliser scales)."""
        mask = np.zeros(self.row_size, bool)
        mask[: self.start] = True
        return mask

    def split(self, x):
        """(vector part (B, start), image part (B, H, W, C*K)) of a batch of flat rows, numpy or torch (views)."""
        return x[:, : self.start], x[:, self.start :].reshape((x.shape[0],) + self.shape)


def declared_image(env_info: dict):
    """(key, [H, W, C]) of the first image observation an agent declares in ``env_info``, or None: what tells the
    launcher that a game needs windowed instances (a headless build renders nothing)."""
    spaces = env_info.get("observation_space")
    for space in spaces if isinstance(spaces, list) else [spaces]:
        for key, spec in (space.items() if isinstance(space, dict) else ()):
            if is_image_key(key):
                return key, (spec.get("size") if isinstance(spec, dict) else None)
    return None
