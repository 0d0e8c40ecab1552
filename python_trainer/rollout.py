"""The rollout: num_steps x num_envs transitions with the current policy, and the interface every source of them has.

`collect_rollout` is CleanRL's rollout (s_t, a_t ~ pi(.|s_t), log pi(a_t|s_t), V(s_t), then r_t and s_{t+1}), with
the env groups pipelined. `Rollouts` is the slot ppo.py takes its data from: `collect(agent, normalizer, buf, bonus)`
fills one `RolloutBuffer`, `evaluate(act, episodes, seed)` plays the deterministic policy, `close()` ends the games.
Two kinds fill it: `LocalRollouts` here (the vector env in this process) and ray_rollouts.RayRollouts (workers on
a Ray cluster, each running `collect_rollout` on its own games), so GAE and the update never know which one ran.
The variants fill it too: policies.py (several policies in one game, routed through one env) and self_play.py,
through the same loop (`serve_groups`, the steps and the pipelining, written once).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import gymnasium as gym
import numpy as np
import torch

from python_trainer.agent import env_action
from python_trainer.envs.grouped_env import GroupedVecEnv
from python_trainer.envs.images import ImageLayout
from python_trainer.obs_store import ObsStore

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
    actions to the games and waiting for their replies), over group_steps steps of one group of envs; beside_s: with
    --async, the collection's own wall-clock time, spent beside the learner's update (policy_s and env_wait_s are
    parts of it, not of the learner's wait), else 0.
    An agent that reads a camera image (its ``image_layout``: variants/cnn_agent.py) gets its obs in an
    obs_store.ObsStore, the image block as uint8; every other agent's are a float32 array.
    """

    FIELDS = ("obs", "actions", "logprobs", "rewards", "dones", "values", "terminated", "truncated", "final_values",
              "next_obs", "next_done")
    BONUS_FIELDS = ("int_rewards", "rnd_next_obs")

    def __init__(self, num_steps, num_envs, obs_dim, agent, bonus=None):
        image = getattr(agent, "image_layout", None)
        if image is None:
            self.obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)
        else:  # the image block as uint8: a quarter of the memory
            self.obs = ObsStore(num_steps, num_envs, image)
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
        self.policy_s = self.env_wait_s = self.beside_s = 0.0
        self.group_steps = 0
        if bonus is not None:
            self.int_rewards = np.zeros((num_steps, num_envs), np.float32)
            self.rnd_next_obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)

    def batch_obs(self):
        """The rollout's observations as the update's flat batch (num_steps * num_envs rows), without a copy: a
        tensor, or an ObsStore's rows (uint8 images turned into float rows one minibatch at a time); either gives a
        minibatch by ``index_select(0, mb_inds)``."""
        if isinstance(self.obs, ObsStore):
            return self.obs.rows()
        return torch.from_numpy(self.obs.reshape((-1, self.obs.shape[-1])))


class Stopwatch:
    """Seconds spent inside ``with stopwatch:`` blocks, summed (where a rollout's time went)."""

    __slots__ = ("seconds", "_start")

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self._start = time.perf_counter()

    def __exit__(self, *exc_info):
        self.seconds += time.perf_counter() - self._start


def collect_rollout(envs: GroupedVecEnv, agent, normalizer, buf: RolloutBuffer, pipeline=True, bonus=None) -> None:
    """Fill ``buf`` with the agent's next num_steps x num_envs transitions, from buf.next_obs on (CleanRL's rollout).

    At every step each group of envs is served in turn (serve_groups, the pipelining): ``observe`` records the
    group's r_{t-1} and s_t, ``choose`` samples its a_t. ``bonus``: RND, rating each observation reached. Several
    policies in one env: variants/policies.py's collect_routes, the same loop with one route per policy.
    """
    buf.episodes, buf.initial_state = [], buf.state.clone()  # the update replays the rollout from initial_state
    policy = agent.rollout_policy()  # pi_theta_old and V for the whole rollout (the fast agent's: on numpy)
    acting = Stopwatch()

    def observe(t, g, obs, reward, terminated, truncated, infos):  # r_t and s_{t+1} of the group's envs g
        with acting:
            record(buf, t, g, obs, reward, terminated, truncated, infos, normalizer, policy)
        if bonus is not None:  # RND rates the observation reached (the final one where an episode ended)
            bonus.rate(buf, t, g, obs, np.logical_or(terminated, truncated), infos)

    def choose(t, g):  # a_t of the group's envs g
        with acting:
            return env_action(envs.single_action_space, act(buf, t, g, policy))

    num_steps = buf.obs.shape[0]
    buf.env_wait_s = serve_groups(envs, num_steps, pipeline, observe, choose)
    buf.policy_s, buf.group_steps = acting.seconds, num_steps * len(envs.groups)


def serve_groups(envs: GroupedVecEnv, num_steps: int, pipeline: bool, observe: Callable, choose: Callable) -> float:
    """The rollout's loop: num_steps steps of every group of envs, then the last step's results; returns the seconds
    spent sending actions and waiting for results.

    The envs come in groups of whole instances (envs.groups: slices of the batch; one group for a gymnasium env or a
    single instance), served in turn at every step: collect the group's results of the previous step
    (``observe(t, g, obs, reward, terminated, truncated, infos)``), then choose and send its next actions
    (``choose(t, g)``), so the group simulates while the trainer serves the next one. pipeline=False holds every
    group's actions until all are chosen (strict turns); the data, the normaliser's updates and the random draws are
    the same either way.
    """
    groups = envs.groups
    pipeline = pipeline and len(groups) > 1
    env_wait = Stopwatch()
    for step in range(num_steps + 1):  # the extra pass only collects the last step's results
        held = []  # strict turns: the groups' actions, sent once all are chosen
        for group, g in enumerate(groups):  # g: the group's envs
            if step > 0:  # r_{t-1} and s_t of the group's envs
                with env_wait:
                    obs, reward, terminated, truncated, infos = envs.step_wait(group)
                check_finite(step - 1, obs, reward, infos)
                observe(step - 1, g, obs, reward, terminated, truncated, infos)
            if step == num_steps:
                continue
            actions = choose(step, g)
            if pipeline:  # the group simulates while the next one is served
                with env_wait:
                    envs.step_async(actions, group)
            else:
                held.append((actions, group))
        with env_wait:
            for actions, group in held:
                envs.step_async(actions, group)
    return env_wait.seconds


def act(buf: RolloutBuffer, step: int, envs, policy) -> np.ndarray:
    """a_t ~ pi_theta_old(.|s_t) for the envs ``envs`` of ``buf`` (a slice or index array), stored with s_t, its done,
    log pi_theta_old(a_t|s_t) and V(s_t); the agent's memory moves on (reset where s_t starts an episode). Returns
    the agent's a_t (env_action makes the env's)."""
    buf.obs[step, envs], buf.dones[step, envs] = buf.next_obs[envs], buf.next_done[envs]
    action, logprob, value, buf.state[envs] = policy(buf.next_obs[envs], buf.state[envs], buf.next_done[envs])
    buf.actions[step, envs], buf.logprobs[step, envs], buf.values[step, envs] = action, logprob, value
    return action


def record(buf: RolloutBuffer, t: int, envs, obs, reward, terminated, truncated, infos, normalizer, policy) -> None:
    """Step t's results for the envs ``envs`` of ``buf``: r_t (scaled), how an episode ended, V(final obs) where one
    was truncated, s_{t+1} (normalised) and its done, and the infos of a step where episodes ended."""
    done = np.logical_or(terminated, truncated)
    buf.rewards[t, envs] = normalizer.scale_reward(reward, done, envs)
    buf.terminated[t, envs], buf.truncated[t, envs] = terminated, truncated
    final_values = np.zeros(done.shape[0], np.float32)
    cut = np.flatnonzero(np.logical_and(truncated, np.logical_not(terminated)))
    if cut.size:  # time-limit truncations: V(s_final), for bootstrap_truncated (its episode: the env's memory now)
        final_obs = normalizer.normalize_obs(np.stack(infos["final_obs"][cut]), update=False)
        state = buf.state[np.arange(buf.obs.shape[1])[envs][cut]]
        final_values[cut] = policy.value(final_obs, state, np.zeros(cut.size, np.float32))[:, 0]
    buf.final_values[t, envs] = final_values
    buf.next_obs[envs] = normalizer.normalize_obs(obs)
    buf.next_done[envs] = done
    if "_episode" in infos or "_final_info" in infos:  # episodic return/length, logged by the caller
        buf.episodes.append((t, infos))


FLOAT32_MAX = float(np.finfo(np.float32).max)


def finite_as_float32(x) -> bool:
    """Whether every value of ``x`` stays finite as a float32, as the buffers store it (1e39 is a finite float64
    and inf in the buffer). A camera's uint8 frames always are."""
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        return True
    return bool(np.isfinite(x).all()) and (x.dtype.itemsize <= 4 or bool((np.abs(x) <= FLOAT32_MAX).all()))


def check_finite(t: int, obs, reward, infos) -> None:
    """Raise NonFiniteEnvData if step t's observations, rewards or final observations hold NaN/inf, or values
    beyond float32's range (they would be inf in the buffer)."""
    if not (finite_as_float32(obs) and finite_as_float32(reward)):
        raise NonFiniteEnvData(t)
    if "final_obs" in infos:  # an episode ended: its final observation (bootstrapped, or rated by RND) too
        ended = np.flatnonzero(infos["_final_obs"])
        if ended.size and not finite_as_float32(np.stack(infos["final_obs"][ended])):
            raise NonFiniteEnvData(t, "final observations (the last of an ended episode)")


def evaluate(act: Callable, envs, num_episodes: int, seed: int, max_vector_steps: int = 200_000,
             env_ids=None) -> list[float]:
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
    image_layout: Optional[ImageLayout] = None  # where a camera image sits in each observation row (envs/images.py)

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
        self.image_layout = getattr(envs, "image_layout", None)

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
