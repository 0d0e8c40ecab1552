"""The vector env's batch by policy: its spaces, and each part's actions and observations through each policy's codec.

A game whose agents carry several policy names (agent_policy_names) has several `spaces.PolicySpaces`, and each env
of the batch its policy (``env_policy``, an index into them). When the policies' spaces are the same, the batch works
as for one policy. When they differ (``mixed``), an observation is padded with zeros to the widest policy's size
(``single_observation_space``), actions are a dict {policy name: that policy's batched actions, its envs in batch
order} (``single_action_space`` is the Dict of each policy's space), and steps go as JSON.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from python_trainer.envs.game import GameBugError, GameError
from python_trainer.envs.obs_codec import ObsCodec, packed_floats
from python_trainer.envs.spaces import ActionCodec


class PolicyBatch:
    """The spaces and codecs of a batch whose envs play ``policies`` (``env_policy``: each env's policy index)."""

    def __init__(self, policies: list, env_policy: np.ndarray, env_id: str):
        self.policies, self.env_policy, self.env_id = policies, env_policy, env_id
        first = policies[0]
        self.mixed = any((p.observation_space, p.action_space) != (first.observation_space, first.action_space)
                         for p in policies)
        if self.mixed and any(p.image is not None for p in policies):
            raise GameError(f"{env_id}'s policies have different spaces and some see camera images: policies with "
                            "images must all declare the same observation and action spaces (or train one policy)")
        self.image = first.image  # the camera image's place in each row (None: no image)
        self.obs_codecs = [ObsCodec(p.obs_layout, p.image) for p in policies]
        self.act_codecs = [ActionCodec(p.action_space, p.act_kind, p.act_layout) for p in policies]
        self._rows_cache: dict = {}
        num_envs = len(env_policy)
        if not self.mixed:
            self.single_observation_space, self.single_action_space = first.observation_space, first.action_space
            self.obs_dim = first.observation_space.shape[0]
            self.observation_space = batch_space(self.single_observation_space, num_envs)
            self.action_space = batch_space(self.single_action_space, num_envs)
            return
        self.obs_dim = max(p.observation_space.shape[0] for p in policies)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Dict({p.name: p.action_space for p in policies})
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.spaces.Dict({
            p.name: batch_space(p.action_space, int((env_policy == k).sum())) for k, p in enumerate(policies)
        })

    def rows(self, part: slice) -> list:
        """[(policy index, its envs' positions within ``part``)] for the envs of ``part``."""
        key = (part.start, part.stop)
        if key not in self._rows_cache:
            mine = self.env_policy[part]
            self._rows_cache[key] = [(k, np.flatnonzero(mine == k)) for k in range(len(self.policies))]
        return self._rows_cache[key]

    # ---------------------------------------------------------------- actions
    def checked(self, actions, part: slice):
        """The actions of ``part``'s envs, checked (ActionCodec.checked); mixed: {policy index: its checked rows}."""
        n = part.stop - part.start
        if not self.mixed:
            return self.act_codecs[0].checked(actions, n)
        names = [p.name for p in self.policies]
        if not isinstance(actions, dict) or sorted(actions) != sorted(names):
            got = sorted(map(str, actions)) if isinstance(actions, dict) else type(actions).__name__
            raise ValueError(f"{self.env_id}'s policies have different spaces: actions must be a dict {{policy name: "
                             f"that policy's batched actions}} with the keys {names}, got {got}")
        return {k: self.act_codecs[k].checked(actions[names[k]], rows.size) for k, rows in self.rows(part)}

    def json(self, a, part: slice) -> list:
        """godot-rl's per-agent action dicts for ``part``'s envs from `checked`'s actions."""
        if not self.mixed:
            return self.act_codecs[0].json(a)
        per_agent = [None] * (part.stop - part.start)
        for k, rows in self.rows(part):
            for row, action in zip(rows.tolist(), self.act_codecs[k].json(a[k])):
                per_agent[row] = action
        return per_agent

    def packed(self, a, s: slice) -> bytes:
        """The packed action message (binary step exchange, one policy's spaces only) for the rows ``s`` of ``a``."""
        return self.act_codecs[0].packed(a, s)

    # ---------------------------------------------------------------- observations
    def read_packed(self, conn, agents: int):
        """One instance's packed step reply (binary step exchange, one policy's spaces): (obs (agents, obs_dim) float32,
        rewards, statuses, terminal obs (ended, obs_dim), infos), its images (raw bytes) in the rows' image columns."""
        codec = self.obs_codecs[0]
        if codec.image is None:
            return conn.step_recv_packed(agents, self.obs_dim)
        obs, rewards, status, term_obs, infos, frames, term_frames = conn.step_recv_packed(
            agents, codec.vector_dim, frame_size=codec.image.frame_size)
        return np.hstack([obs, frames]), rewards, status, np.hstack([term_obs, term_frames]), infos

    def reply_obs(self, msg: dict, part: slice, label: str) -> np.ndarray:
        """The observations of one instance's envs (``part`` of the batch) in a step or reset reply: (agents, obs_dim)
        float32 (mixed: zero-padded)."""
        agents = part.stop - part.start
        if not self.mixed:
            return self.obs_codecs[0].from_reply(msg, agents, label)
        out = np.zeros((agents, self.obs_dim), np.float32)
        rows = self.rows(part)
        dims = np.zeros(agents, np.int64)
        for k, r in rows:
            dims[r] = self.obs_codecs[k].dim
        if "obs_f32" in msg:
            flat = packed_floats(msg["obs_f32"], label)
            if flat.size != dims.sum():
                raise GameBugError(f"{label}: {flat.size} packed observation values, expected {int(dims.sum())} (the "
                                   "sizes its agents declared, get_obs_space()); an agent's observation must keep the "
                                   "size it declared")
            ends = np.cumsum(dims)
            for j in range(agents):
                out[j, : dims[j]] = flat[ends[j] - dims[j] : ends[j]]
            return out
        obs_list = msg["obs"]
        if not isinstance(obs_list, list) or len(obs_list) != agents:
            raise GameBugError(f"{label}: observations for {len(obs_list) if isinstance(obs_list, list) else '?'} "
                               f"agents, expected {agents}")
        for k, r in rows:
            out[r, : dims[r[0]] if r.size else 0] = self.obs_codecs[k].flat([obs_list[j] for j in r.tolist()], label)
        return out

    def one_obs(self, obs: dict, env: int) -> np.ndarray:
        """Env ``env``'s observation dict (a terminal observation) as a row of obs_dim (mixed: padded)."""
        if not self.mixed:
            return self.obs_codecs[0].one(obs)
        k = int(self.env_policy[env])
        row = np.zeros(self.obs_dim, np.float32)
        row[: self.obs_codecs[k].dim] = self.obs_codecs[k].one(obs)
        return row
