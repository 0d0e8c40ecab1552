"""PPO in one file, in the shape of CleanRL's ppo.py (discrete) + ppo_continuous_action.py (continuous).

    godot-ppo train --env-id CartPole-v1 --total-timesteps 500000 --learning-rate 2.5e-4 \\
        --num-envs 4 --num-steps 128 --num-minibatches 4 --update-epochs 4
    godot-ppo train --env-id ball_chase --num-instances 2          # 2 Godot instances x 16 agents
    python -m python_trainer.ppo --help

Read top to bottom: Args -> normalisation -> the two pure functions (truncation bootstrap, GAE) -> Agent ->
checkpoints -> train(): rollout, GAE, PPO update, logging. The equations (Schulman et al. 2017, 2016):

    delta_t  = r_t + gamma * V(s_{t+1}) * (1 - done_{t+1}) - V(s_t)            (TD error)
    A_t      = delta_t + gamma * lambda * (1 - done_{t+1}) * A_{t+1}            (GAE, backwards)
    R_t      = A_t + V(s_t)                                                     (value target)
    r_t(th)  = pi_th(a_t|s_t) / pi_th_old(a_t|s_t)                              (probability ratio)
    L^CLIP   = E[ min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t) ]                   (maximised -> we minimise -L)
    L^VF     = 0.5 * E[ max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) ]
    loss     = -L^CLIP - c_ent * H[pi] + c_vf * L^VF

Differences from CleanRL, all on purpose: a truncated episode (time limit) is bootstrapped with gamma * V(final obs)
instead of being treated as a death; observation normalisation / reward scaling are done in this file (and saved
with the model) instead of by gym wrappers; checkpoints, --resume, Ctrl-C safety and a final deterministic eval.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated, NamedTuple, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro

from python_trainer.gym_env import UnknownEnvError, UnsupportedSpaceError, check_gym_id
from python_trainer.paths import CHECKPOINT_NAME, GAMES, MODEL_NAME, MissingExportError
from python_trainer.playback import write_policy_for_checkpoint

EPISODES_CSV = "episodes.csv"
DEFAULT_AGENTS_PER_INSTANCE = 16
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_AUTO = tyro.conf.arg(help_behavior_hint="(default: auto = on for continuous actions, off for discrete)")


@dataclass
class Args:
    # --- experiment -------------------------------------------------------------------------------------------
    exp_name: str = "ppo"
    """the name of this experiment (part of the run folder name)"""
    seed: int = 1
    """seed of the experiment (python, numpy, torch, envs)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    torch_threads: int = 1
    """torch CPU threads; 1 is fastest for these small networks"""
    run_dir_root: str = "runs"
    """the run folder is RUN_DIR_ROOT/<env>__<exp>__<seed>__<time>/"""
    resume: Optional[str] = None
    """continue the run in this folder from its last checkpoint (flags not given are taken from its args.json)"""
    checkpoint_every: int = 10
    """write RUN_DIR/checkpoint.pt every this many updates (0: only at the end and on Ctrl-C)"""
    eval_episodes: int = 10
    """after training, evaluate the deterministic policy (argmax / mean action) over this many episodes (0: skip)"""

    # --- environment ------------------------------------------------------------------------------------------
    env_id: str = "CartPole-v1"
    """the id of the environment: a gymnasium id or a Godot game (ball_chase)"""
    num_envs: Optional[int] = None
    """the number of parallel environments (default: 4 for gymnasium ids,
    num-instances * agents-per-instance for Godot games)"""
    num_instances: int = 1
    """Godot games: how many game processes to launch"""
    agents_per_instance: Optional[int] = None
    """Godot games: agents (arenas) simulated by each process (default: 16)"""
    speedup: Optional[float] = None
    """Godot games: engine time scale (default: the Godot env's)"""
    action_repeat: Optional[int] = None
    """Godot games: physics frames per decision step (default: the Godot env's)"""
    window: bool = False
    """Godot games: show the game windows instead of running headless"""

    # --- algorithm --------------------------------------------------------------------------------------------
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    truncation_bootstrap: bool = True
    """bootstrap time-limit truncations with gamma * V(final obs) (--no-truncation-bootstrap: CleanRL's behaviour,
    a truncation ends the return like a termination)"""
    target_kl: Optional[float] = None
    """the target KL divergence threshold: stop the update epochs early when approx_kl exceeds it"""
    norm_obs: Annotated[Optional[bool], _AUTO] = None
    """normalise observations with running mean/std, clipped to +-10 (--norm-obs / --no-norm-obs)"""
    norm_reward: Annotated[Optional[bool], _AUTO] = None
    """scale rewards by the running std of the discounted return, clipped to +-10 (--norm-reward / --no-norm-reward)"""


class TrainError(Exception):
    """A problem the user can fix; main() prints it as `godot-ppo train: error: ...` and returns 2."""


# ======================================================================================================================
# Observation normalisation and reward scaling (what CleanRL's ppo_continuous_action.py gets from
# gym.wrappers.NormalizeObservation / NormalizeReward), kept here so the statistics are saved with the model.
# ======================================================================================================================
class RunningMeanStd:
    """Running mean and variance (parallel/Welford algorithm, Chan et al.)."""

    def __init__(self, shape=(), epsilon=1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x):
        batch_mean, batch_var, batch_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        self.mean = self.mean + delta * batch_count / tot_count
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / tot_count
        self.var = m2 / tot_count
        self.count = tot_count

    def state_dict(self):
        return {
            "mean": torch.from_numpy(np.array(self.mean)),
            "var": torch.from_numpy(np.array(self.var)),
            "count": float(self.count),
        }

    def load_state_dict(self, d):
        self.mean, self.var, self.count = d["mean"].numpy().copy(), d["var"].numpy().copy(), float(d["count"])


class Normalizer:
    """obs -> clip((obs - mean) / sqrt(var + eps), +-10)
    reward -> clip(reward / sqrt(Var[discounted return] + eps), +-10)

    Disabled parts pass values through (as float32 observations / float rewards).
    """

    def __init__(self, obs_dim, num_envs, gamma, norm_obs, norm_reward, clip_obs=10.0, clip_reward=10.0, epsilon=1e-8):
        self.norm_obs, self.norm_reward = bool(norm_obs), bool(norm_reward)
        self.gamma, self.clip_obs, self.clip_reward, self.epsilon = gamma, clip_obs, clip_reward, epsilon
        self.obs_rms = RunningMeanStd(shape=(obs_dim,))
        self.return_rms = RunningMeanStd(shape=())
        self.returns = np.zeros(num_envs, np.float64)  # running discounted return per env (not saved)

    def normalize_obs(self, obs, update=True):
        obs = np.asarray(obs, dtype=np.float32)
        if not self.norm_obs:
            return obs
        if update:
            self.obs_rms.update(obs)
        out = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon)
        return np.clip(out, -self.clip_obs, self.clip_obs).astype(np.float32)

    def scale_reward(self, rewards, dones):
        rewards = np.asarray(rewards, dtype=np.float64)
        if not self.norm_reward:
            return rewards
        self.returns = self.returns * self.gamma + rewards
        self.return_rms.update(self.returns)
        self.returns[dones] = 0.0
        return np.clip(rewards / np.sqrt(self.return_rms.var + self.epsilon), -self.clip_reward, self.clip_reward)

    def state_dict(self):
        return {
            "norm_obs": self.norm_obs, "norm_reward": self.norm_reward, "gamma": self.gamma,
            "clip_obs": self.clip_obs, "clip_reward": self.clip_reward, "epsilon": self.epsilon,
            "obs_rms": self.obs_rms.state_dict(), "return_rms": self.return_rms.state_dict(),
        }  # fmt: skip

    def load_state_dict(self, d):
        self.norm_obs, self.norm_reward, self.gamma = d["norm_obs"], d["norm_reward"], d["gamma"]
        self.clip_obs, self.clip_reward, self.epsilon = d["clip_obs"], d["clip_reward"], d["epsilon"]
        self.obs_rms.load_state_dict(d["obs_rms"])
        self.return_rms.load_state_dict(d["return_rms"])


# ======================================================================================================================
# The two pure functions of the advantage computation (tests check them against hand-computed numbers).
# ======================================================================================================================
def bootstrap_truncated(rewards, terminated, truncated, final_values, gamma):
    """r_t + gamma * V(s_final) where the episode was TRUNCATED (time limit) at step t; r_t where it terminated.

    A time limit is not a property of the state: the agent would have kept collecting reward, so the value of the
    state it was cut off in is added to the last reward. GAE then sees done=1 at that step (nothing is bootstrapped
    from the NEXT observation, which belongs to the next episode) and the return still includes the future.
    A termination (the pole fell) is a real end: nothing is added.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    cut_off = np.logical_and(truncated, np.logical_not(terminated))
    return rewards + gamma * np.where(cut_off, np.asarray(final_values, dtype=np.float64), 0.0)


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalised advantage estimation over a (num_steps, num_envs) rollout, computed backwards.

    dones[t] = 1 when obs[t] is the first observation of a new episode (the step before it ended one);
    next_value / next_done are V and done for the observation after the last stored step.
    Returns numpy (advantages, returns) with returns = advantages + values (the value-function target).
    """
    rewards, values, dones = (np.asarray(x, dtype=np.float32) for x in (rewards, values, dones))
    next_value = np.asarray(next_value, dtype=np.float32).reshape(1, -1)
    next_done = np.asarray(next_done, dtype=np.float32).reshape(1, -1)
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    lastgaelam = 0.0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done[0]
            nextvalues = next_value[0]
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        # delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_{t+1}) - V(s_t)
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        # A_t = delta_t + gamma * lambda * (1 - done_{t+1}) * A_{t+1}
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages, advantages + values


def explained_variance(y_pred, y_true):
    """1 - Var[y_true - y_pred] / Var[y_true]: 1 = perfect value function, 0 = no better than a constant."""
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)


# ======================================================================================================================
# The agent: separate 64-64 tanh actor and critic, orthogonal init.
# ======================================================================================================================
def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Categorical policy over logits for Discrete actions; Normal(mean, exp(log_std)) with a state-independent
    log-std for Box actions (the sampled, unclipped action is what the log-probability is computed on)."""

    def __init__(self, obs_dim: int, action_space: gym.Space):
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        act_dim = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(  # logits (Discrete) or action mean (Box)
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01),
        )
        if not self.discrete:
            self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        """(a ~ pi(.|s) unless given, log pi(a|s), entropy H[pi(.|s)], V(s)), written out instead of going through
        torch.distributions (same numbers, half the per-call cost on these tiny batches)."""
        out = self.actor(x)
        if self.discrete:  # Categorical over softmax(logits)
            logp = torch.log_softmax(out, dim=-1)  # log pi(.|s)
            if action is None:  # Gumbel-max trick: argmax(log p + G), G = -log(Exp(1)) ~ Gumbel, samples a ~ p
                action = (logp - torch.empty_like(logp).exponential_().log()).argmax(-1)
            logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            entropy = -(logp.exp() * logp).sum(-1)  # H = -sum_a p log p
            return action, logprob, entropy, self.critic(x)
        # Normal(mean, std) per action dimension, independent: log-probabilities and entropies add up
        log_std = self.actor_logstd.expand_as(out)
        std = log_std.exp()
        if action is None:
            action = out + std * torch.randn_like(out)
        logprob = (-0.5 * ((action - out) / std) ** 2 - log_std - _HALF_LOG_2PI).sum(1)
        entropy = (0.5 + _HALF_LOG_2PI + log_std).sum(1)
        return action, logprob, entropy, self.critic(x)

    def act(self, x, deterministic=True):
        """Actions for playback/evaluation: argmax of the logits / the mean action (unclipped)."""
        if not deterministic:
            return self.get_action_and_value(x)[0]
        out = self.actor(x)
        return out.argmax(dim=-1) if self.discrete else out


def env_action(action_space, action):
    """The action sent to the env: Box actions clipped to the space (the unclipped sample stays in the buffer)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return action + int(action_space.start) if action_space.start else action
    return np.clip(action, action_space.low, action_space.high)


# ======================================================================================================================
# Checkpoints: one format for periodic checkpoints, Ctrl-C checkpoints and the final model.pt. Only tensors and plain
# Python values, so torch.load(..., weights_only=True) reads it.
# ======================================================================================================================
def space_to_dict(space):
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": space.low.flatten().tolist(), "high": space.high.flatten().tolist()}  # fmt: skip
    raise TypeError(f"cannot save space {space}")


def space_from_dict(d):
    if d["type"] == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    shape = tuple(d["shape"])
    low = np.array(d["low"], dtype=d["dtype"]).reshape(shape)
    high = np.array(d["high"], dtype=d["dtype"]).reshape(shape)
    return gym.spaces.Box(low, high, shape=shape, dtype=d["dtype"])


def _rng_state():
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }  # fmt: skip


def _set_rng_state(state):
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(
        ("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])


def save_checkpoint(path, *, agent, optimizer, normalizer, args, global_step, update, observation_space, action_space):
    """Write atomically: a crash or Ctrl-C during the write leaves the previous file intact."""
    state = {
        "format": "godot-ppo-checkpoint/1",
        "env_id": args.env_id,
        "global_step": int(global_step),
        "update": int(update),
        "model": agent.state_dict(),
        "optimizer": optimizer.state_dict(),
        "normalizer": normalizer.state_dict(),
        "observation_space": space_to_dict(observation_space),
        "action_space": space_to_dict(action_space),
        "args": asdict(args),
        "rng": _rng_state(),
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path):
    return torch.load(path, map_location="cpu", weights_only=True)


class LoadedAgent(NamedTuple):
    agent: Agent
    normalizer: Normalizer
    observation_space: gym.spaces.Box
    action_space: gym.Space
    env_id: str
    global_step: int

    def act(self, obs, deterministic=True):
        """numpy observations (n, obs_dim) -> numpy env actions (normalised as in training, clipped to the space)."""
        x = torch.from_numpy(self.normalizer.normalize_obs(np.atleast_2d(obs), update=False))
        with torch.no_grad():
            action = self.agent.act(x, deterministic=deterministic).numpy()
        return env_action(self.action_space, action)


def load_agent(path) -> LoadedAgent:
    """Rebuild the trained agent from model.pt / checkpoint.pt (or a run folder), with its frozen normalisation."""
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_NAME if (path / MODEL_NAME).is_file() else path / CHECKPOINT_NAME
    ckpt = load_checkpoint(path)
    observation_space = space_from_dict(ckpt["observation_space"])
    action_space = space_from_dict(ckpt["action_space"])
    obs_dim = int(np.prod(observation_space.shape))
    agent = Agent(obs_dim, action_space)
    agent.load_state_dict(ckpt["model"])
    agent.eval()
    normalizer = Normalizer(obs_dim, 1, ckpt["normalizer"]["gamma"], False, False)
    normalizer.load_state_dict(ckpt["normalizer"])
    return LoadedAgent(agent, normalizer, observation_space, action_space, ckpt["env_id"], ckpt["global_step"])


# ======================================================================================================================
# Run folder, argument resolution
# ======================================================================================================================
def _check_sizes(args, num_envs):
    if num_envs < 1 or args.num_steps < 1 or args.num_minibatches < 1 or args.update_epochs < 1:
        raise TrainError("--num-envs, --num-steps, --num-minibatches and --update-epochs must all be >= 1")
    batch_size = num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        divisors = sorted(
            (d for d in range(1, batch_size + 1) if batch_size % d == 0), key=lambda d: abs(d - args.num_minibatches)
        )
        raise TrainError(
            f"the batch (--num-envs {num_envs} x --num-steps {args.num_steps} = {batch_size}) is not divisible by "
            f"--num-minibatches {args.num_minibatches}: use a --num-minibatches that divides {batch_size} "
            f"(the nearest: {', '.join(map(str, sorted(divisors[:3])))}) or change --num-steps"
        )
    if args.total_timesteps < batch_size:
        raise TrainError(
            f"--total-timesteps {args.total_timesteps} is less than one batch ({num_envs} envs x {args.num_steps} "
            f"steps = {batch_size}): raise --total-timesteps or lower --num-steps"
        )
    if args.checkpoint_every < 0 or args.eval_episodes < 0:
        raise TrainError("--checkpoint-every and --eval-episodes must be >= 0")
    if args.target_kl is not None and args.target_kl <= 0:
        raise TrainError(f"--target-kl must be > 0 (typical: 0.01 to 0.05), got {args.target_kl}")
    return batch_size, batch_size // args.num_minibatches


def _resolve_num_envs(args):
    """num_envs (and agents_per_instance for Godot games)."""
    if args.env_id not in GAMES:
        return (4 if args.num_envs is None else args.num_envs), None
    if args.num_instances < 1:
        raise TrainError("--num-instances must be >= 1")
    per = args.agents_per_instance
    if per is None:
        if args.num_envs is None:
            per = DEFAULT_AGENTS_PER_INSTANCE
        elif args.num_envs % args.num_instances == 0:
            per = args.num_envs // args.num_instances
        else:
            raise TrainError(
                f"--num-envs {args.num_envs} is not a multiple of --num-instances {args.num_instances}: for Godot "
                "games num_envs = num_instances x agents_per_instance (give --agents-per-instance instead)"
            )
    expected = args.num_instances * per
    if args.num_envs is not None and args.num_envs != expected:
        raise TrainError(
            f"--num-envs {args.num_envs} disagrees with --num-instances {args.num_instances} x "
            f"--agents-per-instance {per} = {expected}: drop --num-envs or make them agree"
        )
    return expected, per


def _flag(name):
    return "--" + name.replace("_", "-")


def explicit_fields(argv):
    """The Args fields given on the command line (the rest come from args.json when resuming)."""
    given = set()
    for f in fields(Args):
        for flag in {_flag(f.name), "--" + f.name}:  # tyro accepts --env-id and --env_id
            neg = "--no-" + flag[2:]
            if any(a in (flag, neg) or a.startswith(flag + "=") for a in argv):
                given.add(f.name)
    return given


def _bool_flag_aliases(argv):
    """Accept --norm-obs / --no-norm-obs (and --norm-reward) as flags for the three-state auto options."""
    out, argv = [], list(argv)
    for i, a in enumerate(argv):
        for name in ("norm-obs", "norm-reward"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if a == f"--{name}" and nxt not in ("True", "False", "None"):
                out += [a, "True"]
                break
            if a == f"--no-{name}":
                out += [f"--{name}", "False"]
                break
        else:
            out.append(a)
    return out


def _prepare_run(args, explicit):
    """(args, run_dir, checkpoint or None). With --resume, unspecified flags come from the run's args.json."""
    if args.resume is None:
        root = Path(args.run_dir_root)
        run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
        run_dir, k = root / run_name, 1
        while run_dir.exists():
            k += 1
            run_dir = root / f"{run_name}_{k}"
        return args, run_dir, None  # created by train() once the arguments are known to be consistent
    run_dir = Path(args.resume)
    ckpt_path = run_dir / CHECKPOINT_NAME
    if not run_dir.is_dir():
        raise TrainError(
            f"--resume {run_dir}: no such folder (give a run folder such as runs/CartPole-v1__ppo__1__1700000000)"
        )
    if not ckpt_path.is_file():
        raise TrainError(
            f"--resume {run_dir}: there is no {CHECKPOINT_NAME} in it (the run stopped before its first checkpoint); "
            "start a new run instead, with a smaller --checkpoint-every if runs get interrupted early"
        )
    try:
        ckpt = load_checkpoint(ckpt_path)
    except Exception as e:  # truncated / foreign file
        raise TrainError(f"--resume {run_dir}: cannot read {ckpt_path} ({e}); start a new run instead") from None
    saved = ckpt["args"]
    if "env_id" in explicit and args.env_id != ckpt["env_id"]:
        raise TrainError(
            f"--resume {run_dir}: that run trained {ckpt['env_id']!r}, not {args.env_id!r}; "
            f"drop --env-id (or pass --env-id {ckpt['env_id']}) or start a new run"
        )
    merged = {
        f.name: (getattr(args, f.name) if f.name in explicit else saved.get(f.name, getattr(args, f.name)))
        for f in fields(Args)
    }
    merged["resume"] = str(run_dir)
    return Args(**merged), run_dir, ckpt


def _write_args_json(run_dir, args, extra):
    with open(run_dir / "args.json", "w") as f:
        json.dump({**asdict(args), **extra}, f, indent=2)


def _read_episodes(run_dir, up_to_step):
    """Episodes logged so far (global_step, return, length), dropping those after the checkpoint we resume from."""
    path = run_dir / EPISODES_CSV
    rows = []
    if path.is_file():
        with open(path) as f:
            for row in csv.DictReader(f):
                if int(row["global_step"]) <= up_to_step:
                    rows.append((int(row["global_step"]), float(row["return"]), int(row["length"])))
    return rows


def plot_learning_curve(run_dir, eval_return=None, title=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _read_episodes(Path(run_dir), up_to_step=2**62)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if rows:
        steps, rets = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        ax.plot(steps, rets, ".", alpha=0.25, markersize=3, label="episodic return")
        window = min(100, len(rets))
        trailing = np.convolve(rets, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1 :], trailing, "-", label=f"mean of last {window}")
    if eval_return is not None:
        ax.axhline(eval_return, color="k", ls="--", lw=1, label=f"deterministic eval: {eval_return:.1f}")
    ax.set_xlabel("global step")
    ax.set_ylabel("episodic return")
    ax.set_title(title or Path(run_dir).name, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(run_dir) / "learning_curve.png", dpi=100)
    plt.close(fig)


# ======================================================================================================================
# Evaluation
# ======================================================================================================================
def evaluate(agent, normalizer, envs, action_space, num_episodes, seed, max_vector_steps=200_000):
    """Deterministic returns of `num_episodes` fresh episodes (at most ceil(n / num_envs) per env, so short
    episodes are not over-represented)."""
    quota = math.ceil(num_episodes / envs.num_envs)
    per_env = [[] for _ in range(envs.num_envs)]
    obs, _ = envs.reset(seed=seed)
    for _ in range(max_vector_steps):
        x = torch.from_numpy(normalizer.normalize_obs(obs, update=False))
        with torch.no_grad():
            action = agent.act(x, deterministic=True).numpy()
        obs, _, _, _, infos = envs.step(env_action(action_space, action))
        if "_episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                if len(per_env[i]) < quota:
                    per_env[i].append(float(infos["episode"]["r"][i]))
            if sum(map(len, per_env)) >= num_episodes:
                break
    returns = []  # round-robin over the envs: first episodes first
    for k in range(quota):
        returns += [env_returns[k] for env_returns in per_env if k < len(env_returns)]
    return returns[:num_episodes]


# ======================================================================================================================
# Training
# ======================================================================================================================
def train(args: Args, explicit=frozenset()) -> int:
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    from python_trainer.vec_env import make_vec_env

    args, run_dir, ckpt = _prepare_run(args, set(explicit))
    num_envs, agents_per_instance = _resolve_num_envs(args)
    batch_size, minibatch_size = _check_sizes(args, num_envs)
    num_iterations = args.total_timesteps // batch_size
    if args.env_id not in GAMES:
        check_gym_id(args.env_id)  # unknown id: the clear error before any folder exists
    fresh = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    global_step = ckpt["global_step"] if ckpt else 0
    start_update = ckpt["update"] if ckpt else 0
    _write_args_json(run_dir, args, {"num_envs_resolved": num_envs, "batch_size": batch_size,
                                     "minibatch_size": minibatch_size, "num_iterations": num_iterations})  # fmt: skip

    # Seeding (and, when resuming, the RNG streams exactly where the checkpoint left them)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(max(1, args.torch_threads))
    if ckpt:
        _set_rng_state(ckpt["rng"])

    # Env setup
    env_kwargs = {"num_envs": num_envs, "seed": args.seed + global_step, "run_dir": str(run_dir)}
    if args.env_id in GAMES:
        env_kwargs.update(
            num_instances=args.num_instances, agents_per_instance=agents_per_instance, headless=not args.window
        )
        if args.speedup is not None:
            env_kwargs["speedup"] = args.speedup
        if args.action_repeat is not None:
            env_kwargs["action_repeat"] = args.action_repeat
    try:
        envs = make_vec_env(args.env_id, **env_kwargs)
    except BaseException:
        if fresh and not any(p for p in run_dir.iterdir() if p.name != "args.json"):
            (run_dir / "args.json").unlink(missing_ok=True)
            run_dir.rmdir()  # nothing happened in it: don't leave an empty run folder behind
        raise
    writer = pbar = episodes_file = None
    ready = False  # set once the agent exists: from then on Ctrl-C saves a checkpoint
    try:
        obs_space, act_space = envs.single_observation_space, envs.single_action_space
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise TrainError(f"unsupported observation space {obs_space}: the MLP agent needs flat Box observations")
        if not isinstance(act_space, gym.spaces.Discrete) and not (
            isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1
        ):
            raise TrainError(
                f"unsupported action space {act_space}: ppo.py handles Discrete and 1-D Box actions; wrap the env "
                "to expose one of those (e.g. MultiBinary(n) as Discrete(2**n) or as a Box thresholded at 0)"
            )
        if ckpt and (
            ckpt["observation_space"] != space_to_dict(obs_space) or ckpt["action_space"] != space_to_dict(act_space)
        ):
            raise TrainError(
                f"--resume {run_dir}: the checkpoint's spaces ({ckpt['observation_space']['shape']}, "
                f"{ckpt['action_space']}) differ from {args.env_id}'s now ({obs_space}, {act_space}); start a new run"
            )
        discrete = isinstance(act_space, gym.spaces.Discrete)
        obs_dim = obs_space.shape[0]
        norm_obs = (not discrete) if args.norm_obs is None else args.norm_obs
        norm_reward = (not discrete) if args.norm_reward is None else args.norm_reward

        agent = Agent(obs_dim, act_space)
        # fused=True: the same Adam update in one kernel, ~4x faster on CPU for these small tensors
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
        normalizer = Normalizer(obs_dim, num_envs, args.gamma, norm_obs, norm_reward)
        if ckpt:
            agent.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            normalizer.load_state_dict(ckpt["normalizer"])
            norm_obs, norm_reward = normalizer.norm_obs, normalizer.norm_reward

        # resuming: hide the events the interrupted process logged after the checkpoint (steps > global_step)
        writer = SummaryWriter(str(run_dir), purge_step=global_step + 1 if ckpt else None)
        if not ckpt:
            writer.add_text(
                "hyperparameters",
                "|param|value|\n|-|-|\n%s" % "\n".join(f"|{k}|{v}|" for k, v in {**asdict(args), "num_envs": num_envs,
                    "batch_size": batch_size, "minibatch_size": minibatch_size, "norm_obs": norm_obs,
                    "norm_reward": norm_reward}.items()),
            )  # fmt: skip
        episodes = _read_episodes(run_dir, global_step)
        with open(run_dir / EPISODES_CSV, "w", newline="") as f:  # rewritten without rows past the checkpoint
            csv.writer(f).writerows([("global_step", "return", "length"), *episodes])
        episodes_file = open(run_dir / EPISODES_CSV, "a", newline="")
        episodes_csv = csv.writer(episodes_file)
        recent_returns = deque((r[1] for r in episodes), maxlen=100)

        def checkpoint(path, step, update):
            save_checkpoint(path, agent=agent, optimizer=optimizer, normalizer=normalizer, args=args, global_step=step,
                            update=update, observation_space=obs_space, action_space=act_space)  # fmt: skip
            if args.env_id in GAMES:  # keep RUN_DIR/policy.json (the in-engine player's weights) up to date
                write_policy_for_checkpoint(path, envs.env_info)  # never raises

        # ALGO Logic: Storage setup (numpy: writing one step into a numpy array is ~5x cheaper than into a tensor;
        # the whole rollout becomes tensors, without a copy, for the update)
        obs = np.zeros((args.num_steps, num_envs, obs_dim), np.float32)
        actions = np.zeros((args.num_steps, num_envs) + act_space.shape, np.int64 if discrete else np.float32)
        logprobs = np.zeros((args.num_steps, num_envs), np.float32)
        rewards = np.zeros((args.num_steps, num_envs), np.float32)
        dones = np.zeros((args.num_steps, num_envs), np.float32)
        values = np.zeros((args.num_steps, num_envs), np.float32)

        # Start the game
        saved_step = global_step if ckpt else None  # the global step of the newest checkpoint on disk

        def checkpoint_note():
            if saved_step is None:
                return "no checkpoint was written yet"
            return f"the last checkpoint {run_dir / CHECKPOINT_NAME} (global step {saved_step}) is intact"

        done_step, done_update = global_step, start_update  # the last completed update (what Ctrl-C saves)
        start_time, start_step = time.time(), global_step
        raw_obs, _ = envs.reset(seed=args.seed + global_step)
        next_obs = normalizer.normalize_obs(raw_obs)
        next_done = np.zeros(num_envs, np.float32)
        pbar = tqdm(total=num_iterations * batch_size, initial=global_step, unit="step", dynamic_ncols=True,
                    desc=f"{args.env_id}", disable=None)  # fmt: skip
        status_every = max(1, num_iterations // 20)
        ready = True
        if ckpt:
            print(
                f"resuming {run_dir} at global step {global_step} (update {start_update}/{num_iterations})", flush=True
            )

        for iteration in range(start_update + 1, num_iterations + 1):
            # Annealing the rate if instructed to do so: lr decays linearly to 0 at the last update.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            # ---- ROLLOUT: num_steps x num_envs transitions with the current policy --------------------------------
            for step in range(args.num_steps):
                global_step += num_envs
                obs[step] = next_obs
                dones[step] = next_done

                # a_t ~ pi_theta_old(.|s_t), log pi_theta_old(a_t|s_t), V(s_t)
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(torch.from_numpy(next_obs))
                action = action.numpy()
                actions[step] = action
                logprobs[step] = logprob.numpy()
                values[step] = value.numpy().ravel()

                raw_obs, reward, terminated, truncated, infos = envs.step(env_action(act_space, action))
                if not (np.isfinite(raw_obs).all() and np.isfinite(reward).all()):
                    raise TrainError(
                        f"{args.env_id} returned NaN/inf observations or rewards at global step {global_step}: fix the "
                        f"env's observation/reward code ({checkpoint_note()})"
                    )
                done = np.logical_or(terminated, truncated)
                reward = normalizer.scale_reward(reward, done)
                if args.truncation_bootstrap and truncated.any():
                    # Time-limit truncation: r_t += gamma * V(s_final) (see bootstrap_truncated); termination: nothing.
                    final_values = np.zeros(num_envs)
                    cut = np.flatnonzero(np.logical_and(truncated, np.logical_not(terminated)))
                    if cut.size:
                        final_obs = np.stack(infos["final_obs"][cut]).astype(np.float32)
                        with torch.no_grad():
                            x = torch.from_numpy(normalizer.normalize_obs(final_obs, update=False))
                            final_values[cut] = agent.get_value(x).flatten().numpy()
                    reward = bootstrap_truncated(reward, terminated, truncated, final_values, args.gamma)
                rewards[step] = reward
                next_obs = normalizer.normalize_obs(raw_obs)
                next_done = done.astype(np.float32)

                if "_episode" in infos:
                    for i in np.flatnonzero(infos["_episode"]):
                        ep_r, ep_l = float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])
                        writer.add_scalar("charts/episodic_return", ep_r, global_step)
                        writer.add_scalar("charts/episodic_length", ep_l, global_step)
                        episodes_csv.writerow((global_step, ep_r, ep_l))
                        recent_returns.append(ep_r)

            # ---- ADVANTAGES: bootstrap value if not done, then GAE backwards -------------------------------------
            with torch.no_grad():
                next_value = agent.get_value(torch.from_numpy(next_obs)).numpy().reshape(1, -1)
            advantages, returns = compute_gae(
                rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda
            )

            # flatten the batch: (num_steps, num_envs, ...) -> (batch_size, ...)
            b_obs = torch.from_numpy(obs.reshape((-1, obs_dim)))
            b_logprobs = torch.from_numpy(logprobs.reshape(-1))
            b_actions = torch.from_numpy(actions.reshape((-1,) + act_space.shape))
            b_advantages = torch.from_numpy(advantages.reshape(-1))
            b_returns = torch.from_numpy(returns.reshape(-1))
            b_values = torch.from_numpy(values.reshape(-1))

            # ---- PPO UPDATE: update_epochs passes over shuffled minibatches ---------------------------------------
            b_inds = np.arange(batch_size)
            clipfracs, grad_norms, epochs_done = [], [], 0
            stop = False
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = torch.from_numpy(b_inds[start : start + minibatch_size])

                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                    # r_t(theta) = pi_theta(a|s) / pi_theta_old(a|s), computed in log space
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # KL(pi_old || pi_new) estimators, http://joschu.net/blog/kl-approx.html
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]
                    if args.target_kl is not None and grad_norms and approx_kl.item() > args.target_kl:
                        stop = True  # --target-kl: the policy moved far enough from pi_old; skip this and later steps
                        break

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:  # per-minibatch advantage normalisation
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                    # Policy loss: -L^CLIP = E[ max(-A r_t, -A clip(r_t, 1-eps, 1+eps)) ]
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                    # Value loss: L^VF = 0.5 * E[(V - R)^2], clipped around the rollout's values like the policy
                    newvalue = newvalue.view(-1)
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                        )
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                    else:
                        v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                    # Entropy bonus H[pi] (maximised, so subtracted from the loss)
                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                    if not torch.isfinite(loss):
                        raise TrainError(
                            f"the loss became NaN/inf at global step {global_step} (policy {pg_loss.item():.3g}, value "
                            f"{v_loss.item():.3g}); {checkpoint_note()}. Lower --learning-rate, turn on --norm-obs / "
                            "--norm-reward or check the env's reward scale, then --resume"
                        )

                    optimizer.zero_grad()
                    loss.backward()
                    # global gradient clipping; the pre-clip norm is the grad_norm diagnostic
                    grad_norms.append(nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm).item())
                    optimizer.step()
                if stop:
                    break
                epochs_done = epoch + 1

            y_pred, y_true = b_values.numpy(), b_returns.numpy()
            explained_var = explained_variance(y_pred, y_true)

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            sps = int((global_step - start_step) / max(time.time() - start_time, 1e-9))
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            if grad_norms:
                writer.add_scalar("diagnostics/grad_norm", float(np.mean(grad_norms)), global_step)
            writer.add_scalar("diagnostics/update_epochs_done", epochs_done, global_step)
            writer.add_scalar("charts/SPS", sps, global_step)

            done_step, done_update = global_step, iteration
            episodes_file.flush()
            if args.checkpoint_every and iteration % args.checkpoint_every == 0:
                writer.flush()
                checkpoint(run_dir / CHECKPOINT_NAME, global_step, iteration)
                saved_step = global_step
            mean_ret = float(np.mean(recent_returns)) if recent_returns else float("nan")
            pbar.update(global_step - pbar.n)
            pbar.set_postfix(SPS=sps, ret100=f"{mean_ret:.1f}", refresh=False)
            if pbar.disable and (iteration % status_every == 0 or iteration == num_iterations):
                print(f"global_step={global_step} SPS={sps} mean_return(last 100)={mean_ret:.1f}", flush=True)

        # ---- the end: final checkpoint + model, deterministic evaluation, learning curve ------------------------
        pbar.close()
        checkpoint(run_dir / CHECKPOINT_NAME, global_step, done_update)
        checkpoint(run_dir / MODEL_NAME, global_step, done_update)
        eval_mean = None
        if args.eval_episodes:
            eval_returns = evaluate(agent, normalizer, envs, act_space, args.eval_episodes, seed=args.seed + 10**6)
            if eval_returns:
                eval_mean = float(np.mean(eval_returns))
                writer.add_scalar("eval/episodic_return", eval_mean, global_step)
                print(f"eval: deterministic policy, {len(eval_returns)} episodes: mean return {eval_mean:.2f} "
                      f"+- {np.std(eval_returns):.2f} (min {min(eval_returns):.1f}, max {max(eval_returns):.1f})")  # fmt: skip
        episodes_file.flush()
        plot_learning_curve(run_dir, eval_mean, title=run_dir.name)
        print(f"run folder: {run_dir}  (model: {run_dir / MODEL_NAME}; tensorboard --logdir {run_dir.parent})")
        return 0
    except KeyboardInterrupt:
        if pbar is not None:
            pbar.close()
        if not ready:
            print("\ninterrupted before training started; nothing to save", file=sys.stderr)
            return 130
        checkpoint(run_dir / CHECKPOINT_NAME, done_step, done_update)
        print(
            f"\ninterrupted: checkpoint at global step {done_step} in {run_dir / CHECKPOINT_NAME}; "
            f"continue with: godot-ppo train --resume {run_dir}",
            file=sys.stderr,
        )
        if episodes_file is not None:
            episodes_file.flush()
            plot_learning_curve(run_dir, title=run_dir.name)
        return 130
    finally:
        if episodes_file is not None:
            episodes_file.close()
        if writer is not None:
            writer.close()
        envs.close()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = tyro.cli(
            Args, args=_bool_flag_aliases(argv), prog="godot-ppo train", description=__doc__.split("\n\n")[0]
        )
    except SystemExit as e:  # --help, or a bad flag (tyro printed why)
        return e.code if isinstance(e.code, int) else 0
    try:
        return train(args, explicit_fields(argv))
    except (TrainError, UnknownEnvError, UnsupportedSpaceError, MissingExportError) as e:
        print(f"godot-ppo train: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before training started (e.g. while the Godot instances were launching)
        print("\ngodot-ppo train: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
