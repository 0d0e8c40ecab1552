"""The rollout: num_steps x num_envs transitions with the current policy, and the interface every source of them has.

`Rollouts` is the slot ppo.py takes its data from: `collect(agent, normalizer, buf, bonus)` fills one rollout
buffer, `evaluate(act, episodes, seed)` plays the deterministic policy, `close()` ends the games. Two kinds fill it:
`LocalRollouts` here (the vector env in this process, its groups pipelined) and ray_rollouts.RayRollouts (workers
on a Ray cluster, each running `collect_rollout` on its own games). Both run the same `collect_rollout` into the
same `RolloutBuffer`, so GAE and the update never know which one ran.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import gymnasium as gym
import numpy as np

from python_trainer.agent import env_action
from python_trainer.envs.grouped_env import GroupedVecEnv

EVAL_SEED_OFFSET = 10**6  # the final evaluation's games are seeded away from the training's


def eval_seed(seed: int) -> int:
    """The seed of a run's final deterministic evaluation (its episodes are not the training's)."""
    return seed + EVAL_SEED_OFFSET


@dataclass
class RolloutArgs:
    pipeline: bool = True
    """Godot games with 2 or more instances: pipelined rollouts, half of the instances simulate while the actions of
    the other half are computed (the same data as --no-pipeline, which takes strict turns: all games wait for the
    trainer, then the trainer for all games)"""


class NonFiniteEnvData(ValueError):
    """The env returned NaN/inf observations or rewards (``what``) at rollout step ``t``."""

    def __init__(self, t, what: str = "observations or rewards"):
        super().__init__(f"NaN/inf {what} at rollout step {t}")
        self.t, self.what = t, what

    def __reduce__(self):  # a Ray worker's error comes back pickled: with its step, not its message, as ``t``
        return type(self), (self.t, self.what)


class RolloutBuffer:
    """One rollout as (num_steps, num_envs, ...) numpy arrays (writing one step into a numpy array is ~5x cheaper than
    into a tensor; the whole rollout becomes tensors, without a copy, for the update).

    dones[t] = 1: obs[t] starts a new episode; rewards[t]: r_t (scaled); values[t]: the critic's outputs for s_t
    (V, and with RND V_int); terminated/truncated[t]: how an episode ended at step t; final_values[t]: V(final obs)
    of an episode truncated at step t (bootstrap_truncated adds it); next_obs / next_done: s_T and its done after
    the last step; episodes: (t, infos) of the steps where episodes ended. A Ray worker's fragment is this buffer
    for the worker's envs.
    state: the agent's memory of each env (agent.initial_state: nothing for an MLP, an LSTM's (h, c)), carried from
    step to step and from rollout to rollout; initial_state, its copy at the rollout's start (the update replays
    the rollout from it). With a bonus (RND): int_rewards[t], the raw intrinsic reward of the observation reached
    at step t (the final one where an episode ended), and rnd_next_obs[t] that raw observation.
    Where the rollout's time went: policy_s (acting: the normaliser, the forward pass, sampling), env_wait_s (sending
    actions to the games and waiting for their replies), over group_steps steps of one group of envs.
    """

    FIELDS = ("obs", "actions", "logprobs", "rewards", "dones", "values", "terminated", "truncated", "final_values",
              "next_obs", "next_done")  # fmt: skip
    BONUS_FIELDS = ("int_rewards", "rnd_next_obs")

    def __init__(self, num_steps, num_envs, obs_dim, agent, bonus=None):
        self.obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)
        # actions: one int64 index per env for a Discrete space, else the flat float row of the agent (continuous
        # values, then one index per discrete key)
        self.actions = np.zeros((num_steps, num_envs) + agent.action_shape, np.int64 if agent.discrete else np.float32)
        self.logprobs = np.zeros((num_steps, num_envs), np.float32)
        self.rewards = np.zeros((num_steps, num_envs), np.float32)
        self.dones = np.zeros((num_steps, num_envs), np.float32)
        self.values = np.zeros((num_steps, num_envs, agent.n_values), np.float32)
        self.terminated = np.zeros((num_steps, num_envs), bool)
        self.truncated = np.zeros((num_steps, num_envs), bool)
        self.final_values = np.zeros((num_steps, num_envs), np.float32)
        self.next_obs = np.zeros((num_envs, obs_dim), np.float32)
        self.next_done = np.zeros(num_envs, np.float32)
        self.episodes = []
        self.state = agent.initial_state(num_envs)
        self.initial_state = self.state.clone()
        self.fields = self.FIELDS + (self.BONUS_FIELDS if bonus is not None else ())
        self.policy_s = self.env_wait_s = 0.0
        self.group_steps = 0
        if bonus is not None:
            self.int_rewards = np.zeros((num_steps, num_envs), np.float32)
            self.rnd_next_obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)


@dataclass
class Route:
    """One policy's share of a rollout: its agent, normaliser, buffer and bonus, and its envs (indices into the vector
    env's batch, ascending; None: all of them). A game with several policies is collected as one route per policy
    (policies.py); a game with one policy is one route of every env."""

    agent: object
    normalizer: object
    buf: RolloutBuffer
    bonus: object = None
    envs: Optional[np.ndarray] = None
    name: str = ""


def collect_rollout(envs: GroupedVecEnv, agent, normalizer, buf: RolloutBuffer, pipeline=True, bonus=None) -> None:
    """Fill ``buf`` with the current policy's next num_steps x num_envs transitions, from buf.next_obs on (one policy
    acting in every env: collect_routes with one route)."""
    collect_routes(envs, [Route(agent, normalizer, buf, bonus)], pipeline)


def _group_routes(envs, routes, groups) -> list:
    """For each group, each route's (rows: its envs' positions in the group's arrays, cols: their positions in the
    route's buffer); one route of every env keeps slices (views, no copies)."""
    if len(routes) == 1 and routes[0].envs is None:
        return [[(slice(None), g)] for g in groups]
    out = []
    for g in groups:
        in_group = np.arange(g.start, g.stop)
        out.append([(rows, np.searchsorted(r.envs, g.start + rows))
                    for r in routes for rows in [np.flatnonzero(np.isin(in_group, r.envs))]])  # fmt: skip
    return out


def _take_infos(infos: dict, rows, n: int, obs_dim: int) -> dict:
    """The step's infos for the envs at ``rows`` of the n envs stepped (arrays of length n are indexed; final_obs
    loses its padding columns)."""
    def take(value):
        if isinstance(value, dict):
            return {k: take(v) for k, v in value.items()}
        return value[rows] if isinstance(value, np.ndarray) and value.shape[:1] == (n,) else value

    out = take(infos)
    if "final_obs" in out:
        out["final_obs"] = out["final_obs"][:, :obs_dim]
    return out


def collect_routes(envs: GroupedVecEnv, routes: list, pipeline=True) -> None:
    """Fill each route's buffer with its policy's next num_steps transitions in its envs, from its buf.next_obs on.

    The envs come in groups of whole instances (envs.groups: slices of the batch; one group for a gymnasium env or a
    single instance), served in a fixed order at every step: collect the group's results of the previous step, then
    choose and send its next actions. Pipelined, a group's actions go out at once, so it simulates while the trainer
    serves the next group; pipeline=False sends all groups' actions together (strict turns). The data, the
    normalisation updates and the RNG draws are the same either way. The agent's memory is kept per env
    (buf.state), so each group carries its own envs' memories. ``bonus``: RND, rating each reached observation.
    Each agent acts through its rollout_policy (its weights on numpy for this rollout: no autograd, no tensors).
    Several routes (policies): each sees only its envs' observations (its own width: a mixed env pads them) and
    rewards; their actions go back to the env together (a mixed env's as {policy name: actions}).
    """
    act_space = envs.single_action_space
    groups = envs.groups
    num_steps = routes[0].buf.obs.shape[0]
    pipeline = pipeline and len(groups) > 1
    several, mixed = len(routes) > 1, getattr(envs, "mixed", False)
    places = _group_routes(envs, routes, groups)
    policies = []
    for r in routes:
        r.buf.episodes = []
        r.buf.initial_state = r.buf.state.clone()  # the update replays the rollout from here
        policies.append(r.agent.rollout_policy())  # pi_theta_old and V for every step of this rollout
    clock, policy_s, env_wait_s = time.perf_counter, 0.0, 0.0
    for step in range(num_steps + 1):  # the extra pass only collects the rollout's last step
        held = []
        for group, g in enumerate(groups):  # g: the group's envs
            if step > 0:  # r_{t-1} and s_t of the group's envs
                t = step - 1
                t0 = clock()
                raw_obs, reward, terminated, truncated, infos = envs.step_wait(group)
                t1 = clock()
                if not (np.isfinite(raw_obs).all() and np.isfinite(reward).all()):
                    raise NonFiniteEnvData(t)
                if "final_obs" in infos:  # an episode ended: its final observation (bootstrapped, or rated by RND) too
                    ended = np.flatnonzero(infos["_final_obs"])
                    if ended.size and not np.isfinite(np.stack(infos["final_obs"][ended])).all():
                        raise NonFiniteEnvData(t, "final observations (the last of an ended episode)")
                done = np.logical_or(terminated, truncated)
                t_bonus = 0.0
                for r, policy, (rows, cols) in zip(routes, policies, places[group]):
                    buf, normalizer, r_obs, r_infos = r.buf, r.normalizer, raw_obs, infos
                    r_done, r_terminated, r_truncated, r_reward = done, terminated, truncated, reward
                    if several:  # this policy's envs, at its own observation width
                        r_obs = raw_obs[rows, : buf.obs.shape[-1]]
                        r_done, r_terminated, r_truncated = done[rows], terminated[rows], truncated[rows]
                        r_reward = reward[rows]
                        if len(infos):
                            r_infos = _take_infos(infos, rows, done.shape[0], buf.obs.shape[-1])
                    buf.rewards[t, cols] = normalizer.scale_reward(r_reward, r_done, cols)
                    buf.terminated[t, cols], buf.truncated[t, cols] = r_terminated, r_truncated
                    final_values = np.zeros(r_done.shape[0], np.float32)
                    cut = np.flatnonzero(np.logical_and(r_truncated, np.logical_not(r_terminated)))
                    if cut.size:  # time-limit truncations: V(s_final), for bootstrap_truncated; the final obs continues
                        final_obs = normalizer.normalize_obs(np.stack(r_infos["final_obs"][cut]), update=False)
                        state = buf.state[np.arange(buf.obs.shape[1])[cols][cut]]  # its episode: the env's memory now
                        final_values[cut] = policy.value(final_obs, state, np.zeros(cut.size, np.float32))[:, 0]
                    buf.final_values[t, cols] = final_values
                    if r.bonus is not None:  # RND rates the observation reached: the final one where an episode ended
                        t2 = clock()
                        r.bonus.rate(buf, t, cols, r_obs, r_done, r_infos)
                        t_bonus += clock() - t2
                    buf.next_obs[cols] = normalizer.normalize_obs(r_obs)
                    buf.next_done[cols] = r_done
                    if "_episode" in r_infos or "_final_info" in r_infos:  # episodic return/length, logged by the caller
                        buf.episodes.append((t, r_infos))
                policy_s, env_wait_s = policy_s + (clock() - t1) - t_bonus, env_wait_s + t1 - t0
            if step == num_steps:
                continue

            # a_t ~ pi_theta_old(.|s_t), log pi_theta_old(a_t|s_t), V(s_t); the memory reset where s_t starts an episode
            t0 = clock()
            parts = []
            for r, policy, (rows, cols) in zip(routes, policies, places[group]):
                buf = r.buf
                buf.obs[step, cols] = buf.next_obs[cols]
                buf.dones[step, cols] = buf.next_done[cols]
                action, logprob, value, buf.state[cols] = policy(buf.next_obs[cols], buf.state[cols], buf.next_done[cols])
                buf.actions[step, cols] = action
                buf.logprobs[step, cols] = logprob
                buf.values[step, cols] = value
                parts.append((r, rows, action))
            actions = _env_actions(act_space, parts, g.stop - g.start, mixed)
            policy_s += clock() - t0
            if pipeline:  # the group simulates while the next one is served
                t0 = clock()
                envs.step_async(actions, group)
                env_wait_s += clock() - t0
            else:
                held.append((actions, group))
        t0 = clock()
        for group_actions, group in held:  # strict turns: every group's actions, once all are chosen
            envs.step_async(group_actions, group)
        env_wait_s += clock() - t0
    for r in routes:
        r.buf.policy_s, r.buf.env_wait_s, r.buf.group_steps = policy_s, env_wait_s, num_steps * len(groups)


def _env_actions(act_space, parts, n: int, mixed: bool):
    """The actions sent to a group of n envs from each route's (route, rows, agent actions): one route's as they are;
    a mixed env's as {policy name: that policy's env actions}; policies of one space, merged into one batch."""
    if len(parts) == 1:
        return env_action(act_space, parts[0][2])
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


def evaluate(act: Callable, envs, num_episodes: int, seed: int, max_vector_steps: int = 200_000,
             env_ids=None) -> list[float]:  # fmt: skip
    """Deterministic returns of `num_episodes` fresh episodes (at most ceil(n / num_envs) per env, so short
    episodes are not over-represented). ``act(obs, done=...)``: observations -> env actions (e.g.
    trained_agent.LoadedAgent.act; done[i] true where obs[i] starts an episode). ``env_ids``: count only these
    envs' episodes (one policy's agents in a game of several)."""
    counted = np.arange(envs.num_envs) if env_ids is None else np.asarray(env_ids)
    quota = math.ceil(num_episodes / counted.size)
    per_env = [[] for _ in range(envs.num_envs)]
    counts = np.zeros(envs.num_envs, bool)
    counts[counted] = True
    obs, _ = envs.reset(seed=seed)
    done = np.ones(envs.num_envs, bool)  # obs[i] starts an episode (a recurrent policy forgets what came before)
    for _ in range(max_vector_steps):
        obs, _, terminated, truncated, infos = envs.step(act(obs, done=done))
        done = np.logical_or(terminated, truncated)
        if "_episode" in infos:
            for i in np.flatnonzero(infos["_episode"] & counts):
                if len(per_env[i]) < quota:
                    per_env[i].append(float(infos["episode"]["r"][i]))
            if sum(map(len, per_env)) >= num_episodes:
                break
    returns = []  # round-robin over the envs: first episodes first
    for k in range(quota):
        returns += [env_returns[k] for env_returns in per_env if k < len(env_returns)]
    return returns[:num_episodes]


class Rollouts(Protocol):
    """Where ppo.py's rollouts come from: this process's envs (LocalRollouts) or Ray workers (RayRollouts)."""

    num_envs: int
    single_observation_space: gym.spaces.Box
    single_action_space: gym.Space
    env_info: Optional[dict]  # a Godot game's (its action keys make the in-engine policy file), else None
    agents_per_instance: Optional[int]
    game_settings: Optional[dict]  # what a Godot game's instances were given (args.json records it), else None

    def startup_line(self) -> Optional[str]:
        """One line saying what runs (a Godot game's instances and settings), or None."""
        ...

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        """``steps`` steps of random actions whose observations prime ``bonus``'s observation statistics."""
        ...

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        """Start fresh episodes; their first observations go into buf.next_obs."""
        ...

    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        """Fill ``buf`` with the next rollout of ``agent`` (collect_rollout's contract)."""
        ...

    def scalars(self) -> dict:
        """{TensorBoard tag: value} about the last collect (e.g. per-worker steps/s), to log with the update."""
        ...

    def evaluate(self, act: Callable, num_episodes: int, seed: int) -> list[float]:
        """The returns of ``num_episodes`` deterministic episodes (`evaluate`)."""
        ...

    def set_env_params(self, values: dict) -> None:
        """The games' environment parameters from each agent's next episode (GodotVecEnv.set_env_params)."""
        ...

    def close(self) -> None:
        ...


class LocalRollouts(Rollouts):
    """Rollouts from a vector env in this process: a GodotVecEnv's instances, pipelined by group (``pipeline``), or
    a gymnasium id's copies."""

    def __init__(self, envs: GroupedVecEnv, pipeline: bool = True):
        self.envs, self.pipeline = envs, pipeline
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.env_info = getattr(envs, "env_info", None)
        self.agents_per_instance = getattr(envs, "agents_per_instance", None)
        self.game_settings = getattr(envs, "game_settings", None)

    def startup_line(self) -> Optional[str]:
        return self.envs.startup_line() if self.game_settings is not None else None

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        self.envs.reset(seed=seed)
        for _ in range(steps):
            bonus.update_obs_stats(self.envs.step(self.envs.action_space.sample())[0])

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        raw_obs, _ = self.envs.reset(seed=seed)
        buf.next_obs[:] = normalizer.normalize_obs(raw_obs)

    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        collect_rollout(self.envs, agent, normalizer, buf, self.pipeline, bonus)

    def scalars(self) -> dict:
        return {}

    def evaluate(self, act: Callable, num_episodes: int, seed: int) -> list[float]:
        return evaluate(act, self.envs, num_episodes, seed)

    def set_env_params(self, values: dict) -> None:
        self.envs.set_env_params(values)

    def close(self) -> None:
        self.envs.close()
