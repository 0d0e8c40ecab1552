"""Checkpoints: one format for periodic checkpoints, Ctrl-C checkpoints and the final model.pt.

Only tensors and plain Python values, so ``torch.load(..., weights_only=True)`` reads it:

    {"format": "godot-ppo-checkpoint/1", "env_id", "global_step", "update", "model", "optimizer", "normalizer",
     "observation_space", "action_space", "args", "rng", "env_info", "rnd", "batch_size", "clock"}

("rnd": None, or with --rnd the RND module's weights and statistics: {"model", "stats"}; an agent that reads a
camera image adds "image": its envs/images.ImageLayout's fields, as one policy's part of the checkpoint does.)

Written by the train command (train.py); read by it (--resume), by trained_agent.load_agent and by the tools.
"""

from __future__ import annotations

import random
import zipfile
from dataclasses import asdict
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from python_trainer.base.errors import one_line
from python_trainer.base.files import atomic_output
# The file names in a run folder: defined once, in paths (which the tools import them from without torch).
from python_trainer.base.paths import CHECKPOINT_NAME, MODEL_NAME

__all__ = [
    "CHECKPOINT_FORMAT", "CheckpointError", "CHECKPOINT_NAME", "MODEL_NAME", "space_to_dict", "space_from_dict",
    "image_entry", "rng_state",
    "set_rng_state", "save_checkpoint", "load_checkpoint",
]

CHECKPOINT_FORMAT = "godot-ppo-checkpoint/1"
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, saying what it is: missing, empty, truncated, not a checkpoint."""


def space_to_dict(space):
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": space.low.flatten().tolist(), "high": space.high.flatten().tolist()}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, gym.spaces.Dict):  # a hybrid action space: one entry per key
        return {"type": "Dict", "spaces": {key: space_to_dict(sub) for key, sub in space.spaces.items()}}
    raise TypeError(f"cannot save space {space}")


def space_from_dict(d):
    if d["type"] == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    if d["type"] == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(d["nvec"], start=d["start"])
    if d["type"] == "Dict":
        return gym.spaces.Dict({key: space_from_dict(sub) for key, sub in d["spaces"].items()})
    shape = tuple(d["shape"])
    low = np.array(d["low"], dtype=d["dtype"]).reshape(shape)
    high = np.array(d["high"], dtype=d["dtype"]).reshape(shape)
    return gym.spaces.Box(low, high, shape=shape, dtype=d["dtype"])


def image_entry(agent) -> dict:
    """{"image": the ImageLayout's fields} of an agent that reads a camera image (what rebuilds it), else {}."""
    image = getattr(agent, "image_layout", None)
    return {} if image is None else {"image": asdict(image)}


def rng_state():
    """The python, numpy and torch RNG streams, as tensors and plain values."""
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state):
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(
        ("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])


def save_checkpoint(path, *, agent, optimizer, normalizer, args, global_step, update, observation_space, action_space,
                    env_info=None, rnd=None, batch_size=None, policies=None, rollouts=None, curriculum=None,
                    clock=None):
    """Write atomically: a crash or Ctrl-C during the write leaves the previous file intact.

    ``args`` is the training's Args dataclass; agent, optimizer and normalizer anything with a state_dict();
    ``env_info``: a Godot game's (its action keys let a policy file be exported later without running the game);
    ``rnd``: the run's rnd.RND module (--rnd), whose weights and normalisers a resume needs;
    ``batch_size``: the steps of one update (a resume with another number of envs says so).
    ``policies``: a game with several policies: {name: {"model", "optimizer", "normalizer", "rnd" (state dicts),
    "observation_space", "action_space" (space_to_dict)}}, with agent/optimizer/normalizer/spaces None (saved as None).
    ``rollouts``: the state of rollouts that keep one (--self-play's pool, ratings and sides: self_play.py).
    ``curriculum``: the environment parameters' lessons (curriculum.Schedule.state_dict), which a resume continues.
    ``clock``: the training's wall-clock seconds up to this update and that update's (run/clock.py's Clock.state_dict),
    which --max-seconds counts on from.
    """
    state = {
        "format": CHECKPOINT_FORMAT,
        "env_id": args.env_id,
        "global_step": int(global_step),
        "update": int(update),
        "model": None if agent is None else agent.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "normalizer": None if normalizer is None else normalizer.state_dict(),
        "observation_space": None if observation_space is None else space_to_dict(observation_space),
        "action_space": None if action_space is None else space_to_dict(action_space),
        "args": asdict(args),
        "rng": rng_state(),
        "env_info": env_info,
        "rnd": None if rnd is None else {"model": rnd.state_dict(), "stats": rnd.stats_state_dict()},
        "batch_size": None if batch_size is None else int(batch_size),
        **({"policies": policies} if policies is not None else {}),
        **({"rollouts": rollouts} if rollouts is not None else {}),
        "curriculum": curriculum,
        "clock": clock,
        **image_entry(agent),
    }
    with atomic_output(path, fsync=True) as tmp, open(tmp, "wb") as f:  # a file object: the archive is "archive/"
        torch.save(state, f)


def load_checkpoint(path):
    """The checkpoint's dict; raises CheckpointError naming what is wrong with the file (empty, truncated...)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise CheckpointError(f"cannot read {path} ({e.strerror or e})") from None
    if size == 0:
        raise CheckpointError(f"{path} is an empty file (0 bytes), not a checkpoint")
    if head != _ZIP_MAGIC:
        raise CheckpointError(f"{path} is not a checkpoint ({size} bytes that do not start like a torch.save file)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        if not zipfile.is_zipfile(path):
            raise CheckpointError(
                f"{path} is truncated ({size} bytes: the end of its archive is missing; copied or written incompletely?)"
            ) from None
        raise CheckpointError(f"{path} is a torch file but not a readable checkpoint ({type(e).__name__}: "
                              f"{one_line(e)[:200]})") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "global_step" not in ckpt:
        raise CheckpointError(f"{path} is a torch file but not a godot-ppo checkpoint (no model / global_step in it)")
    return ckpt
