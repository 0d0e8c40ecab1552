"""The agent a run's flags describe, new or trained: what `train`, the Ray workers and every tool (playback, profiling,
the policy export) build an agent with, so none of them needs the trainer.

    agent = make_agent(obs_dim, action_space, args)      # args: a run's flags as a dict (Args, or a checkpoint's)
    agent = make_agent(obs_dim, action_space, args, envs.image_layout)   # a camera's game: the CNN agent (--cnn)
    loaded = load_agent("runs/ball_chase__ppo__1__1700000000")   # model.pt / checkpoint.pt / a run folder
    actions = loaded.act(observations)                   # numpy in, the env's actions out, normalised as in training
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import gymnasium as gym
import numpy as np
import torch

from python_trainer.agent import Agent, NO_STATE, env_action
from python_trainer.base.paths import checkpoint_in
from python_trainer.checkpoint import load_checkpoint, space_from_dict
from python_trainer.envs.images import ImageLayout
from python_trainer.normalization import Normalizer
from python_trainer.variants.cnn import DEFAULT_ENCODER
from python_trainer.variants.cnn_agent import CnnAgent, RecurrentCnnAgent
from python_trainer.variants.recurrent import DEFAULT_HIDDEN_SIZE, RecurrentAgent


def make_agent(obs_dim: int, action_space: gym.Space, args: dict, image: Optional[ImageLayout] = None) -> Agent:
    """The agent of a training with these flags (``args``: Args as a dict, or a checkpoint's "args"): the MLP agent,
    agent.py's Agent (its fast twins chosen: fast_acting.py), or with --lstm the recurrent one on it; with --rnd its
    critic has the intrinsic value output too.
    ``image``: the policy's observations hold a camera image (the vec env's image_layout): the CNN agent of --cnn
    (cnn_agent.py), recurrent with --lstm."""
    rnd = bool(args.get("rnd"))
    hidden = int(args.get("lstm_size", DEFAULT_HIDDEN_SIZE))
    if image is not None:
        if image.row_size != obs_dim:
            raise ValueError(f"the image layout's rows have {image.row_size} columns, the observations {obs_dim}")
        kind = args.get("cnn") or DEFAULT_ENCODER
        if args.get("lstm"):
            return RecurrentCnnAgent(image, action_space, hidden, kind=kind, rnd=rnd)
        return CnnAgent(image, action_space, kind=kind, rnd=rnd)
    if args.get("lstm"):
        return RecurrentAgent(obs_dim, action_space, hidden, rnd=rnd)
    return Agent(obs_dim, action_space, rnd=rnd)


def image_of(part: dict) -> Optional[ImageLayout]:
    """The image layout a checkpoint (or one policy's part of it) was trained with, None for a vector game's."""
    image = part.get("image")
    return None if image is None else ImageLayout(**image)


@dataclass
class LoadedAgent:
    agent: Agent
    normalizer: Normalizer
    observation_space: gym.spaces.Box
    action_space: gym.Space
    env_id: str
    global_step: int
    env_path: Optional[str] = None  # the export it was trained with (None: this repository's or a gymnasium id)
    state: object = NO_STATE  # a recurrent agent's memory of the envs it acts for (one row each)

    @property
    def frame_stack(self) -> int:
        """The K newest camera frames the agent reads per row (1: one frame, or no camera): the env it plays in
        stacks as many (make_vec_env's frame_stack)."""
        image = self.agent.image_layout
        return 1 if image is None else int(image.frame_stack)

    def act(self, obs, deterministic=True, done=None):
        """numpy observations (n, obs_dim) -> numpy env actions (normalised as in training, clipped to the space).

        A recurrent agent remembers: ``done[i]`` true where obs[i] starts a new episode forgets env i's past (a
        batch of another size starts from scratch)."""
        obs = np.atleast_2d(obs)
        image = self.agent.image_layout
        if image is not None and obs.shape[1] != image.row_size:
            shape = " x ".join(map(str, image.shape))
            raise ValueError(f"the policy reads rows of {image.row_size} values ({image.key} {shape} with --frame-stack "
                             f"{image.frame_stack}), the env gives {obs.shape[1]}: make the env with "
                             f"frame_stack={image.frame_stack}")
        x = torch.from_numpy(self.normalizer.normalize_obs(obs, update=False))
        with torch.no_grad():
            if self.agent.recurrent and (self.state is NO_STATE or self.state.h.shape[1] != x.shape[0]):
                self.state = self.agent.initial_state(x.shape[0])
            done = torch.zeros(x.shape[0]) if done is None else torch.as_tensor(np.asarray(done), dtype=torch.float32)
            action, self.state = self.agent.act(x, deterministic, self.state, done)
        return env_action(self.action_space, action.numpy())


def agent_from_checkpoint(ckpt, policy: Optional[str] = None) -> LoadedAgent:
    """Rebuild the trained agent from a loaded checkpoint (load_checkpoint's dict), with its frozen normalisation.
    A checkpoint of a game with several policies holds one agent per policy: ``policy`` names the one wanted."""
    part = ckpt
    if ckpt.get("policies"):
        names = sorted(ckpt["policies"])
        if policy not in ckpt["policies"]:
            raise ValueError(f"it holds the policies {names} of a game with several policies, and "
                             f"{'no policy was named' if policy is None else f'not {policy!r}'}: play them all in the "
                             "engine (godot-ppo play RUN_DIR, or RUN_DIR/policies/<name>.json for one of them)")
        part = ckpt["policies"][policy]
    observation_space = space_from_dict(part["observation_space"])
    action_space = space_from_dict(part["action_space"])
    obs_dim = int(np.prod(observation_space.shape))
    agent = make_agent(obs_dim, action_space, ckpt.get("args") or {}, image_of(part))
    agent.load_state_dict(part["model"])
    agent.eval()
    return LoadedAgent(agent, Normalizer.frozen(part["normalizer"]), observation_space, action_space, ckpt["env_id"],
                       ckpt["global_step"], (ckpt.get("args") or {}).get("env_path"))


def load_agent(path) -> LoadedAgent:
    """Rebuild the trained agent from model.pt / checkpoint.pt (or a run folder), with its frozen normalisation."""
    return agent_from_checkpoint(load_checkpoint(checkpoint_in(path)))
