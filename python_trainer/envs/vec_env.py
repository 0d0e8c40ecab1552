"""Vector envs: one gymnasium VectorEnv over many Godot instances, or over a gymnasium id.

`GodotVecEnv` (gymnasium 1.0 ``VectorEnv``) drives ``num_instances`` Godot processes; each simulates the number of
agents its env_info reports (``agents_per_instance`` is asked for with ``--agents``, and a game may ignore it), and
``num_envs`` is their sum. Each step sends the
actions to every instance first and reads the replies after, so the instances simulate in parallel.

Conventions (shared with python_trainer.envs.gym_env.GymVecEnv):

* observations: one flat float32 vector per agent (godot-rl's obs dict flattened: its "obs" key, or all keys
  concatenated in sorted order);
* actions: all-continuous action keys -> one ``Box(-1, 1)`` (keys concatenated in sorted order; actions are
  clipped to [-1, 1] before sending); one discrete key -> ``Discrete(n)``; several -> ``MultiDiscrete``; keys of
  both kinds (hybrid) -> ``Dict({key: Box(-1, 1, (size,)) or Discrete(size)})``, whose batched actions are
  ``{key: (num_envs, size) floats or (num_envs,) integers}``;
* same-step autoreset (``metadata["autoreset_mode"] == "same-step"``): the game resets an agent as soon as its
  episode ends, so ``obs[i]`` is already the next episode's first observation and the last one of the finished
  episode is ``infos["final_obs"][i]`` (a ``(num_envs, obs_dim)`` float32 array, valid where ``infos["_final_obs"]``);
* ``terminated = done and not info["TimeLimit.truncated"]``, ``truncated = done and info["TimeLimit.truncated"]``;
* episode statistics like gymnasium 1.x's RecordEpisodeStatistics: ``infos["episode"] = {"r", "l", "t"}`` and
  ``infos["_episode"]``;
* an instance that crashes or stops answering is reported and restarted (``max_restarts`` per instance); its
  agents' episodes end as truncated with ``final_obs`` = their last known observation;
* a bug in the game that a restart would repeat (an observation of another size or kind than declared, a reward that
  is not a number, an empty action space, script errors over and over: ``allow_script_errors``) raises
  ``game.GameBugError``, one line naming the agent, the key and what the game declared; nothing is restarted;
* groups (pipelined rollouts): ``groups`` lists the envs (contiguous slices of the batch) of groups of whole
  instances, two with 2 or more instances (the first half of the instances and the rest), one otherwise.
  ``step_async(actions, group)`` sends a group's actions and returns; ``step_wait(group)`` reads its replies and
  returns ``step``'s tuple for the group's envs (same autoreset, final_obs/final_info, episode statistics and
  restarts). So one group simulates while the trainer computes the other's actions.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S, agents_for, check_instance_options
from python_trainer.envs.game import (
    PLUGIN_PHYSICS_LINE, GameBugError, GameError, GodotGame, godot_game, resolve_env,
)
from python_trainer.envs.grouped_env import GroupedVecEnv
from python_trainer.envs.gym_env import EpisodeStatistics
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING,
    DIALECT_NAMES,
    GODOT_RL,
    STATUS_TRUNCATED,
    GodotConnectionError,
)
from python_trainer.envs.spaces import (
    ActionCodec, ObsCodec, agent_policy_names, packed_floats, policies_from_env_info, reward_problem,
)

# ---------------------------------------------------------------------------------------------- the env
class GodotVecEnv(gym.vector.VectorEnv, GroupedVecEnv):
    """A gymnasium VectorEnv over ``options.num_instances`` instances of ``game``, each simulating the agents its
    env_info reports (``options.agents_per_instance`` asks for a number; see `launcher.LaunchOptions`)."""

    metadata = {"autoreset_mode": "same-step", "render_modes": []}

    def __init__(self, game: GodotGame, options: LaunchOptions = LaunchOptions()):
        self.closed = True  # until the instances are up (VectorEnv.__del__ checks it)
        # A game that keeps raising script errors (launcher.SCRIPT_ERRORS_TO_STOP) ends the next step with a
        # GameBugError unless this is set; its first one is reported either way.
        self.allow_script_errors = bool(options.allow_script_errors)
        self.game = game
        self.env_id = game.env
        self.num_instances = int(options.num_instances)
        self.launcher = InstanceLauncher(game, options)
        self.launcher.start()
        self.closed = False
        try:
            info = self.launcher.instances[0].env_info
            self.env_info = info
            # The launcher told the dialect from the game's first messages (protocol.dialect); a game made with
            # godot_rl_agents' plugin (GODOT_RL) speaks JSON, has no "info" and reports done = terminated.
            self.dialect = self.launcher.instances[0].dialect
            self.policies = policies_from_env_info(info)
            for inst in self.launcher.instances[1:]:
                self._check_same_spaces(inst)
        except BaseException:
            self.close()
            raise
        # Each instance's agents take a contiguous block of the batch, in instance order.
        self.agent_counts = [inst.env_info["n_agents"] for inst in self.launcher.instances]
        self._offsets = np.concatenate([[0], np.cumsum(self.agent_counts)]).tolist()
        self.num_envs = int(self._offsets[-1])
        self.agents_per_instance = self.agent_counts[0] if len(set(self.agent_counts)) == 1 else None
        self.max_episode_steps = info.get("max_episode_steps")
        self._set_spaces()
        self.metadata = dict(self.metadata)
        self._obs = np.zeros((self.num_envs, self.obs_dim), dtype=np.float32)
        self._seed = options.seed
        self._needs_reset = True
        self.episode_stats = EpisodeStatistics(self.num_envs)
        # each agent's environment parameters as set_env_params left them (a restarted instance gets them again)
        self.agent_env_params: list = [{} for _ in range(self.num_envs)]
        # Pipelined rollouts: two groups of whole instances (the first half and the rest), one with one instance.
        half = (self.num_instances + 1) // 2
        self._group_instances = [range(0, half), range(half, self.num_instances)][: 2 if self.num_instances > 1 else 1]
        self.groups = [slice(self._offsets[r.start], self._offsets[r.stop]) for r in self._group_instances]
        self._pending: dict = {}  # group -> {instance: send error} for the groups step_async sent actions to

    # ---------------------------------------------------------------- what the game was given
    @property
    def game_settings(self) -> dict:
        """What the instances were given on their command lines (run folders record it) and the dialect they speak."""
        given = self.launcher.instance
        return {"dialect": self.dialect, "env_seed": [inst.seed for inst in self.launcher.instances],
                "speedup": given.speedup, "action_repeat": int(given.action_repeat), "agents": self.agent_counts}

    def startup_line(self) -> str:
        """One line: the game, its dialect, and what its instances were given (and, for a game made with
        godot_rl_agents' plugin, what its own log says it applied)."""
        g = self.game_settings
        seeds = g["env_seed"]
        line = (f"game {self.env_id}: {self.num_instances} instance(s) x {self.agent_counts[0]} agents, speaking "
                f"{DIALECT_NAMES[self.dialect]}; given --env_seed={seeds[0]}{f'..{seeds[-1]}' if len(seeds) > 1 else ''}"
                f" --speedup={g['speedup']:g} --action_repeat={g['action_repeat']}")
        if self.dialect == GODOT_RL:
            applied = next((ln.strip() for ln in self.launcher.instances[0].log_tail(200).splitlines()
                            if ln.startswith(PLUGIN_PHYSICS_LINE)), None)  # fmt: skip
            if applied:
                line += f" (its log: {applied!r}: physics ticks/s, time scale, speedup taken)"
        return line

    # ---------------------------------------------------------------- several policies
    # A game whose agents carry several policy names (agent_policy_names) reports them in ``policies``, and each
    # env's policy (an index into it) in ``env_policy``. When the policies' spaces are the same, the env works as for
    # one policy. When they differ (``mixed``), an observation is padded with zeros to the widest policy's size
    # (``single_observation_space``), actions are a dict {policy name: that policy's batched actions, its envs in
    # batch order} (``single_action_space`` is the Dict of each policy's space), and steps go as JSON.
    def _set_spaces(self) -> None:
        first = self.policies[0]
        self.mixed = any((p.observation_space, p.action_space) != (first.observation_space, first.action_space)
                         for p in self.policies)  # fmt: skip
        names = [p.name for p in self.policies]
        self.env_policy = np.concatenate([
            [names.index(name) for name in agent_policy_names(inst.env_info)] for inst in self.launcher.instances
        ]).astype(np.int64)  # fmt: skip
        self._obs_codecs = [ObsCodec(p.obs_layout) for p in self.policies]
        self._act_codecs = [ActionCodec(p.action_space, p.act_kind, p.act_layout) for p in self.policies]
        self._rows_cache: dict = {}
        if not self.mixed:
            self.single_observation_space, self.single_action_space = first.observation_space, first.action_space
            self.obs_dim = first.observation_space.shape[0]
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
            self.action_space = batch_space(self.single_action_space, self.num_envs)
            return
        self.obs_dim = max(p.observation_space.shape[0] for p in self.policies)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Dict({p.name: p.action_space for p in self.policies})
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.spaces.Dict({
            p.name: batch_space(p.action_space, int((self.env_policy == k).sum())) for k, p in enumerate(self.policies)
        })  # fmt: skip

    def _rows(self, part: slice) -> list:
        """[(policy index, its envs' positions within ``part``)] for the envs of ``part``."""
        key = (part.start, part.stop)
        if key not in self._rows_cache:
            mine = self.env_policy[part]
            self._rows_cache[key] = [(k, np.flatnonzero(mine == k)) for k in range(len(self.policies))]
        return self._rows_cache[key]

    def _checked(self, actions, part: slice):
        """The actions of ``part``'s envs, checked (ActionCodec.checked); mixed: {policy index: its checked rows}."""
        n = part.stop - part.start
        if not self.mixed:
            return self._act_codecs[0].checked(actions, n)
        names = [p.name for p in self.policies]
        if not isinstance(actions, dict) or sorted(actions) != sorted(names):
            got = sorted(map(str, actions)) if isinstance(actions, dict) else type(actions).__name__
            raise ValueError(f"{self.env_id}'s policies have different spaces: actions must be a dict {{policy name: "
                             f"that policy's batched actions}} with the keys {names}, got {got}")  # fmt: skip
        return {k: self._act_codecs[k].checked(actions[names[k]], rows.size) for k, rows in self._rows(part)}

    def _mixed_json(self, a: dict, part: slice) -> list:
        """godot-rl's per-agent action dicts for ``part``'s envs from `_checked`'s dict."""
        per_agent = [None] * (part.stop - part.start)
        for k, rows in self._rows(part):
            for row, action in zip(rows.tolist(), self._act_codecs[k].json(a[k])):
                per_agent[row] = action
        return per_agent

    def _reply_obs(self, msg: dict, i: int, label: str) -> np.ndarray:
        """Instance i's observations in a step or reset reply: (agents, obs_dim) float32 (mixed: zero-padded)."""
        agents = self.agent_counts[i]
        if not self.mixed:
            return self._obs_codecs[0].from_reply(msg, agents, label)
        out = np.zeros((agents, self.obs_dim), np.float32)
        rows = self._rows(self._slice(i))
        dims = np.zeros(agents, np.int64)
        for k, r in rows:
            dims[r] = self._obs_codecs[k].dim
        if "obs_f32" in msg:
            flat = packed_floats(msg["obs_f32"], label)
            if flat.size != dims.sum():
                raise GameBugError(f"{label}: {flat.size} packed observation values, expected {int(dims.sum())} (the "
                                   "sizes its agents declared, get_obs_space()); an agent's observation must keep the "
                                   "size it declared")  # fmt: skip
            ends = np.cumsum(dims)
            for j in range(agents):
                out[j, : dims[j]] = flat[ends[j] - dims[j] : ends[j]]
            return out
        obs_list = msg["obs"]
        if not isinstance(obs_list, list) or len(obs_list) != agents:
            raise GameBugError(f"{label}: observations for {len(obs_list) if isinstance(obs_list, list) else '?'} "
                               f"agents, expected {agents}")  # fmt: skip
        for k, r in rows:
            out[r, : dims[r[0]] if r.size else 0] = self._obs_codecs[k].flat([obs_list[j] for j in r.tolist()], label)
        return out

    def _one_obs(self, obs: dict, i: int, j: int) -> np.ndarray:
        """Agent j of instance i's observation dict (a terminal observation) as a row of obs_dim (mixed: padded)."""
        if not self.mixed:
            return self._obs_codecs[0].one(obs)
        k = int(self.env_policy[self._offsets[i] + j])
        row = np.zeros(self.obs_dim, np.float32)
        row[: self._obs_codecs[k].dim] = self._obs_codecs[k].one(obs)
        return row

    # ---------------------------------------------------------------- helpers
    def _check_same_spaces(self, inst) -> None:
        theirs = [(p.name, p.observation_space, p.action_space) for p in policies_from_env_info(inst.env_info)]
        ours = [(p.name, p.observation_space, p.action_space) for p in self.policies]
        if theirs != ours:
            def say(ps):
                return "; ".join(f"{name}: {o} / {a}" for name, o, a in ps)

            raise GameError(
                f"{inst.label()} reports the policies and spaces {say(theirs)}, unlike instance 0's {say(ours)}: every "
                "instance of a game must have the same policies, observation and action spaces (does the game build "
                "them from a random or per-instance setting?)"
            )
        if inst.dialect != self.dialect:
            raise GameError(f"{inst.label()} speaks {DIALECT_NAMES[inst.dialect]}, unlike instance 0 "
                            f"({DIALECT_NAMES[self.dialect]}): every instance must run the same export")
        counts = getattr(self, "agent_counts", None)
        if counts is not None and inst.env_info["n_agents"] != counts[inst.index]:
            raise GameError(
                f"{inst.label()} came back with {inst.env_info['n_agents']} agents after a restart, not "
                f"{counts[inst.index]}: the number of agents an instance simulates must not change"
            )

    def _slice(self, i: int) -> slice:
        return slice(self._offsets[i], self._offsets[i + 1])

    def _restart(self, i: int, error: BaseException) -> np.ndarray:
        """Restart instance i (raises past the budget), reset it and return its agents' first observations."""
        while True:
            inst = self.launcher.restart(i, error)
            try:
                self._check_same_spaces(inst)
                settings = self.agent_env_params[self._slice(i)]
                if any(settings):  # a new process starts with the game's defaults
                    inst.conn.request("env_params", agent_values=settings)
                inst.conn.reset_send()
                return self._reset_obs(i)
            except GodotConnectionError as e:
                error = e

    def _reset_obs(self, i: int) -> np.ndarray:
        """Instance i's reply to "reset": its agents' first observations, packed when the handshake asked for it
        (float32-exact, where JSON keeps 6 digits) or JSON."""
        inst = self.launcher.instances[i]
        return self._reply_obs(inst.conn.recv(expect="reset"), i, inst.label())

    # ---------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Reset every agent of every instance. The game's seed is fixed at launch (``--env_seed=seed+i``);
        ``seed`` here only seeds the action space's sampler."""
        if self.closed:
            raise RuntimeError("this GodotVecEnv is closed")
        if seed is not None:
            self.action_space.seed(seed)
        elif self._seed is not None:
            self.action_space.seed(self._seed)
            self._seed = None
        for group in list(self._pending):  # replies still on the way (e.g. a rollout that stopped halfway)
            self.step_wait(group)
        insts = self.launcher.instances
        failed = {}
        for i, inst in enumerate(insts):
            try:
                inst.conn.reset_send()
            except GodotConnectionError as e:
                failed[i] = e
        for i, inst in enumerate(insts):
            if i in failed:
                continue
            try:
                self._obs[self._slice(i)] = self._reset_obs(i)
            except GodotConnectionError as e:
                failed[i] = e
        for i, e in failed.items():
            self._obs[self._slice(i)] = self._restart(i, e)
        self.episode_stats.reset()
        self._needs_reset = False
        return self._obs.copy(), {}

    def step(self, actions):
        """Step every instance: send to all of them first (they simulate in parallel), then read each reply."""
        self._check_steppable()
        if self._pending:
            raise RuntimeError(f"group(s) {sorted(self._pending)} were sent actions with step_async: step_wait for "
                               "them before step()")  # fmt: skip
        everyone = range(self.num_instances)
        failed = self._send(self._checked(actions, slice(0, self.num_envs)), everyone)
        return self._receive(everyone, failed)

    # ---------------------------------------------------------------- groups: pipelined rollouts
    # ``groups``: the envs (a contiguous slice of the batch) of each group of whole instances. With 2 or more
    # instances there are two groups, the first half of the instances and the rest; a trainer can send one group's
    # actions (step_async) and compute the other group's while the first simulates, then collect (step_wait).
    def step_async(self, actions, group: int) -> None:
        """Send the actions of ``group``'s envs (shape: the group's size first) to its instances; returns at once."""
        self._check_steppable()
        if not isinstance(group, (int, np.integer)) or isinstance(group, bool) or not 0 <= group < len(self.groups):
            raise ValueError(f"step_async: group {group!r} does not exist; this env's groups are "
                             f"{list(range(len(self.groups)))} (envs.groups)")  # fmt: skip
        if group in self._pending:
            raise RuntimeError(f"group {group} already has actions in flight: step_wait({group}) first")
        s = self.groups[group]
        a = self._checked(actions, s)
        self._pending[group] = self._send(a, self._group_instances[group])

    def step_wait(self, group: int):
        """(obs, reward, terminated, truncated, infos) of ``group``'s envs for the actions step_async sent, with
        step()'s conventions (arrays of the group's size; an instance that crashed is restarted)."""
        self._check_steppable()
        if group not in self._pending:
            raise RuntimeError(f"step_wait({group}) without a step_async for group {group}")
        failed = self._pending.pop(group)
        return self._receive(self._group_instances[group], failed)

    def _check_steppable(self) -> None:
        if self.closed:
            raise RuntimeError("this GodotVecEnv is closed")
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")

    def _send(self, a: np.ndarray, insts: range) -> dict:
        """Send each instance in ``insts`` its rows of ``a`` (checked actions of those instances' envs, in order);
        returns {instance: error} for the ones that could not be reached."""
        base = self._offsets[insts.start]
        failed = {}
        per_agent = None
        for i in insts:
            inst = self.launcher.instances[i]
            s = slice(self._offsets[i] - base, self._offsets[i + 1] - base)
            try:
                # binary step exchange when the instance's env_info says so (godot-rl's plugin never does)
                if not self.mixed and inst.env_info.get("step_encoding") == BINARY_STEP_ENCODING:
                    inst.conn.send_bytes(self._act_codecs[0].packed(a, s))
                else:
                    if per_agent is None:
                        part = slice(base, self._offsets[insts.stop])
                        per_agent = self._mixed_json(a, part) if self.mixed else self._act_codecs[0].json(a)
                    inst.conn.step_send(per_agent[s])
            except GodotConnectionError as e:
                failed[i] = e
        return failed

    def _receive(self, insts: range, failed: dict):
        """Read the step replies of ``insts`` (contiguous instances; ``failed``: those _send could not reach) and
        return step()'s tuple for their envs, restarting instances that failed."""
        part = slice(self._offsets[insts.start], self._offsets[insts.stop])
        base, n = part.start, part.stop - part.start
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        final_obs = final_info = None
        new_obs = self._obs[part].copy()
        for i in insts:
            if i in failed:
                continue
            inst = self.launcher.instances[i]
            s = slice(self._offsets[i] - base, self._offsets[i + 1] - base)
            agents = s.stop - s.start
            if not self.mixed and inst.env_info.get("step_encoding") == BINARY_STEP_ENCODING:
                try:
                    obs, rew, status, term_obs, infos = inst.conn.step_recv_packed(agents, self.obs_dim)
                except GodotConnectionError as e:
                    failed[i] = e
                    continue
                new_obs[s] = obs
                rewards[s] = rew
                if term_obs.shape[0]:
                    if final_obs is None:
                        final_obs = np.zeros((n, self.obs_dim), dtype=np.float32)
                        final_info = np.full(n, None, dtype=object)
                    ended = np.flatnonzero(status)
                    trunc = status[ended] == STATUS_TRUNCATED
                    truncated[s.start + ended] = trunc
                    terminated[s.start + ended] = ~trunc
                    final_obs[s.start + ended] = term_obs
                    for j in ended.tolist():
                        final_info[s.start + j] = dict(infos.get(j) or {})  # the game's get_info() of the ended episode
                continue
            try:
                msg = inst.conn.step_recv()
            except GodotConnectionError as e:
                failed[i] = e
                continue
            label = inst.label()
            new_obs[s] = self._reply_obs(msg, i, label)
            try:
                rewards[s] = np.asarray(msg["reward"], dtype=np.float64)
            except (TypeError, ValueError):
                raise GameBugError(reward_problem(msg["reward"], label)) from None
            done = np.asarray(msg["done"], dtype=np.bool_)
            if done.shape != (agents,) or rewards[s].shape != (agents,):
                raise ValueError(f"{label}: step reply for {done.shape} agents, expected {agents}")
            if done.any():
                # GODOT_RL (godot_rl_agents' plugin): no info, so done = terminated and final_obs is the observation
                # that came with it (see protocol.py)
                info = (self.dialect != GODOT_RL and msg.get("info")) or [{}] * agents
                if final_obs is None:
                    final_obs = np.zeros((n, self.obs_dim), dtype=np.float32)
                    final_info = np.full(n, None, dtype=object)
                for j in np.flatnonzero(done).tolist():
                    agent_info = dict(info[j] or {})
                    trunc = bool(agent_info.pop("TimeLimit.truncated", False))
                    truncated[s.start + j] = trunc
                    terminated[s.start + j] = not trunc
                    term_obs = agent_info.pop("terminal_observation", None)
                    final_obs[s.start + j] = self._one_obs(term_obs, i, j) if term_obs is not None else new_obs[s.start + j]
                    final_info[s.start + j] = agent_info  # the game's get_info() of the ended episode
        for i, e in failed.items():
            s = slice(self._offsets[i] - base, self._offsets[i + 1] - base)
            if final_obs is None:
                final_obs = np.zeros((n, self.obs_dim), dtype=np.float32)
                final_info = np.full(n, None, dtype=object)
            final_obs[s] = self._obs[self._slice(i)]  # the last observation we know of
            final_info[s] = [{} for _ in range(s.stop - s.start)]
            truncated[s] = True
            terminated[s] = False
            rewards[s] = 0.0
            new_obs[s] = self._restart(i, e)
        infos: dict = {}
        if final_obs is not None:
            infos["final_obs"] = final_obs
            infos["_final_obs"] = terminated | truncated
            infos["final_info"] = final_info
            infos["_final_info"] = terminated | truncated
        if failed:
            restarted = np.zeros(n, dtype=np.bool_)
            for i in failed:
                restarted[self._offsets[i] - base : self._offsets[i + 1] - base] = True
            infos["instance_restarted"] = restarted
            infos["_instance_restarted"] = restarted.copy()
        self._obs[part] = new_obs  # a copy: what we return is the caller's
        if not self.allow_script_errors:
            broken = self.launcher.script_errors()
            if broken is not None:
                raise GameBugError(f"{broken}: fix it, or train on regardless with --allow-script-errors")
        infos = self.episode_stats.update(rewards, terminated, truncated, infos, part)
        return new_obs, rewards, terminated, truncated, infos

    def call(self, method: str, *args, agent_args: Optional[Sequence] = None) -> list:
        """godot-rl's "call" message on every instance; returns the concatenated per-agent results. Our extension:
        ``args`` go to every agent's method; ``agent_args`` holds one list of arguments per env (agent) instead."""
        if agent_args is not None and len(agent_args) != self.num_envs:
            raise ValueError(f"call({method!r}): agent_args needs one list of arguments per env ({self.num_envs}), "
                             f"got {len(agent_args)}")
        out = []
        for i, inst in enumerate(self.launcher.instances):
            per_agent = None if agent_args is None else agent_args[self._slice(i)]
            out.extend(inst.conn.call(method, args=args or None, agent_args=per_agent) or [])
        return out

    def set_env_params(self, values: Optional[dict] = None, agent_values: Optional[Sequence[dict]] = None) -> None:
        """Our "env_params" message to every instance, from each agent's next episode (docs/env_params.md): ``values``
        (name -> a number, or {"uniform": [lo, hi]} / {"gaussian": [mean, std]}) for every agent, then
        ``agent_values``, one such dict per env (agent) of the batch. Between steps only (no actions in flight); the
        values must fit what the game declares (env_info's "env_params")."""
        if self._pending:
            raise RuntimeError(f"set_env_params: group(s) {sorted(self._pending)} have actions in flight: step_wait first")
        if agent_values is not None and len(agent_values) != self.num_envs:
            raise ValueError(f"set_env_params: agent_values needs one dict per env ({self.num_envs}), got "
                             f"{len(agent_values)}")
        if (values or agent_values) and self.dialect == GODOT_RL:
            raise GameError(f"{self.env_id} is a game made with godot_rl_agents' plugin, which has no environment "
                            "parameters")
        for j, settings in enumerate(self.agent_env_params):
            settings.update(values or {})
            settings.update(agent_values[j] if agent_values is not None else {})
        for i, inst in enumerate(self.launcher.instances):
            message = {"values": dict(values or {})}
            if agent_values is not None:
                message["agent_values"] = [dict(v) for v in agent_values[self._slice(i)]]
            inst.conn.request("env_params", **message)

    def close_extras(self, **kwargs) -> None:
        self.launcher.close()

    def close(self, **kwargs) -> None:
        if getattr(self, "closed", True) and getattr(self, "launcher", None) is not None:
            self.launcher.close()  # e.g. __init__ failed halfway
            return
        super().close(**kwargs)

    def __repr__(self) -> str:
        return (f"GodotVecEnv({self.env_id!r}, num_instances={self.num_instances}, "
                f"agents_per_instance={self.agents_per_instance})")


# ---------------------------------------------------------------------------------------------- factory
def make_vec_env(env_id: str | GodotGame | None = None, num_envs: Optional[int] = None, seed: int = 0, *,
                 env_path=None, video_dir=None, **godot_options):
    """A VectorEnv for a Godot game (`GodotVecEnv`) or a gymnasium id (`gym_env.GymVecEnv`).

    ``env_path``: an export of any Godot 3 project that uses the rl_sync addon (``env_id`` None: its default game);
    without it, a gymnasium id, else a game in this repository's export (`game.resolve_env` decides). For a Godot
    game ``godot_options`` are `launcher.LaunchOptions`' (num_instances, agents_per_instance, headless, speedup, ...),
    ``num_envs`` (when given) must come out as the agents the instances report, and ``agents_per_instance``
    defaults to ``num_envs / num_instances`` or, without either, to the game's own choice. For a gymnasium id the
    Godot options are ignored and ``video_dir`` records the first env's episodes.
    """
    binary = godot_options.pop("binary", None)
    unknown = set(godot_options) - {f.name for f in dataclasses.fields(LaunchOptions)}
    if unknown:
        raise TypeError(f"make_vec_env() got unexpected options {sorted(unknown)} for {env_id!r}")
    if isinstance(env_id, GodotGame):
        game = env_id
    elif binary is not None:
        game = godot_game(env_id, program=binary)
    else:
        game = resolve_env(env_id, env_path, godot_options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S))
    if isinstance(game, str):
        from python_trainer.envs.gym_env import make_gym_vec_env

        return make_gym_vec_env(game, num_envs=num_envs, seed=seed, video_dir=video_dir)
    if video_dir is not None:
        raise TypeError(f"video_dir records a gymnasium env's episodes; {game.env} is a Godot game (its videos come "
                        "from the windowed export: playback.record)")
    num_instances = godot_options.get("num_instances", 1)
    check_instance_options(num_instances, godot_options.get("agents_per_instance"))
    godot_options["agents_per_instance"] = agents_for(num_envs, num_instances, godot_options.get("agents_per_instance"))
    env = GodotVecEnv(game, LaunchOptions(seed=seed, **godot_options))
    if num_envs is not None and env.num_envs != num_envs:
        counts = env.agent_counts
        env.close()
        raise GameError(
            f"num_envs={num_envs} was asked for, but {game.env} simulates {counts[0]} agents per instance whatever "
            f"--agents says ({num_instances} instances: {sum(counts)} envs): drop num_envs, or use "
            f"{sum(counts)}"
        )
    return env
