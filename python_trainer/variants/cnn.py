"""The camera's encoder (--cnn): the convolutions that turn a policy's image block into features for its heads.

Two encoders, ML-Agents' names:
    simple (the default, images >= 20 x 20): conv 8x8 stride 4 -> 16 channels, conv 4x4 stride 2 -> 32, dense 256
    nature (>= 36 x 36, Mnih et al. 2015; CleanRL's ppo_atari.py): conv 8x8/4 -> 32, 4x4/2 -> 64, 3x3/1 -> 64,
           dense 512
Every layer is followed by a ReLU (the dense one too), weights orthogonal with gain sqrt(2) and biases 0, as in
CleanRL's ppo_atari.py. The input is the image block of the flat row (envs/images.py): (B, H, W, C) values 0..255,
scaled by 1/255 here (not by the normaliser) and moved to torch's (B, C, H, W); the convolutions have no padding,
and the last one's output is flattened in torch's (C, H, W) order before the dense layer. The in-engine player
(addons/rl_sync) and the ONNX export follow exactly this order.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from python_trainer.base import bounds

# kind -> ([(out channels, kernel, stride)], dense features, smallest image side)
ENCODERS = {
    "simple": ([(16, 8, 4), (32, 4, 2)], 256, 20),
    "nature": ([(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512, 36),
}
DEFAULT_ENCODER = "simple"


def conv_out(side: int, kernel: int, stride: int) -> int:
    """A side's length after an unpadded convolution."""
    return (side - kernel) // stride + 1


def encoder_problem(kind: str, height: int, width: int) -> str:
    """Why the encoder ``kind`` cannot read an image of height x width ('' if it can), with the fix."""
    if kind not in ENCODERS:
        return f"--cnn {kind!r} is not an encoder: choose one of {', '.join(ENCODERS)}"
    smallest = ENCODERS[kind][2]
    if min(height, width) < smallest:
        other = [k for k, (_, _, s) in ENCODERS.items() if min(height, width) >= s]
        fix = f"use --cnn {other[0]}" if other else f"give the camera at least {ENCODERS['simple'][2]} pixels a side"
        return f"the {kind} encoder needs images of at least {smallest} x {smallest}, the game's are {height} x " \
               f"{width}: {fix}"
    if not _fits(kind, height, width):
        features, dense = dense_inputs(kind, height, width), ENCODERS[kind][1]
        largest = max(s for s in range(smallest, bounds.CAMERA_SIDE.value + 1) if _fits(kind, s, s))
        return (f"the {kind} encoder turns {height} x {width} images into {features:,} features, and its dense layer "
                f"would hold {features * dense:,} weights, over the bounds of a policy ({bounds.LAYER_SIZE.value:,} "
                f"inputs to a layer, {bounds.POLICY_WEIGHTS.value:,} weights) that the engine plays: give the camera "
                f"at most {largest} x {largest} pixels (a camera sensor's size)")
    return ""


def dense_inputs(kind: str, height: int, width: int) -> int:
    """The features the encoder's convolutions give its dense layer for an image of height x width."""
    convs, _, _ = ENCODERS[kind]
    for _, kernel, stride in convs:
        height, width = conv_out(height, kernel, stride), conv_out(width, kernel, stride)
    return convs[-1][0] * height * width


def _fits(kind: str, height: int, width: int) -> bool:
    """The encoder's dense layer within the bounds of a policy file (bounds.LAYER_SIZE, bounds.POLICY_WEIGHTS)."""
    features = dense_inputs(kind, height, width)
    return features <= bounds.LAYER_SIZE.value and features * ENCODERS[kind][1] <= bounds.POLICY_WEIGHTS.value


class CnnEncoder(nn.Module):
    """(B, H, W, C) images, 0..255 -> (B, out_features) features."""

    def __init__(self, shape: tuple, kind: str = DEFAULT_ENCODER):
        super().__init__()
        height, width, channels = (int(s) for s in shape)
        problem = encoder_problem(kind, height, width)
        if problem:
            raise ValueError(problem)
        self.kind, self.shape = kind, (height, width, channels)
        convs, dense, _ = ENCODERS[kind]
        layers, c = [], channels
        for out, kernel, stride in convs:
            layers += [_init(nn.Conv2d(c, out, kernel, stride)), nn.ReLU()]
            c, height, width = out, conv_out(height, kernel, stride), conv_out(width, kernel, stride)
        self.convs = nn.Sequential(*layers)
        self.dense = nn.Sequential(_init(nn.Linear(c * height * width, dense)), nn.ReLU())
        self.out_features = dense

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.permute(0, 3, 1, 2).float() / 255.0
        return self.dense(self.convs(x).flatten(1))

    def conv_layers(self) -> list:
        """[(nn.Conv2d, stride)] in order, then the dense nn.Linear: what a policy file or an ONNX graph writes."""
        return [(m, m.stride[0]) for m in self.convs if isinstance(m, nn.Conv2d)]


def _init(layer: nn.Module, std: float = float(np.sqrt(2))) -> nn.Module:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer
