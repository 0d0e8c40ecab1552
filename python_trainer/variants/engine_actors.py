"""In-engine actors (`godot-ppo train --in-engine`): each game instance runs the current policy itself, samples its own
actions and sends whole fragments of --num-steps decision steps; the trainer takes no part in the steps.

One more implementation of ppo.py's rollout slot (rollout.Rollouts), beside LocalRollouts: `collect` exports the
agent as a policy file's content (the first time the file itself, which each instance loads with the "actors"
message: envs/fragment_wire.py), sends its weights to every instance as one binary float32 message, asks each for a
fragment and waits for all (each read waits --step-timeout from the last message heard, the games' heartbeats
included), then computes the behaviour log-probs and the values in one batched forward pass with the weights it sent
and fills the buffer as collect_rollout does: observations normalised with the statistics the games were sent (the
normaliser then updated from the raw observations), rewards scaled step by step, V(final obs) of truncated episodes,
the episodes' returns and lengths from the fragments' headers. Synchronous, fragment k comes from update k's weights,
exactly on-policy; with --async the next fragments are asked for as soon as a collect has its own, so the games
collect during the update with the weights before it (a policy lag of 1, the behaviour agent kept as a copy). A game
killed or silent mid-fragment is restarted as the vector env restarts one (its partial
fragment dropped) and re-enters actor mode; a malformed fragment is the game's bug, said in one line.

`decide` is the one rule that picks the path when neither --in-engine nor --no-in-engine is given.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import numpy as np
import torch
import tyro

from python_trainer.base.combinations import in_engine_name, in_engine_refusal
from python_trainer.base.errors import UserError
from python_trainer.envs import fragment_wire as wire
from python_trainer.envs.protocol import GODOT_RL, GodotConnectionError
from python_trainer.rollout import LocalRollouts, NonFiniteEnvData, RolloutBuffer, finite_as_float32

MAX_AGENTS_IN_ENGINE = 4  # the default runs in-engine when every instance has at most this many agents
POLICY_FILE = "actors_policy.json"  # in the run folder: what the instances load when they enter actor mode


@dataclass
class EngineActorArgs:
    in_engine: Annotated[Optional[bool], tyro.conf.arg(help_behavior_hint=(
        f"(default: auto = on when every instance has at most {MAX_AGENTS_IN_ENGINE} agents and every variant asked "
        "for runs in the engine)"))] = None
    """Godot games: each instance runs the policy itself and sends whole fragments of --num-steps steps
    (--in-engine / --no-in-engine; the start-up line says which path runs and why)"""


class InEngineRefused(UserError):
    """--in-engine asked for what does not run in the engine (yet): one line naming it."""


def refused_variant(args) -> Optional[str]:
    """The first flag asked for that does not run in the engine yet, from the flags alone (None: all do): its name in
    the rules between variants (base/combinations.py)."""
    for asked, key in ((getattr(args, "lstm", False), "in_engine/lstm"),
                       (getattr(args, "ray_address", None) is not None and getattr(args, "async_rl", False),
                        "in_engine/async_ray"),
                       (getattr(args, "async_rl", False) and getattr(args, "max_policy_lag", 1) > 1,
                        "in_engine/max_policy_lag"),
                       (getattr(args, "editor", False), "in_engine/editor"),
                       (getattr(args, "frame_stack", 1) != 1, "in_engine/frame_stack")):
        if asked:
            return in_engine_name(key)
    return None


def refused_game(envs) -> Optional[str]:
    """What of the game (its instances, as they connected) does not run in the engine, or None. ``envs``: a
    GodotVecEnv, or what Ray workers reported of theirs (ray_rollouts.ReportedGames: ``instance_env_infos``)."""
    if getattr(envs, "dialect", None) == GODOT_RL:
        return in_engine_name("in_engine/godot_rl")
    if getattr(envs, "image_layout", None) is not None:
        return in_engine_name("in_engine/camera")
    infos = getattr(envs, "instance_env_infos", None) or [inst.env_info for inst in envs.launcher.instances]
    spoken = {info.get(wire.ACTORS) for info in infos}
    if spoken - {wire.ACTORS_VERSION}:
        said = next(iter(spoken - {wire.ACTORS_VERSION}))
        which = ("without in-engine actors (older than this trainer" if said is None else
                 f"whose in-engine actors are version {said!r}, this trainer's {wire.ACTORS_VERSION} (another release")
        return in_engine_name("in_engine/old_export", which=which)
    return None


def decide(args, envs=None) -> tuple[bool, str]:
    """(whether the rollouts run in the engine, why), the one rule: --in-engine / --no-in-engine when given;
    otherwise in the engine when every instance has at most MAX_AGENTS_IN_ENGINE agents and every variant asked for
    runs there. ``envs``: the game's vector env once its instances are up (None: the flags alone). --in-engine with
    a variant or game that does not run there raises InEngineRefused, never falls back."""
    refused = refused_variant(args) or (refused_game(envs) if envs is not None else None)
    if args.in_engine and refused:
        raise InEngineRefused(in_engine_refusal(refused))
    if args.in_engine is False:
        return False, "--no-in-engine"
    if refused:
        return False, f"{refused} runs step by step"
    if envs is None:
        return bool(args.in_engine), "--in-engine" if args.in_engine else "the game is not started yet"
    if args.in_engine:
        return True, "--in-engine"
    most = max(envs.agent_counts)
    if most > MAX_AGENTS_IN_ENGINE:
        return False, f"{most} agents per instance (in-engine from {MAX_AGENTS_IN_ENGINE} or fewer)"
    return True, f"{most} agent{'s' if most != 1 else ''} per instance (at most {MAX_AGENTS_IN_ENGINE})"


class EngineActorRollouts(LocalRollouts):
    """The rollouts of in-engine actors over a GodotVecEnv's instances. ``export(agent, normalizer)``: the agent as
    a policy file's content (engine/policy_file.game_policy); ``weigh(agent, normalizer)``: its weights message's
    values (engine/policy_weights.agent_weights); ``write(path, policy)``: the policy file written. ``logprob``: the games
    also send their own log-prob of each action (a test switch; kept in ``game_logprobs``: {policy name: its agents'}
    with several policies, which variants/policies.PolicySet collects through ``collect_routes``)."""

    in_engine = True  # (args.json's in_engine: the path the run took)

    def __init__(self, envs, *, num_steps: int, seed: int, step_timeout: float, run_dir, why: str,
                 export: Callable, weigh: Callable, write: Callable, logprob: bool = False, asynchronous: bool = False):
        super().__init__(envs, pipeline=False)
        self.asynchronous, self.pending, self.ready = asynchronous, None, None  # --async: the fragment asked ahead
        self.collects = self.lag = self.lag_max = 0
        self.num_steps, self.seed, self.step_timeout, self.why = num_steps, seed, step_timeout, why
        self.export, self.weigh, self.write, self.logprob = export, weigh, write, logprob
        self.policy_path = Path(run_dir).resolve() / POLICY_FILE
        self.entered = [False] * envs.num_instances  # in actor mode since the instance's last other message
        self.version, self.layout, self.game_logprobs, self.written = 0, None, None, None
        self.fragment_wait_s = self.weights_s = 0.0
        # several policies (variants/policies.py's PolicySet calls collect_routes): their names, each agent's policy
        specs = getattr(envs, "policies", None) or ()
        self.names = [p.name for p in specs] if len(specs) > 1 else None
        self.env_policy = np.asarray(envs.env_policy) if self.names else np.zeros(self.num_envs, np.int64)
        self.obs_sizes = np.array([p.observation_space.shape[0] for p in specs] if self.names else [envs.obs_dim])
        self.offsets = np.concatenate([[0], np.cumsum(envs.agent_counts)]).astype(np.int64)
        self.routed = None  # collect_routes' routes by envs (--self-play's teams): each agent's route, sent to the games

    def startup_line(self) -> Optional[str]:
        ahead = "; --async: each next fragment is collected during the update, policy lag 1" if self.asynchronous else ""
        whose = f"each agent's own policy ({', '.join(self.names)})" if self.names else "the policy"
        return (f"{self.envs.startup_line()}\nactors: in the engine ({self.why}): each instance samples {whose} "
                f"itself and sends fragments of {self.num_steps} steps x its agents{ahead}")

    # ---- what leaves actor mode: any other message to the games ------------------------------------------------------
    def leave(self) -> None:
        """Before another message to the games (a reset, the evaluation's steps...): they leave actor mode."""
        self._drain()
        self.entered = [False] * len(self.entered)

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        self.leave()
        self.ready = None  # fresh episodes: a kept fragment is stale
        super().reset(normalizer, buf, seed)

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        self.leave()
        super().warm_up(bonus, steps, seed)

    def evaluate(self, act, num_episodes: int, seed: int) -> list:
        self.leave()
        return super().evaluate(act, num_episodes, seed)

    def set_env_params(self, values: dict) -> None:
        self.leave()
        super().set_env_params(values)

    def scalars(self) -> dict:
        lag = {"charts/policy_lag": self.lag, "charts/policy_lag_max": self.lag_max} if self.asynchronous else {}
        return {"perf/fragment_wait_s": self.fragment_wait_s, "perf/weights_s": self.weights_s, **lag}

    # ---- the exchange -------------------------------------------------------------------------------------------------
    def _enter(self, i: int, source: tuple, weights: np.ndarray) -> None:
        """Instance i into actor mode with the run's policy file of ``source`` (the agent and normaliser whose weights
        are sent, per policy; the file gives the shapes, the weights message the values), its sizes checked against
        ours."""
        inst = self.envs.launcher.instances[i]
        paths = ({name: self.policy_path.with_name(f"actors_{name}.json") for name in self.names} if self.names
                 else {None: self.policy_path})
        if self.written != self.version:  # the files of these weights, once per fragment that needs them
            for (name, path), (agent, normalizer) in zip(paths.items(), source):
                by_name = self.names and self.routed is None  # (routes by envs: every file is the game's one policy)
                self.write(path, self.export(agent, normalizer, name) if by_name else self.export(agent, normalizer))
            self.written = self.version
        mine = None if self.routed is None else self.routed[self.offsets[i]:self.offsets[i + 1]]
        inst.conn.send(wire.actors_message(paths if self.names else self.policy_path, self.num_steps,
                                           self.seed + self.version, self.logprob, agent_policies=mine))
        reply = inst.conn.recv(expect=wire.ACTORS)
        sizes = self.layout["sizes"]
        wire.check_actors_reply(reply, inst.label(), weights=weights.size, n_agents=self.envs.agent_counts[i],
                                obs_size=max(s[wire.OBS_SIZE_KEY] for s in sizes.values()),
                                action_size=max(s[wire.ACTION_SIZE_KEY] for s in sizes.values()),
                                sizes=sizes if self.names else None)
        self.entered[i] = True

    def _start(self, i: int, source: tuple, message: bytes, weights: np.ndarray) -> None:
        """Instance i gets the weights and is asked for the next fragment (entering actor mode first if it left it)."""
        if not self.entered[i]:
            self._enter(i, source, weights)
        inst = self.envs.launcher.instances[i]
        inst.conn.send_bytes(message, "the policy's weights")
        inst.conn.send(wire.fragment_message(self.version))

    def _ask(self, agent, normalizer, routes: Optional[list] = None) -> None:
        """Send every instance the agent's weights (``routes``: each policy's, in order) and ask it for the next
        fragment; kept in ``pending``: what a restart sends again, and (with --async, copies) the behaviour agent and
        the statistics the games were sent."""
        started = time.perf_counter()
        pairs = [(r.agent, r.normalizer) for r in routes] if routes else [(agent, normalizer)]
        source = copy.deepcopy(pairs) if self.asynchronous else pairs
        parts = [np.asarray(self.weigh(*pair), np.float32) for pair in source]
        sizes = {name: {wire.WEIGHTS_KEY: int(w.size), wire.OBS_SIZE_KEY: int(d),
                        wire.ACTION_SIZE_KEY: 1 if a.discrete else int(a.action_shape[0])}
                 for name, w, d, (a, _) in zip(self.names or [None], parts, self.obs_sizes, source)}
        per_agent = [sizes[(self.names or [None])[k]] for k in self.env_policy]
        self.layout = {"num_steps": self.num_steps, "logprob": self.logprob, "sizes": sizes,
                       "obs_size": np.array([s[wire.OBS_SIZE_KEY] for s in per_agent]),
                       "action_size": np.array([s[wire.ACTION_SIZE_KEY] for s in per_agent])}
        weights = np.concatenate(parts)
        message = wire.weights_message(weights)
        self.version += 1
        failed = {}
        for i in range(self.envs.num_instances):
            try:
                self._start(i, source, message, weights)
            except GodotConnectionError as e:
                failed[i] = e
        self.pending = (source, message, weights, failed, self.collects)
        self.weights_s = time.perf_counter() - started

    def _wait(self) -> tuple:
        """The pending fragments of every instance (a game that died or went silent mid-fragment is restarted, its
        fragment dropped, and asked again with the same weights); (fragments, which agents' instances were
        restarted, the behaviour agent, the normaliser it was sent, the collect that asked)."""
        source, message, weights, failed, asked_at = self.pending
        self.pending, started = None, time.perf_counter()
        n = self.envs.num_instances
        restarted, fragments = np.zeros(self.num_envs, bool), [None] * n
        for i in range(n):
            while fragments[i] is None:
                try:
                    if i in failed:
                        raise failed.pop(i)
                    agents = slice(self.offsets[i], self.offsets[i + 1])
                    layout = dict(num_steps=self.num_steps, logprob=self.logprob, n_agents=self.envs.agent_counts[i],
                                  obs_size=self.layout["obs_size"][agents],
                                  action_size=self.layout["action_size"][agents])
                    fragments[i] = wire.receive_fragment(self.envs.launcher.instances[i].conn, self.version,
                                                         self.step_timeout, **layout)
                except GodotConnectionError as e:  # died or silent mid-fragment: dropped, restarted, asked again
                    restarted[self.envs.restart(i, e)] = True
                    self.entered[i] = False
                    try:
                        self._start(i, source, message, weights)
                    except GodotConnectionError as again:
                        failed[i] = again
        self.fragment_wait_s = time.perf_counter() - started
        self.envs.check_script_errors()  # a game that keeps raising them stops the run, as at a step
        return (fragments, restarted, source if self.names else source[0], asked_at)

    def _drain(self) -> None:
        """Before any other message: the fragment the games are collecting, kept for the next collect."""
        if self.pending is not None:
            self.ready = self._wait()

    # ---- the slot -----------------------------------------------------------------------------------------------------
    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        """The fragments asked for at the last collect (--async) or now, into ``buf``; with --async the next ones
        are asked for at once, with the weights before this update."""
        self.collects += 1
        if self.pending is None and self.ready is None:
            self._ask(agent, normalizer)
        fragments, restarted, (behaviour, sent), asked_at = self.ready or self._wait()
        self.ready, started = None, time.perf_counter()
        self.lag = self.collects - asked_at
        self.lag_max = max(self.lag_max, self.lag)
        fill_buffer(buf, fragments, restarted, behaviour, sent, normalizer, self.envs.agent_counts, critic=agent,
                    bonus=bonus)
        if self.logprob:
            self.game_logprobs = np.concatenate([f.logprobs for f in fragments], axis=1)
        buf.policy_s, buf.env_wait_s = time.perf_counter() - started, self.fragment_wait_s + self.weights_s
        buf.group_steps = self.num_steps
        if self.asynchronous:  # the games collect the next fragment while the learner updates
            self._ask(agent, normalizer)

    def collect_routes(self, routes: list) -> None:
        """Several policies (variants/policies.PolicySet, one Route per policy in ``names``' order): every instance
        runs each agent's own policy; each route's buffer gets its agents' share of the fragments, filled as one
        policy's (fill_buffer: its normaliser as sent, its agent's log-probs and values, its rewards' scaling,
        episodes, bootstraps and bonus). Routes that are not the game's policies (--self-play: two teams of one policy,
        the learner's and the opponent's) are told to the games agent by agent (the "actors" message's
        agent_policies), which enter actor mode again when that assignment changes (a change of sides)."""
        names, owner = [r.name for r in routes], np.full(self.num_envs, -1, np.int64)
        for k, r in enumerate(routes):
            owner[slice(None) if r.envs is None else r.envs] = k
        if self.names != names or not np.array_equal(owner, self.env_policy):
            if self.routed is not None:
                self.entered = [False] * len(self.entered)
            self.names, self.env_policy, self.routed = names, owner, owner
            self.obs_sizes = np.array([r.buf.obs.shape[-1] for r in routes])
        self.collects += 1
        self._ask(None, None, routes)
        fragments, restarted, source, _ = self._wait()
        started = time.perf_counter()
        self.game_logprobs = {}
        for k, (route, (behaviour, sent)) in enumerate(zip(routes, source)):
            size = self.layout["sizes"][self.names[k]]
            mine = [np.flatnonzero(self.env_policy[self.offsets[i]:self.offsets[i + 1]] == k)
                    for i in range(len(fragments))]
            shares = [wire.select(f, m, size[wire.OBS_SIZE_KEY], size[wire.ACTION_SIZE_KEY])
                      for f, m in zip(fragments, mine)]
            fill_buffer(route.buf, shares, restarted[self.env_policy == k], behaviour, sent, route.normalizer,
                        [m.size for m in mine], critic=route.agent, bonus=route.bonus)
            if self.logprob:
                self.game_logprobs[route.name] = np.concatenate([f.logprobs for f in shares], axis=1)
        for route in routes:
            route.buf.policy_s = time.perf_counter() - started
            route.buf.env_wait_s, route.buf.group_steps = self.fragment_wait_s + self.weights_s, self.num_steps


def fill_buffer(buf: RolloutBuffer, fragments: list, restarted: np.ndarray, behaviour, sent, normalizer, counts,
                critic, bonus=None) -> None:
    """The buffer from the instances' fragments (agents in instance order), as collect_rollout fills it: the
    observations normalised by ``sent`` (the normaliser as the games were sent it), log-probs of ``behaviour`` (the
    agent whose weights they were sent), values of ``critic`` (the learner's agent now), ``normalizer`` updated;
    ``bonus`` (RND) rates the observation each agent reached at each step (the final one where its episode ended)."""
    obs = np.concatenate([f.obs for f in fragments], axis=1)  # (T, N, D) raw
    actions = np.concatenate([f.actions for f in fragments], axis=1)
    rewards = np.concatenate([f.rewards for f in fragments], axis=1)
    statuses = np.concatenate([f.statuses for f in fragments], axis=1)
    tail = np.concatenate([f.tail_obs for f in fragments], axis=0)
    T, N, D = obs.shape
    offsets = np.concatenate([[0], np.cumsum(counts)])
    for t in range(T):  # NaN/inf from a game: the step it came at (rollout.check_finite's error)
        if not (finite_as_float32(obs[t]) and finite_as_float32(rewards[t])):
            raise NonFiniteEnvData(max(t - 1, 0))
    if not finite_as_float32(tail):
        raise NonFiniteEnvData(T - 1)
    final = []  # (t, agent, raw final obs) of the ended episodes
    for k, f in enumerate(fragments):
        for t, (agents, rows) in f.final_obs.items():
            if not finite_as_float32(rows):
                raise NonFiniteEnvData(t, "final observations (the last of an ended episode)")
            final += [(t, offsets[k] + a, row) for a, row in zip(agents, rows)]
    cut = [(t, a, row) for t, a, row in final if statuses[t, a] == wire.STATUS_TRUNCATED]  # bootstrapped from
    # normalised with the statistics the games were sent, then the normaliser updated from the raw observations
    norm = sent.normalize_obs(obs.reshape(T * N, D), update=False).reshape(T, N, D)
    final_norm = sent.normalize_obs(np.stack([r for _, _, r in cut]), update=False) if cut else None
    next_obs = sent.normalize_obs(tail, update=False)
    normalizer.normalize_obs(np.concatenate([obs[1:].reshape(-1, D), tail]))  # the observations received after s_0
    buf.episodes, buf.initial_state = [], buf.state.clone()
    buf.obs[:] = norm
    buf.dones[0] = np.where(restarted, 1.0, buf.next_done)
    buf.dones[1:] = statuses[:-1] != wire.STATUS_RUNNING
    buf.actions[:] = actions[..., 0].astype(np.int64) if critic.discrete else actions.reshape(buf.actions.shape)
    with torch.no_grad():
        rows = torch.from_numpy(norm.reshape(T * N, D))
        _, logprob, _, values, _ = behaviour.get_action_and_value(
            rows, torch.from_numpy(buf.actions.reshape((T * N,) + critic.action_shape)))
        buf.logprobs[:] = logprob.numpy().reshape(T, N)
        buf.values[:] = (values if critic is behaviour else critic.get_value(rows)).numpy().reshape(T, N, -1)
        buf.final_values[:] = 0.0
        if cut:
            cut_values = critic.get_value(torch.from_numpy(final_norm))[:, 0].numpy()
            for (t, a, _), v in zip(cut, cut_values):
                buf.final_values[t, a] = v
    for t in range(T):
        done = statuses[t] != wire.STATUS_RUNNING
        buf.rewards[t] = normalizer.scale_reward(rewards[t], done)
    buf.terminated[:] = statuses == wire.STATUS_TERMINATED
    buf.truncated[:] = statuses == wire.STATUS_TRUNCATED
    buf.next_obs[:], buf.next_done[:] = next_obs, statuses[-1] != wire.STATUS_RUNNING
    if bonus is not None:  # RND: s_{t+1}, or the final observation where the episode ended at t
        reached = np.concatenate([obs[1:], tail[None]])
        for t, a, row in final:
            reached[t, a] = row
        for t in range(T):
            bonus.rate(buf, t, slice(None), reached[t], np.zeros(N, bool), {})
    ended = {}
    for k, f in enumerate(fragments):
        for t, rows in wire.episodes_by_step(f, f"instance {k}").items():
            ended.setdefault(t, []).extend((offsets[k] + a, r, l, info) for a, r, l, info in rows)
    for t in sorted(ended):
        buf.episodes.append((t, episode_infos(ended[t], N)))


def episode_infos(rows: list, n: int) -> dict:
    """gymnasium's infos of one step's ended episodes (what RunLog.record_episodes and the curriculum read)."""
    mask, r, l = np.zeros(n, bool), np.zeros(n), np.zeros(n, np.int64)
    final_info = np.empty(n, object)
    for agent, ret, length, info in rows:
        mask[agent], r[agent], l[agent], final_info[agent] = True, ret, length, info
    return {"episode": {"r": r, "l": l, "t": np.zeros(n)}, "_episode": mask, "final_info": final_info,
            "_final_info": mask.copy()}
