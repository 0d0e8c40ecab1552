"""Several policies in one game: one network per policy name, each filling ppo.py's slots, routed outside its loop.

A Godot game names each agent's policy (the controller's ``policy_name``, sent as godot-rl's ``agent_policy_names``);
agents with the same name share one network. Each policy is a `Learner`: its agent, bonus, optimizer, normaliser and
rollout buffer, exactly what ppo.iterations takes for a game with one policy. The train command runs one
ppo.iterations per learner, in lockstep (`lockstep`), so the algorithm never knows there are others.

Their rollouts come from one vector env: `PolicySet` holds it and gives each learner a `PolicyRollouts`, the
rollouts' interface seen from one policy. The first learner to ask for an update's rollout collects it for all of
them at once (`collect_routes`: each policy acts in its own envs with its own weights, one `Route` per policy, in
rollout.py's one loop, serve_groups; with in-engine actors the rollouts' own collect_routes, where each game samples
every agent from its own policy); the
others take theirs. self_play.py collects its two teams the same way. A game with one policy is one learner over the
plain rollouts (rollout.collect_rollout): nothing here runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from python_trainer.agent import env_action
from python_trainer.base.combinations import refusal
from python_trainer.envs.grouped_env import GroupedVecEnv
from python_trainer.envs.spaces import policy_env_info
from python_trainer.rollout import RolloutBuffer, Rollouts, Stopwatch, act, evaluate, record, serve_groups


@dataclass
class Route:
    """One policy's share of a rollout: its agent, normaliser, buffer and bonus, and its envs (indices into the vector
    env's batch, ascending; None: all of them)."""

    agent: object
    normalizer: object
    buf: RolloutBuffer
    bonus: object = None
    envs: Optional[np.ndarray] = None
    name: str = ""


def collect_routes(envs: GroupedVecEnv, routes: list, pipeline=True) -> None:
    """rollout.collect_rollout for several policies in one env: fill each route's buffer with its policy's next
    num_steps transitions in its envs, from its buf.next_obs on.

    The groups are served by the same loop (rollout.serve_groups: pipelined or in strict turns). Each policy sees
    only its envs' observations (at its own width: a mixed env pads them), rewards and infos, and acts with its own
    weights; the policies' actions go back to the env together (a mixed env's as {policy name: actions}).
    """
    groups, num_steps = envs.groups, routes[0].buf.obs.shape[0]
    places = {g.start: where for g, where in zip(groups, _group_routes(envs, routes, groups))}
    policies = []
    for r in routes:
        r.buf.episodes, r.buf.initial_state = [], r.buf.state.clone()  # the update replays the rollout from here
        policies.append(r.agent.rollout_policy())  # pi_theta_old and V for every step of this rollout
    acting = Stopwatch()

    def observe(t, g, obs, reward, terminated, truncated, infos):  # each policy's share of the group's results
        for r, policy, (rows, cols) in zip(routes, policies, places[g.start]):
            width = r.buf.obs.shape[-1]
            r_obs, r_infos = obs[rows, :width], _take_infos(infos, rows, reward.shape[0], width)
            with acting:
                record(r.buf, t, cols, r_obs, reward[rows], terminated[rows], truncated[rows], r_infos,
                       r.normalizer, policy)
            if r.bonus is not None:  # RND rates the observation reached
                r_done = np.logical_or(terminated[rows], truncated[rows])
                r.bonus.rate(r.buf, t, cols, r_obs, r_done, r_infos)

    def choose(t, g):  # every policy's actions for the group, as one
        with acting:
            parts = [(r, rows, act(r.buf, t, cols, policy))
                     for r, policy, (rows, cols) in zip(routes, policies, places[g.start])]
            return _env_actions(envs.single_action_space, parts, g.stop - g.start, getattr(envs, "mixed", False))

    env_wait_s = serve_groups(envs, num_steps, pipeline, observe, choose)
    for r in routes:
        r.buf.policy_s, r.buf.env_wait_s, r.buf.group_steps = acting.seconds, env_wait_s, num_steps * len(groups)


def _group_routes(envs, routes, groups) -> list:
    """For each group, each route's (rows: its envs' positions in the group's arrays, cols: their positions in the
    route's buffer)."""
    out = []
    for g in groups:
        in_group = np.arange(g.start, g.stop)
        out.append([(rows, np.searchsorted(ids, g.start + rows))
                    for r in routes for ids in [np.arange(envs.num_envs) if r.envs is None else r.envs]
                    for rows in [np.flatnonzero(np.isin(in_group, ids))]])
    return out


def _take_infos(infos: dict, rows, n: int, obs_dim: int) -> dict:
    """The step's infos for the envs at ``rows`` of the n envs stepped (arrays of length n are indexed; final_obs
    loses its padding columns)."""
    if not len(infos):
        return infos

    def take(value):
        if isinstance(value, dict):
            return {k: take(v) for k, v in value.items()}
        return value[rows] if isinstance(value, np.ndarray) and value.shape[:1] == (n,) else value

    out = take(infos)
    if "final_obs" in out and out["final_obs"].ndim == 2:  # a gymnasium env's: one array per env, unpadded
        out["final_obs"] = out["final_obs"][:, :obs_dim]
    return out


def _env_actions(act_space, parts, n: int, mixed: bool):
    """The actions sent to a group of n envs from each route's (route, rows, agent actions): a mixed env's as
    {policy name: that policy's env actions}; policies of one space, merged into one batch."""
    if mixed:
        return {r.name: env_action(act_space[r.name], action) for r, _, action in parts}
    return env_action(act_space, merge_actions([(rows, action) for _, rows, action in parts], n))


def merge_actions(parts: list, n: int):
    """One batch of n envs' actions from each policy's (rows, actions) when the policies share one space: arrays row
    by row, a hybrid space's dicts key by key."""
    first = parts[0][1]
    if isinstance(first, dict):
        return {key: merge_actions([(rows, a[key]) for rows, a in parts], n) for key in first}
    first = np.asarray(first)
    merged = np.zeros((n,) + first.shape[1:], first.dtype)
    for rows, actions in parts:
        merged[rows] = actions
    return merged


@dataclass
class Learner:
    """One policy being trained: its name, its rollouts and what fills ppo.iterations' slots for it. ``tag``
    prefixes its TensorBoard tags ("" for a game's only policy, so CleanRL's tags stay as they are)."""

    name: str
    rollouts: Rollouts
    agent: object
    bonus: object
    optimizer: object
    normalizer: object
    buf: Optional[RolloutBuffer] = None
    tag: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def num_envs(self) -> int:
        return self.rollouts.num_envs


def lockstep(generators: list):
    """ppo.iterations of every learner, one update each per step: yields the list of their Iterations."""
    if len(generators) == 1:
        for it in generators[0]:
            yield [it]
        return
    yield from (list(its) for its in zip(*generators))


class PolicySet:
    """The vector env of a game with several policies, shared by their learners (see the module's docstring).
    ``rollouts``: the rollout.LocalRollouts over that env."""

    def __init__(self, rollouts):
        self.rollouts, self.envs = rollouts, rollouts.envs
        self.specs = self.envs.policies
        self.names = [p.name for p in self.specs]
        self.env_ids = [np.flatnonzero(self.envs.env_policy == k) for k in range(len(self.specs))]
        self.views = [PolicyRollouts(self, k) for k in range(len(self.specs))]
        self.routes: dict = {}
        self._taken = set(self.names)  # the policies that took the last collected rollout
        # in-engine actors (engine_actors.py): they collect the routes themselves, and leave actor mode before the
        # env is stepped or reset here
        self._engine_collect = getattr(rollouts, "collect_routes", None)
        self._leave = getattr(rollouts, "leave", lambda: None)

    def bind(self, learners: list) -> None:
        """The learners (one per policy, in ``names``' order) whose buffers the collections fill."""
        self.routes = {ln.name: Route(ln.agent, ln.normalizer, ln.buf, ln.bonus, self.env_ids[k], ln.name)
                       for k, ln in enumerate(learners)}

    def collect_for(self, name: str) -> None:
        if name in self._taken:  # a new update: every policy's rollout, at once
            routes = [self.routes[n] for n in self.names]
            if self._engine_collect is not None:
                self._engine_collect(routes)
            else:
                collect_routes(self.envs, routes, self.rollouts.pipeline)
            self._taken = set()
        self._taken.add(name)

    def _own(self, k: int, obs: np.ndarray) -> np.ndarray:
        return obs[self.env_ids[k], : self.specs[k].observation_space.shape[0]]

    def reset(self, seed: int) -> None:
        self._leave()
        raw_obs, _ = self.envs.reset(seed=seed)
        for k, name in enumerate(self.names):
            route = self.routes[name]
            route.buf.next_obs[:] = route.normalizer.normalize_obs(self._own(k, raw_obs))
        self._taken = set(self.names)

    def warm_up(self, steps: int, seed: int) -> None:
        """RND's observation statistics from random play, each policy's bonus from its own agents."""
        self._leave()
        self.envs.reset(seed=seed)
        for _ in range(steps):
            obs = self.envs.step(self.envs.action_space.sample())[0]
            for k, name in enumerate(self.names):
                if self.routes[name].bonus is not None:
                    self.routes[name].bonus.update_obs_stats(self._own(k, obs))

    def act(self, acts: dict) -> Callable:
        """One act(obs, done) for the whole env from each policy's own (trained_agent.LoadedAgent.act)."""
        def act(obs, done):
            parts = [(self.env_ids[k], acts[name](self._own(k, obs), done=done[self.env_ids[k]]))
                     for k, name in enumerate(self.names)]
            if self.envs.mixed:
                return {name: actions for name, (_, actions) in zip(self.names, parts)}
            return merge_actions(parts, self.envs.num_envs)

        return act

    def evaluate(self, acts: dict, num_episodes: int, seed: int) -> dict:
        """{policy: the returns of ``num_episodes`` deterministic episodes of its agents}, every policy playing."""
        joint = self.act(acts)
        self._leave()
        return {name: evaluate(joint, self.envs, num_episodes, seed, env_ids=self.env_ids[k])
                for k, name in enumerate(self.names)}


class PolicyRollouts(Rollouts):
    """The rollouts as one policy of a PolicySet sees them: its envs, its spaces, its share of each rollout."""

    def __init__(self, policy_set: PolicySet, k: int):
        base, spec = policy_set.rollouts, policy_set.specs[k]
        self.set, self.name = policy_set, spec.name
        self.num_envs = int(policy_set.env_ids[k].size)
        self.single_observation_space, self.single_action_space = spec.observation_space, spec.action_space
        self.image_layout = spec.image  # its agents' camera image (PolicySpaces.image), or None
        self.env_info = policy_env_info(base.env_info, spec.name)
        self.agents_per_instance = None if base.agents_per_instance is None else len(spec.agents)
        self.game_settings = base.game_settings

    def startup_line(self) -> Optional[str]:
        return None

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        raise NotImplementedError("PolicySet.warm_up warms every policy's bonus at once")

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        raise NotImplementedError("PolicySet.reset resets every policy's envs at once")

    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        self.set.collect_for(self.name)

    def scalars(self) -> dict:
        return {}

    def evaluate(self, act: Callable, num_episodes: int, seed: int) -> list:
        raise NotImplementedError("PolicySet.evaluate plays every policy at once")

    def set_env_params(self, values: dict) -> None:
        self.set.rollouts.set_env_params(values)

    def close(self) -> None:
        pass


def resume_refusal(ckpt: Optional[dict], names: Optional[list], env_id: str, where: str) -> Optional[str]:
    """Why the checkpoint ``ckpt`` (None: a new run) does not resume a game whose policies are now ``names`` (None:
    one policy), in one line, or None: it holds one policy where the game has several, or the reverse, or other
    names."""
    saved = (ckpt or {}).get("policies")
    if ckpt and (saved is None) != (names is None):
        had = f"the policies {sorted(saved)}" if saved else "one policy"
        has = f"the policies {names}" if names else "one policy"
        return refusal("resume/policies", where=where, had=had, env_id=env_id, has=has)
    if saved is not None and sorted(saved) != sorted(names):
        return refusal("resume/policy_names", where=where, saved=sorted(saved), env_id=env_id, now=sorted(names))
    return None
