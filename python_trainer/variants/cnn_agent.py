"""The agent that sees (--cnn): a policy whose observations hold a camera image gets a CNN encoder in the agent's
slot, shared by the actor and the critic, and the MLP agent's heads on what it sees.

    features = cat([CnnEncoder(image), vector])          # (vector, image) = layout.split(x), envs/images.py
    actor, critic = 64-64 tanh on the features           # agent.py's, one head per action key

The vector part arrives normalised (normalization.py scales the vector columns only); the image arrives as 0..255
and the encoder scales it by 1/255 (variants/cnn.py, CleanRL's ppo_atari.py). trained_agent.make_agent builds
`CnnAgent` for a policy whose spaces carry an ImageLayout, `RecurrentCnnAgent` with --lstm (the CNN and vector
features are the LSTM's input); ppo.py and the rollout call them as they call the MLP agent.

Acting in a rollout: the encoder runs in plain torch (no autograd): numpy has no convolution that is not slower than
torch's kernels, and the work per step is the convolutions', so a numpy twin would save nothing. The heads then run
fast_acting's numpy path (`RolloutPolicy`), drawing the random numbers Agent.pi draws, so acting keeps the MLP's
interface and its same-generator, same-actions rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
import torch

from python_trainer.agent import Agent, layer_init
from python_trainer.base.combinations import refusal
from python_trainer.base.flags import Rule, flag
from python_trainer.envs.images import ImageLayout
from python_trainer.fast_acting import RolloutPolicy
from python_trainer.variants.cnn import DEFAULT_ENCODER, ENCODERS, CnnEncoder, encoder_problem
from python_trainer.variants.recurrent import (
    DEFAULT_HIDDEN_SIZE, LSTMCore, LSTMState, RecurrentAgent, RecurrentRolloutPolicy,
)


@dataclass
class CnnArgs:
    cnn: str = flag(DEFAULT_ENCODER, Rule(lambda v: v in ENCODERS, f"an encoder: {' or '.join(ENCODERS)}", "nature"))
    """games with a camera image: the image's encoder, ML-Agents' `simple` (images >= 20 x 20: conv 8x8/4 16, conv
    4x4/2 32, dense 256) or `nature` (>= 36 x 36, Mnih et al.: conv 8x8/4 32, 4x4/2 64, 3x3/1 64, dense 512)"""


def resume_refusal(args, ckpt: Optional[dict]) -> Optional[str]:
    """Why the checkpoint ``ckpt`` (None: a new run) does not resume with this run's --cnn encoder, or None."""
    saved = (ckpt or {}).get("args") or {}
    if ckpt and saved.get("cnn", args.cnn) != args.cnn:
        return refusal("resume/cnn", where=f"--resume {args.resume}", saved=saved.get("cnn"), asked=args.cnn)
    return None


def images_refusal(layouts: list, args, explicit, ckpt: Optional[dict]) -> Optional[str]:
    """Why a game whose policies' image layouts are ``layouts`` (None: no image) does not train with these flags, in
    one line, or None: a camera image's encoder (--cnn) reads the image's size, the flags that do not go with images
    are refused, and a resumed checkpoint's encoder is the one asked for; --cnn on a game without images is refused
    (``explicit``: the flags given)."""
    images = [layout for layout in layouts if layout is not None]
    if not images:
        return refusal("no_camera/cnn", env_id=args.env_id) if "cnn" in explicit else None
    image = images[0]
    problem = encoder_problem(args.cnn, image.height, image.width)
    if problem:
        return f"{args.env_id}'s camera image {image.key!r}: {problem}"
    if args.rnd:
        return refusal("camera/rnd", env_id=args.env_id, key=image.key)
    if args.demos:
        return refusal("camera/demos", env_id=args.env_id, key=image.key)
    return resume_refusal(args, ckpt)


def image_features(encoder: CnnEncoder, layout: ImageLayout, x: torch.Tensor) -> torch.Tensor:
    """cat([encoder(image), vector]) for a batch of flat rows x (B, layout.row_size)."""
    vector, image = layout.split(x)
    return torch.cat([encoder(image), vector], dim=1)


class CnnAgent(Agent):
    """agent.Agent whose heads read `image_features` (the encoder is shared by the actor and the critic, so both
    losses train it). State_dict keys: encoder.convs.*, encoder.dense.*, then the critic's and the actor's."""

    def __init__(self, layout: ImageLayout, action_space: gym.Space, kind: str = DEFAULT_ENCODER, rnd: bool = False):
        self.image_layout, self.kind = layout, kind
        super().__init__(layout.row_size, action_space, rnd=rnd)

    def build(self, obs_dim: int, n_out: int) -> None:
        self.encoder = CnnEncoder(self.image_layout.shape, self.kind)
        super().build(self.encoder.out_features + self.image_layout.start, n_out)

    def features(self, x, state=None, done=None):
        return image_features(self.encoder, self.image_layout, x), state

    def policy_parts(self) -> dict:
        return {"encoder": self.encoder, "actor": self.actor, "image": self.image_layout}

    def rollout_policy(self) -> "CnnRolloutPolicy":
        return CnnRolloutPolicy(self)


class CnnRolloutPolicy(RolloutPolicy):
    """CnnAgent's acting in a rollout: the encoder in torch, the heads on numpy (see the module's docstring)."""

    def __init__(self, agent: CnnAgent):
        super().__init__(agent)
        self.encode = numpy_features(agent)

    def features(self, x, state, done):
        return self.encode(x), state


def numpy_features(agent) -> Callable[[np.ndarray], np.ndarray]:
    """x (n, row_size) numpy -> image_features as numpy float32, by the agent's encoder without autograd."""
    encoder, layout = agent.encoder, agent.image_layout

    def encode(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return image_features(encoder, layout, torch.from_numpy(np.ascontiguousarray(x, np.float32))).numpy()

    return encode


class RecurrentCnnAgent(RecurrentAgent):
    """--lstm with a camera: recurrent.RecurrentAgent whose encoder before the LSTM is the CNN and the vector
    (`image_features`); the LSTM, its state and the minibatches of whole envs are RecurrentAgent's."""

    def __init__(self, layout: ImageLayout, action_space: gym.Space, hidden_size: int = DEFAULT_HIDDEN_SIZE,
                 kind: str = DEFAULT_ENCODER, rnd: bool = False):
        self.image_layout, self.kind = layout, kind
        super().__init__(layout.row_size, action_space, hidden_size, rnd=rnd)

    def build(self, obs_dim: int, n_out: int) -> None:
        self.encoder = CnnEncoder(self.image_layout.shape, self.kind)
        self.lstm = LSTMCore(self.encoder.out_features + self.image_layout.start, self.hidden_size)
        self.critic = torch.nn.Sequential(layer_init(torch.nn.Linear(self.hidden_size, self.n_values), std=1.0))
        self.actor = torch.nn.Sequential(layer_init(torch.nn.Linear(self.hidden_size, n_out), std=0.01))

    def features(self, x, state=None, done=None):
        out, (h, c) = self.lstm(image_features(self.encoder, self.image_layout, x), (state.h, state.c), done)
        return out, LSTMState(h, c)

    def policy_parts(self) -> dict:
        return {**super().policy_parts(), "image": self.image_layout}

    def rollout_policy(self) -> RecurrentRolloutPolicy:
        return RecurrentRolloutPolicy(self, encode=numpy_features(self))
