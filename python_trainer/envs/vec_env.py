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
import time
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

from python_trainer.base.errors import say
from python_trainer.base.flags import (
    DEFAULT_CONNECT_TIMEOUT_S, SLOW_STEP_S, agents_for, check_instance_options, slow_step_warning,
)
from python_trainer.base.contract import PLUGIN_PHYSICS_LINE
from python_trainer.envs.game import GameBugError, GameError, GodotGame, godot_game, resolve_env
from python_trainer.envs.editor import EditorLauncher, EditorPlay
from python_trainer.envs.frame_stack import FrameStack
from python_trainer.envs.grouped_env import GroupedVecEnv
from python_trainer.envs.gym_env import EpisodeStatistics
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING,
    DIALECT_NAMES,
    GODOT_RL,
    STATUS_TRUNCATED,
    GodotConnectionError,
    MessageTooLargeError,
)
from python_trainer.envs.policy_batch import PolicyBatch
from python_trainer.envs.spaces import (
    DECISION_FRAMES_KEY, agent_policy_names, policies_from_env_info, reward_problem,
)
from python_trainer.envs.step_batch import StepBatch

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
        # the game the Godot editor runs (train --editor) is connected already: it has a launcher of its own
        self.launcher = (EditorLauncher if isinstance(game.export, EditorPlay) else InstanceLauncher)(game, options)
        self.launcher.start()
        self.closed = False
        try:
            info = self.launcher.instances[0].env_info
            self.env_info = info
            # The launcher told the dialect from the game's first messages (protocol.dialect); a game made with
            # godot_rl_agents' plugin (GODOT_RL) speaks JSON, has no "info" and reports done = terminated.
            self.dialect = self.launcher.instances[0].dialect
            self.policies = policies_from_env_info(info)
            self.copies = options.copies  # of the scene in each instance (the launcher checked that they run)
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
        self._sent_at, self._said_slow = {}, False  # first instance -> when its actions went; the slow step said

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
        if isinstance(self.launcher, EditorLauncher):  # the editor gives its game no flags
            return f"game {self.env_id}: run by the Godot editor, {self.agent_counts[0]} agents, at its own settings"
        g = self.game_settings
        seeds = g["env_seed"]
        copies = f" ({self.copies} copies of its scene each)" if self.copies > 1 else ""
        line = (f"game {self.env_id}: {self.num_instances} instance(s) x {self.agent_counts[0]} agents{copies}, "
                "speaking "
                f"{DIALECT_NAMES[self.dialect]}; given --env_seed={seeds[0]}{f'..{seeds[-1]}' if len(seeds) > 1 else ''}"
                f" --speedup={g['speedup']:g} --action_repeat={g['action_repeat']}")
        frames = (self.launcher.instances[0].env_info or {}).get(DECISION_FRAMES_KEY)
        if frames is not None:  # the game's own frames_per_decision times --action_repeat
            line += f"; it decides every {int(frames)} physics frame{'s' if frames != 1 else ''}"
        if self.dialect == GODOT_RL:
            applied = next((ln.strip() for ln in self.launcher.instances[0].log_tail(200).splitlines()
                            if ln.startswith(PLUGIN_PHYSICS_LINE)), None)
            if applied:
                line += f" (its log: {applied!r}: physics ticks/s, time scale, speedup taken)"
        return line

    # ---------------------------------------------------------------- several policies
    def _set_spaces(self) -> None:
        """Each env's policy and the batch's spaces (`policy_batch.PolicyBatch`: one policy, or several)."""
        names = [p.name for p in self.policies]
        env_policy = np.concatenate([
            [names.index(name) for name in agent_policy_names(inst.env_info)] for inst in self.launcher.instances
        ]).astype(np.int64)
        self.batch = batch = PolicyBatch(self.policies, env_policy, self.env_id)
        self.env_policy, self.mixed, self.obs_dim = env_policy, batch.mixed, batch.obs_dim
        self.image_layout = batch.image  # where the camera image sits in each row (envs/images.py; None: no image)
        self.single_observation_space, self.observation_space = batch.single_observation_space, batch.observation_space
        self.single_action_space, self.action_space = batch.single_action_space, batch.action_space

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
        if isinstance(error, MessageTooLargeError):  # a restart would send the same again
            raise GameBugError(str(error).split("\n", 1)[0]) from None
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

    def restart(self, i: int, error: BaseException) -> slice:  # --in-engine's lost fragment: the agents' slice
        self._obs[self._slice(i)] = self._restart(i, error)
        return self._slice(i)

    def _reset_obs(self, i: int) -> np.ndarray:
        """Instance i's reply to "reset": its agents' first observations, packed when the handshake asked for it
        (float32-exact, where JSON keeps 6 digits) or JSON."""
        inst = self.launcher.instances[i]
        return self.batch.reply_obs(inst.conn.recv(expect="reset"), self._slice(i), inst.label())

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
                               "them before step()")
        everyone = range(self.num_instances)
        failed = self._send(self.batch.checked(actions, slice(0, self.num_envs)), everyone)
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
                             f"{list(range(len(self.groups)))} (envs.groups)")
        if group in self._pending:
            raise RuntimeError(f"group {group} already has actions in flight: step_wait({group}) first")
        s = self.groups[group]
        a = self.batch.checked(actions, s)
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
        self._sent_at[insts.start] = time.monotonic()
        for i in insts:
            inst = self.launcher.instances[i]
            s = slice(self._offsets[i] - base, self._offsets[i + 1] - base)
            try:
                # binary step exchange when the instance's env_info says so (godot-rl's plugin never does)
                if not self.mixed and inst.env_info.get("step_encoding") == BINARY_STEP_ENCODING:
                    inst.conn.send_bytes(self.batch.packed(a, s))
                else:
                    if per_agent is None:
                        per_agent = self.batch.json(a, slice(base, self._offsets[insts.stop]))
                    inst.conn.step_send(per_agent[s])
            except GodotConnectionError as e:
                failed[i] = e
        return failed

    def _receive(self, insts: range, failed: dict):
        """Read the step replies of ``insts`` (contiguous instances; ``failed``: those _send could not reach) and
        return step()'s tuple for their envs, restarting instances that failed."""
        part = slice(self._offsets[insts.start], self._offsets[insts.stop])
        base = part.start
        batch = StepBatch(self._obs[part].copy())
        for i in insts:
            if i in failed:
                continue
            s = slice(self._offsets[i] - base, self._offsets[i + 1] - base)
            try:
                if not self.mixed and self.launcher.instances[i].env_info.get("step_encoding") == BINARY_STEP_ENCODING:
                    self._read_packed_reply(i, s, batch)
                else:
                    self._read_json_reply(i, s, batch)
            except GodotConnectionError as e:
                failed[i] = e
        for i, e in failed.items():
            self._end_failed(i, slice(self._offsets[i] - base, self._offsets[i + 1] - base), e, batch)
        infos = batch.infos()
        if failed:
            restarted = np.zeros(part.stop - part.start, dtype=np.bool_)
            for i in failed:
                restarted[self._offsets[i] - base : self._offsets[i + 1] - base] = True
            infos["instance_restarted"] = restarted
            infos["_instance_restarted"] = restarted.copy()
        self._obs[part] = batch.obs  # a copy: what we return is the caller's
        self.check_script_errors()
        infos = self.episode_stats.update(batch.rewards, batch.terminated, batch.truncated, infos, part)
        took = time.monotonic() - self._sent_at.pop(insts.start, time.monotonic())
        if took >= SLOW_STEP_S and not (failed or self._said_slow):  # said once: a slow run does not go silent
            self._said_slow = True
            (getattr(self.launcher, "report", None) or say)(slow_step_warning(self.env_id, took, self.launcher.instance))
        return batch.obs, batch.rewards, batch.terminated, batch.truncated, infos

    def _read_packed_reply(self, i: int, s: slice, batch: "StepBatch") -> None:
        """Instance i's packed step reply (the binary step exchange) into ``batch``'s rows ``s``."""
        obs, rewards, status, term_obs, infos = self.batch.read_packed(self.launcher.instances[i].conn, s.stop - s.start)
        batch.obs[s] = obs
        batch.rewards[s] = rewards
        if term_obs.shape[0]:
            ended = np.flatnonzero(status)
            # each ended episode's last observation and the game's get_info() of it
            batch.end(s.start + ended, status[ended] == STATUS_TRUNCATED, term_obs,
                      [dict(infos.get(j) or {}) for j in ended.tolist()])

    def _read_json_reply(self, i: int, s: slice, batch: "StepBatch") -> None:
        """Instance i's JSON step reply (godot-rl's) into ``batch``'s rows ``s``; a game bug in it raises."""
        inst = self.launcher.instances[i]
        msg = inst.conn.step_recv()
        label, agents = inst.label(), s.stop - s.start
        batch.obs[s] = self.batch.reply_obs(msg, self._slice(i), label)
        try:
            batch.rewards[s] = np.asarray(msg["reward"], dtype=np.float64)
        except (TypeError, ValueError):
            raise GameBugError(reward_problem(msg["reward"], label)) from None
        done = np.asarray(msg["done"], dtype=np.bool_)
        if done.shape != (agents,) or batch.rewards[s].shape != (agents,):
            raise ValueError(f"{label}: step reply for {done.shape} agents, expected {agents}")
        if not done.any():
            return
        # GODOT_RL (godot_rl_agents' plugin): no info, so done = terminated and final_obs is the observation that came
        # with it (see protocol.py)
        info = (self.dialect != GODOT_RL and msg.get("info")) or [{}] * agents
        for j in np.flatnonzero(done).tolist():
            agent_info = dict(info[j] or {})
            truncated = bool(agent_info.pop("TimeLimit.truncated", False))
            term_obs = agent_info.pop("terminal_observation", None)
            row = s.start + j
            final_obs = batch.obs[row] if term_obs is None else self.batch.one_obs(term_obs, self._offsets[i] + j)
            batch.end(row, truncated, final_obs, agent_info)  # agent_info: the game's get_info() of the ended episode

    def _end_failed(self, i: int, s: slice, error: BaseException, batch: "StepBatch") -> None:
        """Instance i crashed or went silent: its agents' episodes end truncated, their final_obs the last observation
        we know of; it is restarted and its agents' first observations come next."""
        batch.end(s, True, self._obs[self._slice(i)], [{} for _ in range(s.stop - s.start)])
        batch.rewards[s] = 0.0
        batch.obs[s] = self._restart(i, error)

    def check_script_errors(self) -> None:
        """A GameBugError once an instance keeps raising script errors, unless allow_script_errors."""
        if not self.allow_script_errors:
            broken = self.launcher.script_errors()
            if broken is not None:
                raise GameBugError(f"{broken}: fix it, or train on regardless with --allow-script-errors")

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
    Godot options are ignored and ``video_dir`` records the first env's episodes. ``frame_stack`` K > 1 stacks a
    camera game's K newest frames (frame_stack.FrameStack; a GameError for a game without a camera).
    """
    binary = godot_options.pop("binary", None)
    frame_stack = int(godot_options.pop("frame_stack", 1))
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

        if frame_stack != 1:
            raise GameError(f"--frame-stack {frame_stack} stacks a Godot game's camera frames; {game} is a gymnasium "
                            "id: drop --frame-stack")
        return make_gym_vec_env(game, num_envs=num_envs, seed=seed, video_dir=video_dir)
    if video_dir is not None:
        raise TypeError(f"video_dir records a gymnasium env's episodes; {game.env} is a Godot game (its videos come "
                        "from the windowed export: engine.recording.record)")
    num_instances = godot_options.get("num_instances", 1)
    check_instance_options(num_instances, godot_options.get("agents_per_instance"))
    godot_options["agents_per_instance"] = agents_for(num_envs, num_instances, godot_options.get("agents_per_instance"),
                                                      copies=godot_options.get("copies", 1))
    env = GodotVecEnv(game, LaunchOptions(seed=seed, **godot_options))
    if num_envs is not None and env.num_envs != num_envs:
        counts = env.agent_counts
        env.close()
        raise GameError(
            f"num_envs={num_envs} was asked for, but {game.env} simulates {counts[0]} agents per instance whatever "
            f"--agents says ({num_instances} instances: {sum(counts)} envs): drop num_envs, or use "
            f"{sum(counts)}"
        )
    if frame_stack == 1:
        return env
    try:
        return FrameStack(env, frame_stack)
    except BaseException:
        env.close()
        raise
