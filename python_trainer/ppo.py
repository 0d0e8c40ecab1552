"""PPO in one file, in the shape of CleanRL's ppo.py (discrete) + ppo_continuous_action.py (continuous).

    godot-ppo train --env-id CartPole-v1 --total-timesteps 500000 --learning-rate 2.5e-4 \\
        --num-envs 4 --num-steps 128 --num-minibatches 4 --update-epochs 4
    godot-ppo train --env-id ball_chase --num-instances 2          # 2 Godot instances x 16 agents
    python -m python_trainer.ppo --help

Read top to bottom: Args -> normalisation -> the two pure functions (truncation bootstrap, GAE) -> Agent ->
the rollout (RolloutBuffer, collect_rollout) -> loading a trained agent -> train(): setup, rollout, GAE, PPO update,
logging. The equations (Schulman et al. 2017, 2016):

    delta_t  = r_t + gamma * V(s_{t+1}) * (1 - done_{t+1}) - V(s_t)            (TD error)
    A_t      = delta_t + gamma * lambda * (1 - done_{t+1}) * A_{t+1}            (GAE, backwards)
    R_t      = A_t + V(s_t)                                                     (value target)
    r_t(th)  = pi_th(a_t|s_t) / pi_th_old(a_t|s_t)                              (probability ratio)
    L^CLIP   = E[ min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t) ]                   (maximised -> we minimise -L)
    L^VF     = 0.5 * E[ max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) ]
    loss     = -L^CLIP - c_ent * H[pi] + c_vf * L^VF

Differences from CleanRL, all on purpose: one actor head per action key, so a game's action space may mix continuous
and discrete keys (pi(a|s) = prod over keys, log-probabilities and entropies summed; see Agent); a truncated episode
(time limit) is bootstrapped with gamma * V(final obs) instead of being treated as a death; observation
normalisation / reward scaling are done in this file (and saved with the model) instead of by gym wrappers;
checkpoints, --resume, Ctrl-C safety and a final deterministic eval.
The course unit's two stretch goals are flags: --lstm (CleanRL's ppo_atari_lstm.py: an LSTM between the encoder and
the heads, its state carried through the rollout and replayed by whole-env minibatches; recurrent.py) and --rnd
(CleanRL's ppo_rnd_envpool.py: an intrinsic reward stored with the extrinsic one, its own value output and
non-episodic GAE, A = c_ext A_ext + c_int A_int; rnd.py).
Around the loop, not in it: every flag checked before any game starts; one process per run folder (a lock);
SIGINT, SIGTERM and SIGHUP (cli.signal_policy), a crashed instance, a closed stdout or any other error once the
agent exists all write the checkpoint of the last completed update and print the --resume command.
With --ray-address the rollout comes from Ray workers on several machines (ray_rollouts.py): each runs
collect_rollout on its own games and the learner here fills its buffer with their fragments; the rest is unchanged.
The bookkeeping around the loop lives next door: checkpoint.py (the checkpoint file), run_folder.py (run folder,
--resume, args.json, episodes.csv, TensorBoard/progress, learning curve, evaluation), policy_file.py (the in-engine
player's policy.json, written with each checkpoint of a Godot game).
"""

from __future__ import annotations

import errno
import math
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro

from python_trainer import policy_file, recurrent
from python_trainer.rnd import EXT_COEF, INT_COEF, INT_GAMMA, RND, combine_advantages
from python_trainer.cli import hold_signals, signal_policy, signum_of
from python_trainer.checkpoint import (  # load_checkpoint / save_checkpoint: ppo.load_checkpoint etc. keep working
    CHECKPOINT_NAME,
    MODEL_NAME,
    checkpoint_in,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    space_from_dict,
    space_to_dict,
)
from python_trainer.game import GameError, GodotGame, resolve_env
from python_trainer.gym_env import DEFAULT_NUM_ENVS, MissingDependencyError, UnknownEnvError, UnsupportedSpaceError
from python_trainer.launcher import (
    DEFAULT_MAX_RESTARTS,
    InstanceCrashedError,
    InstanceStartError,
    WorkerLostError,
)
from python_trainer.protocol import DEFAULT_TIMEOUT_S, GodotConnectionError
from python_trainer.run_folder import (
    RunLock,
    RunLog,
    TrainError,
    discard_if_unused,
    evaluate,
    explicit_fields,
    new_run_dir,
    prepare_run,
    train_command,
    write_args_json,
)
from python_trainer.running_stats import RunningMeanStd

VIDEO_DIR = "videos"  # --capture-video's folder in the run folder, as CleanRL's videos/<run_name>
FINAL_VIDEO_SECONDS = 10.0
DEFAULT_ENV_ID = "CartPole-v1"  # CleanRL's default, when neither --env-id nor --env-path is given
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
    """write RUN_DIR/checkpoint.pt every this many updates (0: only at the end, and when stopped by SIGINT/SIGTERM/SIGHUP
    or an error)"""
    eval_episodes: int = 10
    """after training, evaluate the deterministic policy (argmax / mean action) over this many episodes (0: skip)"""
    capture_video: bool = False
    """record videos into RUN_DIR/videos/ (mp4): gymnasium ids, the first env's episodes during training with
    gymnasium's RecordVideo (CleanRL's schedule: episodes 0, 1, 8, 27, ..., 1000, then every 1000th); Godot games, the
    final policy playing in the windowed export after training (final.mp4, 10 s of game time)"""

    # --- environment ------------------------------------------------------------------------------------------
    env_id: Optional[str] = None
    """the id of the environment: a gymnasium id, or a game in --env-path's binary (default: CartPole-v1 without
    --env-path; the binary's default game with it; ball_chase is a game of this repository's export)"""
    env_path: Optional[str] = None
    """Godot games: an exported binary (headless or windowed) of any Godot 3 project that uses the rl_sync addon
    (default: this repository's exports/headless/rl_games.x86_64)"""
    num_envs: Optional[int] = None
    """the number of parallel environments (default: 4 for gymnasium ids; for Godot games the agents the instances
    report, num-instances x the game's agents per instance)"""
    num_instances: int = 1
    """Godot games: how many game processes to launch"""
    agents_per_instance: Optional[int] = None
    """Godot games: agents each process is asked to simulate (--agents; default: the game's own choice, which a
    game with a fixed number of agents keeps whatever is asked)"""
    speedup: Optional[float] = None
    """Godot games: engine time scale (default: the Godot env's)"""
    action_repeat: Optional[int] = None
    """Godot games: physics frames per decision step (default: the Godot env's)"""
    window: bool = False
    """Godot games: show the game windows instead of running headless"""
    watch: bool = False
    """Godot games: open one more window, outside the training batch, in which the policy plays inside the engine at
    real time from RUN_DIR/policy.json, reloaded at every checkpoint (Xvfb without $DISPLAY)"""
    watch_fps: int = 30
    """with --watch: the window's frame cap (it also runs at a lower CPU priority, so training keeps the CPU)"""
    max_restarts: int = DEFAULT_MAX_RESTARTS
    """Godot games: how many times each instance may be restarted after a crash or a hang before training stops
    (with a checkpoint)"""
    step_timeout: float = DEFAULT_TIMEOUT_S
    """Godot games: seconds an instance may take to answer one step before it counts as hung (and is restarted)"""

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
    clip: bool = True
    """the clipped surrogate objective L^CLIP (--no-clip: the unclipped E[r_t A_t], an ablation; the value loss
    keeps its own switch, --clip-vloss)"""
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
    lstm: bool = False
    """recurrent PPO (CleanRL's ppo_atari_lstm.py): an LSTM between the encoder and the actor/critic heads, its state
    carried across steps and reset where an episode ends; minibatches hold whole envs"""
    lstm_size: int = 64
    """with --lstm: the LSTM's hidden state size (the in-engine player's cost per agent grows with its square; 64
    after a 32-wide encoder keeps 16 agents under 5 ms per frame, see scripts/bench_playback.py)"""
    rnd: bool = False
    """Random Network Distillation curiosity bonus (CleanRL's ppo_rnd_envpool.py; rnd.py): an intrinsic reward for
    novel observations, with its own value head and non-episodic return"""
    rnd_coef: float = INT_COEF
    """with --rnd: the intrinsic advantages' weight (A = rnd_ext_coef * A_ext + rnd_coef * A_int)"""
    rnd_ext_coef: float = EXT_COEF
    """with --rnd: the extrinsic advantages' weight"""
    rnd_warmup_steps: int = 50
    """with --rnd: steps of random actions that prime RND's observation statistics before training"""
    pipeline: bool = True
    """Godot games with 2 or more instances: pipelined rollouts, half of the instances simulate while the actions of
    the other half are computed (the same data as --no-pipeline, which takes strict turns: all games wait for the
    trainer, then the trainer for all games)"""

    # --- several machines (Ray; see ray_rollouts.py and the README) --------------------------------------------
    ray_address: Optional[str] = None
    """collect the rollouts with --ray-workers Ray actors, each running --num-instances games on its own node:
    `local` starts a Ray on this machine for the run; HOST:PORT joins the cluster that `ray start --head` started"""
    ray_workers: int = 2
    """with --ray-address: how many rollout workers (the batch is their envs side by side)"""
    ray_cpus_per_worker: Optional[float] = None
    """with --ray-address: the CPUs each worker reserves on its node (default: --num-instances + 1)"""
    ray_max_restarts: int = 3
    """with --ray-address: how many times Ray restarts each worker that dies before training stops (with a
    checkpoint)"""



# ======================================================================================================================
# Observation normalisation and reward scaling (what CleanRL's ppo_continuous_action.py gets from
# gym.wrappers.NormalizeObservation / NormalizeReward), kept here so the statistics are saved with the model.
# ======================================================================================================================
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

    def scale_reward(self, rewards, dones, envs=slice(None)):
        """``envs``: which envs of the batch the rewards are (a group's slice in the rollout; default: all)."""
        rewards = np.asarray(rewards, dtype=np.float64)
        if not self.norm_reward:
            return rewards
        returns = self.returns[envs]  # a view: updating it updates self.returns
        returns[:] = returns * self.gamma + rewards
        self.return_rms.update(returns)
        returns[dones] = 0.0
        return np.clip(rewards / np.sqrt(self.return_rms.var + self.epsilon), -self.clip_reward, self.clip_reward)

    def state_dict(self):
        return {
            "norm_obs": self.norm_obs, "norm_reward": self.norm_reward, "gamma": self.gamma,
            "clip_obs": self.clip_obs, "clip_reward": self.clip_reward, "epsilon": self.epsilon,
            "obs_rms": self.obs_rms.state_dict(), "return_rms": self.return_rms.state_dict(),
        }  # fmt: skip

    def obs_statistics(self):
        """{mean, var, epsilon, clip} of the observation normalisation (None when it is off), for the policy file."""
        if not self.norm_obs:
            return None
        return {"mean": self.obs_rms.mean, "var": self.obs_rms.var, "epsilon": self.epsilon, "clip": self.clip_obs}

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


CONTINUOUS, DISCRETE = "continuous", "discrete"
ENCODER_OUT = 32  # --lstm: the encoder's output, the LSTM's input


def action_heads(action_space: gym.Space) -> list[tuple[Optional[str], str, int]]:
    """The actor's heads [(key, kind, size)] in the order of its outputs: the continuous values first (Gaussian
    means), then one categorical head (logits) per discrete choice.

    Discrete(n): one categorical head; 1-D Box(d): one Gaussian head of d values; MultiDiscrete(nvec): one categorical
    head per entry; Dict (a Godot game with action keys of both kinds, vec_env's hybrid space): its continuous keys,
    then its discrete keys, each in sorted key order (policy_file.action_keys lists them the same way).
    Raises ValueError for any other space.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return [(None, DISCRETE, int(action_space.n))]
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return [(None, CONTINUOUS, int(action_space.shape[0]))]
    if isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.shape) == 1:
        return [(str(i), DISCRETE, int(n)) for i, n in enumerate(action_space.nvec)]
    if isinstance(action_space, gym.spaces.Dict) and len(action_space.spaces):
        heads = []
        for key, space in action_space.spaces.items():
            if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
                heads.append((key, CONTINUOUS, int(space.shape[0])))
            elif isinstance(space, gym.spaces.Discrete):
                heads.append((key, DISCRETE, int(space.n)))
            else:
                raise ValueError(f"action key {key!r}: {space} is neither a 1-D Box nor Discrete")
        return sorted(heads, key=lambda h: (h[1] != CONTINUOUS, h[0]))
    raise ValueError(f"{action_space} is not Discrete, a 1-D Box, MultiDiscrete or a Dict of those")


class Agent(nn.Module):
    """One actor head per action key: a Categorical over logits for each discrete key, and Normal(mean, exp(log_std))
    with a state-independent log-std for the continuous values (the sampled, unclipped action is what the
    log-probability is computed on). The heads are slices of the actor's last layer (see action_heads); the keys are
    independent given s, so their log-probabilities and their entropies add up.

    For a Discrete space this is CleanRL's ppo.py (the action is one int64 index); for any other space the action
    is one flat float row: the continuous values, then one index per discrete head (a Box space: CleanRL's
    ppo_continuous_action.py).

    lstm_size > 0 (--lstm): CleanRL's ppo_atari_lstm.py, a shared 64-32 encoder, an LSTM, and the actor and critic as
    one linear layer each on its output. rnd (--rnd): the critic has a second output, the intrinsic value."""

    def __init__(self, obs_dim: int, action_space: gym.Space, lstm_size: int = 0, rnd: bool = False):
        super().__init__()
        self.heads = action_heads(action_space)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.n_continuous = sum(size for _, kind, size in self.heads if kind == CONTINUOUS)
        self.logit_slices = []  # (start, end) of each discrete head's logits in the actor's output
        n_out = self.n_continuous
        for _, kind, size in self.heads:
            if kind == DISCRETE:
                self.logit_slices.append((n_out, n_out + size))
                n_out += size
        # the rollout buffer's row per env: one int64 index (Discrete) or the flat float action
        self.action_shape = () if self.discrete else (self.n_continuous + len(self.logit_slices),)
        self.recurrent = lstm_size > 0
        n_values = 2 if rnd else 1  # V(s), and with RND the intrinsic value V_int(s): its own output (head)
        if self.recurrent:  # CleanRL's ppo_atari_lstm.py: a shared encoder -> LSTM -> one linear layer per head
            self.encoder = nn.Sequential(  # 64 -> 32: the LSTM's input, small so the in-engine step stays cheap
                layer_init(nn.Linear(obs_dim, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, ENCODER_OUT)),
                nn.Tanh(),
            )
            self.lstm = recurrent.LSTMCore(ENCODER_OUT, lstm_size)
            self.critic = nn.Sequential(layer_init(nn.Linear(lstm_size, n_values), std=1.0))
            self.actor = nn.Sequential(layer_init(nn.Linear(lstm_size, n_out), std=0.01))
        else:
            self.critic = nn.Sequential(
                layer_init(nn.Linear(obs_dim, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, n_values), std=1.0),
            )
            self.actor = nn.Sequential(  # continuous means, then each discrete head's logits
                layer_init(nn.Linear(obs_dim, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, n_out), std=0.01),
            )
        if self.n_continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, self.n_continuous))

    def features(self, x, lstm_state=None, done=None):
        """What the heads see: the observation itself (MLP: each head has its own 64-64 network), or the LSTM's
        output after the encoder, with the state after x ((T * N, obs_dim) time-major, done[t] = 1 where obs[t]
        starts an episode: the state is zeroed before it; recurrent.LSTMCore)."""
        if not self.recurrent:
            return x, None
        return self.lstm(self.encoder(x), lstm_state, done)

    def get_value(self, x, lstm_state=None, done=None):
        """V(s) as (batch, 1), or (batch, 2) = (V_ext, V_int) with RND."""
        return self.critic(self.features(x, lstm_state, done)[0])

    def get_action_and_value(self, x, action=None, lstm_state=None, done=None):
        """(a ~ pi(.|s) unless given, log pi(a|s), entropy H[pi(.|s)], V(s)), written out instead of going through
        torch.distributions (same numbers, half the per-call cost on these tiny batches). A recurrent agent takes
        the LSTM state before x and the done flags, and returns the state after x as a fifth element."""
        h, lstm_state = self.features(x, lstm_state, done)
        action, logprob, entropy = self._policy(self.actor(h), action)
        value = self.critic(h)
        return (action, logprob, entropy, value, lstm_state) if self.recurrent else (action, logprob, entropy, value)

    def _policy(self, out, action):
        """(action, log pi(a|s), H[pi(.|s)]) from the actor's output."""
        if self.discrete:  # Categorical over softmax(logits)
            logp = torch.log_softmax(out, dim=-1)  # log pi(.|s)
            if action is None:  # Gumbel-max trick: argmax(log p + G), G = -log(Exp(1)) ~ Gumbel, samples a ~ p
                action = (logp - torch.empty_like(logp).exponential_().log()).argmax(-1)
            logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            entropy = -(logp.exp() * logp).sum(-1)  # H = -sum_a p log p
            return action, logprob, entropy
        logprob = entropy = 0.0
        parts = []  # the sampled action's columns
        if self.n_continuous:
            # Normal(mean, std) per continuous dimension, independent: log-probabilities and entropies add up
            mean = out[:, : self.n_continuous]
            log_std = self.actor_logstd.expand_as(mean)
            std = log_std.exp()
            a = mean + std * torch.randn_like(mean) if action is None else action[:, : self.n_continuous]
            logprob = (-0.5 * ((a - mean) / std) ** 2 - log_std - _HALF_LOG_2PI).sum(1)
            entropy = (0.5 + _HALF_LOG_2PI + log_std).sum(1)
            parts.append(a)
        for j, (start, end) in enumerate(self.logit_slices):  # one Categorical per discrete head, as above
            logp = torch.log_softmax(out[:, start:end], dim=-1)
            if action is None:
                a = (logp - torch.empty_like(logp).exponential_().log()).argmax(-1)
            else:
                a = action[:, self.n_continuous + j].long()
            logprob = logprob + logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
            entropy = entropy - (logp.exp() * logp).sum(-1)
            parts.append(a.unsqueeze(-1).to(out.dtype))
        if action is None:
            action = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return action, logprob, entropy

    def act(self, x, deterministic=True, lstm_state=None, done=None):
        """Actions for playback/evaluation: the mean of each continuous value (unclipped), the argmax of each discrete
        head's logits. A recurrent agent returns (actions, the LSTM state after x)."""
        h, lstm_state = self.features(x, lstm_state, done)
        out = self.actor(h)
        if not deterministic:
            action = self._policy(out, None)[0]
        else:
            action = self._deterministic(out)
        return (action, lstm_state) if self.recurrent else action

    def _deterministic(self, out):
        if self.discrete:
            return out.argmax(dim=-1)
        parts = [out[:, : self.n_continuous]]
        parts += [out[:, start:end].argmax(-1, keepdim=True).to(out.dtype) for start, end in self.logit_slices]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def env_action(action_space, action):
    """The action sent to the env, from the agent's (see Agent): Box values clipped to the space (the unclipped sample
    stays in the buffer), discrete indices as integers; a Dict space gets {key: batched values}."""
    if isinstance(action_space, gym.spaces.Discrete):
        return action + int(action_space.start) if action_space.start else action
    if isinstance(action_space, gym.spaces.Box):
        return np.clip(action, action_space.low, action_space.high)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return action.astype(np.int64) + action_space.start
    out, column = {}, 0  # Dict: the flat row's columns, head by head
    for key, kind, size in action_heads(action_space):
        space = action_space[key]
        if kind == CONTINUOUS:
            out[key] = np.clip(action[:, column : column + size], space.low, space.high)
            column += size
        else:
            out[key] = action[:, column].astype(np.int64) + int(space.start)
            column += 1
    return out


# ======================================================================================================================
# The rollout: num_steps x num_envs transitions with the current policy. The same function fills the buffer here and,
# in a Ray run (ray_rollouts.py), each worker's part of it on the worker's own node.
# ======================================================================================================================
class NonFiniteEnvData(ValueError):
    """The env returned NaN/inf observations or rewards at rollout step ``t``."""

    def __init__(self, t):
        super().__init__(f"NaN/inf observations or rewards at rollout step {t}")
        self.t = t


class RolloutBuffer:
    """One rollout as (num_steps, num_envs, ...) numpy arrays (writing one step into a numpy array is ~5x cheaper than
    into a tensor; the whole rollout becomes tensors, without a copy, for the update).

    dones[t] = 1: obs[t] starts a new episode; rewards[t]: r_t (scaled); terminated/truncated[t]: how an episode
    ended at step t; final_values[t]: V(final obs) of an episode truncated at step t (bootstrap_truncated adds it);
    next_obs / next_done: s_T and its done after the last step; episodes: (t, infos) of the steps where episodes
    ended. A Ray worker's rollout fragment is this buffer for the worker's envs.
    A recurrent agent (--lstm): lstm_state, the LSTM state of each env carried from step to step and from rollout to
    rollout, and initial_state, its copy at the start of the rollout (what the update replays the rollout from).
    With RND (--rnd): int_rewards[t], the raw intrinsic reward of the observation reached at step t (the final one
    where an episode ended), rnd_next_obs[t] that raw observation, int_values[t] = V_int(s_t).
    """

    FIELDS = ("obs", "actions", "logprobs", "rewards", "dones", "values", "terminated", "truncated", "final_values",
              "next_obs", "next_done")  # fmt: skip

    def __init__(self, num_steps, num_envs, obs_dim, agent, rnd=False):
        self.obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)
        # actions: one int64 index per env for a Discrete space, else the flat float row of Agent (continuous values,
        # then one index per discrete key)
        self.actions = np.zeros((num_steps, num_envs) + agent.action_shape, np.int64 if agent.discrete else np.float32)
        self.logprobs = np.zeros((num_steps, num_envs), np.float32)
        self.rewards = np.zeros((num_steps, num_envs), np.float32)
        self.dones = np.zeros((num_steps, num_envs), np.float32)
        self.values = np.zeros((num_steps, num_envs), np.float32)
        self.terminated = np.zeros((num_steps, num_envs), bool)
        self.truncated = np.zeros((num_steps, num_envs), bool)
        self.final_values = np.zeros((num_steps, num_envs), np.float32)
        self.next_obs = np.zeros((num_envs, obs_dim), np.float32)
        self.next_done = np.zeros(num_envs, np.float32)
        self.episodes = []
        if agent.recurrent:
            self.lstm_state = agent.lstm.initial_state(num_envs)
            self.initial_state = recurrent.clone_state(self.lstm_state)
        if rnd:
            self.int_rewards = np.zeros((num_steps, num_envs), np.float32)
            self.int_values = np.zeros((num_steps, num_envs), np.float32)
            self.rnd_next_obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)


def collect_rollout(envs, agent, normalizer, buf, pipeline=True, rnd=None):
    """Fill ``buf`` with the current policy's next num_steps x num_envs transitions, from buf.next_obs on.

    The envs come in groups of whole instances (envs.groups: slices of the batch; one group for a gymnasium env or a
    single instance), served in a fixed order at every step: collect the group's results of the previous step, then
    choose and send its next actions. Pipelined, a group's actions go out at once, so it simulates while the trainer
    serves the next group; pipeline=False sends all groups' actions together (strict turns). The data, the
    normalisation updates and the RNG draws are the same either way. A recurrent agent's state is kept per env
    (buf.lstm_state), so each group carries its own envs' memories. ``rnd``: the RND module rating each reached
    observation (buf.int_rewards).
    """
    act_space = envs.single_action_space
    num_steps, groups = buf.obs.shape[0], envs.groups
    pipeline = pipeline and len(groups) > 1
    buf.episodes = []
    if agent.recurrent:  # the update replays the rollout from here
        buf.initial_state = recurrent.clone_state(buf.lstm_state)
    for step in range(num_steps + 1):  # the extra pass only collects the rollout's last step
        held = []
        for group, g in enumerate(groups):  # g: the group's envs
            if step > 0:  # r_{t-1} and s_t of the group's envs
                t = step - 1
                raw_obs, reward, terminated, truncated, infos = envs.step_wait(group)
                if not (np.isfinite(raw_obs).all() and np.isfinite(reward).all()):
                    raise NonFiniteEnvData(t)
                done = np.logical_or(terminated, truncated)
                buf.rewards[t, g] = normalizer.scale_reward(reward, done, g)
                buf.terminated[t, g], buf.truncated[t, g] = terminated, truncated
                final_values = buf.final_values[t, g]  # a view
                final_values[:] = 0.0
                cut = np.flatnonzero(np.logical_and(truncated, np.logical_not(terminated)))
                if cut.size:  # time-limit truncations: V(s_final), for bootstrap_truncated
                    final_obs = np.stack(infos["final_obs"][cut]).astype(np.float32)
                    with torch.no_grad():
                        x = torch.from_numpy(normalizer.normalize_obs(final_obs, update=False))
                        if agent.recurrent:  # the final obs continues its episode: the env's state as it is
                            envs_cut = np.arange(buf.obs.shape[1])[g][cut]
                            state = recurrent.select_envs(buf.lstm_state, envs_cut)
                            final_values[cut] = agent.get_value(x, state, torch.zeros(cut.size))[:, 0].numpy()
                        else:
                            final_values[cut] = agent.get_value(x)[:, 0].numpy()
                if rnd is not None:  # RND rates the observation reached: the final one where an episode ended
                    reached = np.array(raw_obs, dtype=np.float32)
                    ended = np.flatnonzero(done)
                    if ended.size:
                        reached[ended] = np.stack(infos["final_obs"][ended])
                    buf.rnd_next_obs[t, g] = reached
                    buf.int_rewards[t, g] = rnd.intrinsic_reward(reached)
                buf.next_obs[g] = normalizer.normalize_obs(raw_obs)
                buf.next_done[g] = done
                if "_episode" in infos or "_final_info" in infos:  # episodic return/length, logged by the caller
                    buf.episodes.append((t, infos))
            if step == num_steps:
                continue
            buf.obs[step, g] = buf.next_obs[g]
            buf.dones[step, g] = buf.next_done[g]

            # a_t ~ pi_theta_old(.|s_t), log pi_theta_old(a_t|s_t), V(s_t)
            with torch.no_grad():
                x = torch.from_numpy(buf.next_obs[g])
                if agent.recurrent:  # the group's envs' LSTM state, reset where obs starts an episode, then carried
                    h, c = buf.lstm_state
                    done_g = torch.from_numpy(buf.next_done[g])
                    action, logprob, _, value, (h[:, g], c[:, g]) = agent.get_action_and_value(
                        x, lstm_state=(h[:, g], c[:, g]), done=done_g
                    )
                else:
                    action, logprob, _, value = agent.get_action_and_value(x)
            action = action.numpy()
            buf.actions[step, g] = action
            buf.logprobs[step, g] = logprob.numpy()
            buf.values[step, g] = value[:, 0].numpy()
            if rnd is not None:
                buf.int_values[step, g] = value[:, 1].numpy()
            if pipeline:  # the group simulates while the next one is served
                envs.step_async(env_action(act_space, action), group)
            else:
                held.append((env_action(act_space, action), group))
        for group_actions, group in held:  # strict turns: every group's actions, once all are chosen
            envs.step_async(group_actions, group)


# ======================================================================================================================
# A trained agent from a checkpoint (checkpoint.py writes and reads the file), and its policy file for the engine.
# ======================================================================================================================
@dataclass
class LoadedAgent:
    agent: Agent
    normalizer: Normalizer
    observation_space: gym.spaces.Box
    action_space: gym.Space
    env_id: str
    global_step: int
    env_path: Optional[str] = None  # the export it was trained with (None: this repository's or a gymnasium id)
    lstm_state: Optional[tuple] = None  # a recurrent agent's memory of the envs it acts for (one row each)

    def act(self, obs, deterministic=True, done=None):
        """numpy observations (n, obs_dim) -> numpy env actions (normalised as in training, clipped to the space).

        A recurrent agent remembers: ``done[i]`` true where obs[i] starts a new episode forgets env i's past (a
        batch of another size starts from scratch)."""
        x = torch.from_numpy(self.normalizer.normalize_obs(np.atleast_2d(obs), update=False))
        with torch.no_grad():
            if self.agent.recurrent:
                if self.lstm_state is None or self.lstm_state[0].shape[1] != x.shape[0]:
                    self.lstm_state = self.agent.lstm.initial_state(x.shape[0])
                done = torch.zeros(x.shape[0]) if done is None else torch.as_tensor(np.asarray(done), dtype=torch.float32)
                action, self.lstm_state = self.agent.act(x, deterministic, self.lstm_state, done)
            else:
                action = self.agent.act(x, deterministic=deterministic)
        return env_action(self.action_space, action.numpy())


def agent_from_checkpoint(ckpt) -> LoadedAgent:
    """Rebuild the trained agent from a loaded checkpoint (load_checkpoint's dict), with its frozen normalisation."""
    observation_space = space_from_dict(ckpt["observation_space"])
    action_space = space_from_dict(ckpt["action_space"])
    obs_dim = int(np.prod(observation_space.shape))
    agent = Agent(obs_dim, action_space, **agent_options(ckpt.get("args") or {}))
    agent.load_state_dict(ckpt["model"])
    agent.eval()
    normalizer = Normalizer(obs_dim, 1, ckpt["normalizer"]["gamma"], False, False)
    normalizer.load_state_dict(ckpt["normalizer"])
    return LoadedAgent(agent, normalizer, observation_space, action_space, ckpt["env_id"], ckpt["global_step"],
                       (ckpt.get("args") or {}).get("env_path"))  # fmt: skip


def agent_options(args: dict) -> dict:
    """Agent's keyword arguments for a training's flags (Args as a dict; a checkpoint's "args")."""
    return {"lstm_size": int(args.get("lstm_size", 64)) if args.get("lstm") else 0, "rnd": bool(args.get("rnd"))}


def load_agent(path) -> LoadedAgent:
    """Rebuild the trained agent from model.pt / checkpoint.pt (or a run folder), with its frozen normalisation."""
    return agent_from_checkpoint(load_checkpoint(checkpoint_in(path)))


def game_policy(agent, normalizer, action_space, env_info, checkpoint_path, *, env_id, global_step, update, args):
    """The policy file's content (policy_file.py) for the actor in memory, as exported from ``checkpoint_path``.

    ``env_info``: the Godot game's (where the action keys come from); ``args``: the training's Args as a dict.
    Raises policy_file.PolicyFileError when the actor cannot be played in the engine (e.g. NaN weights).
    """
    from python_trainer.vec_env import spaces_from_env_info

    where = str(checkpoint_path)
    obs_dim = int((agent.encoder if agent.recurrent else agent.actor)[0].in_features)
    keys = policy_file.action_keys(spaces_from_env_info(env_info), obs_dim, action_space, where,
                                   env_info.get("env", "?"))  # fmt: skip
    source = policy_file.policy_source(checkpoint_path, global_step=global_step, update=update, trained_env=env_id,
                                       seed=args.get("seed"), command=train_command(args, Args),
                                       env_path=args.get("env_path"))  # fmt: skip
    recurrent_parts = {"encoder": agent.encoder, "lstm": agent.lstm.export_weights()} if agent.recurrent else {}
    return policy_file.policy_dict(agent.actor, normalizer.obs_statistics(), keys,
                                   env=str(env_info.get("env") or env_id), source=source, where=where,
                                   **recurrent_parts)  # fmt: skip


# ======================================================================================================================
# Argument checks and env options
# ======================================================================================================================
def _positive(v):
    return math.isfinite(v) and v > 0


def _non_negative(v):
    return math.isfinite(v) and v >= 0


# flag -> (valid?, what is valid, an example); None (a default chosen later) is always valid
_VALID_VALUES = {
    "learning_rate": (_positive, "a number > 0", "2.5e-4"),
    "gamma": (lambda v: 0 < v <= 1, "a discount in (0, 1]", "0.99"),
    "gae_lambda": (lambda v: 0 <= v <= 1, "a number in [0, 1]", "0.95"),
    "clip_coef": (_positive, "a number > 0", "0.2"),
    "ent_coef": (_non_negative, "a number >= 0", "0.01"),
    "vf_coef": (_non_negative, "a number >= 0", "0.5"),
    "max_grad_norm": (_positive, "a number > 0", "0.5"),
    "target_kl": (_positive, "a number > 0 (typical: 0.01 to 0.05)", "0.02"),
    "speedup": (_positive, "a number > 0 (the engine's time scale)", "8"),
    "action_repeat": (lambda v: v >= 1, "an integer >= 1 (physics frames per decision step)", "8"),
    "step_timeout": (_positive, "a number of seconds > 0", "60"),
    "max_restarts": (lambda v: v >= 0, "an integer >= 0", "3"),
    "num_envs": (lambda v: v >= 1, "an integer >= 1", "4"),
    "num_steps": (lambda v: v >= 1, "an integer >= 1", "128"),
    "num_minibatches": (lambda v: v >= 1, "an integer >= 1", "4"),
    "update_epochs": (lambda v: v >= 1, "an integer >= 1", "4"),
    "total_timesteps": (lambda v: v >= 1, "an integer >= 1", "500000"),
    "checkpoint_every": (lambda v: v >= 0, "an integer >= 0 (0: only at the end and on a stop)", "10"),
    "eval_episodes": (lambda v: v >= 0, "an integer >= 0 (0: skip)", "10"),
    "torch_threads": (lambda v: v >= 1, "an integer >= 1", "1"),
    "watch_fps": (lambda v: v >= 1, "an integer >= 1 (frames per second)", "30"),
    "ray_workers": (lambda v: v >= 1, "an integer >= 1 (rollout workers)", "2"),
    "ray_cpus_per_worker": (_positive, "a number of CPUs > 0", "3"),
    "ray_max_restarts": (lambda v: v >= 0, "an integer >= 0", "3"),
    "lstm_size": (lambda v: v >= 1, "an integer >= 1 (the LSTM's hidden state size)", "64"),
    "rnd_coef": (_non_negative, "a number >= 0", "1"),
    "rnd_ext_coef": (_non_negative, "a number >= 0", "2"),
    "rnd_warmup_steps": (lambda v: v >= 0, "an integer >= 0", "50"),
}


def _check_values(args):
    """Every flag that can be checked without a game, before any game starts or folder is made: one line each."""
    from python_trainer.vec_env import MAX_AGENTS_PER_INSTANCE, MAX_INSTANCES

    valid = dict(_VALID_VALUES)
    valid["num_instances"] = (lambda v: 1 <= v <= MAX_INSTANCES, f"1 to {MAX_INSTANCES} (one Godot process each; "
                              "more on one machine only contend for its cores and memory)", "2")  # fmt: skip
    valid["agents_per_instance"] = (lambda v: 1 <= v <= MAX_AGENTS_PER_INSTANCE, f"1 to {MAX_AGENTS_PER_INSTANCE} (an "
                                    "instance sets its agents up before it connects: spread more over more "
                                    "--num-instances)", "16")  # fmt: skip
    for name, (ok, what, example) in valid.items():
        value = getattr(args, name)
        if value is not None and not ok(value):
            flag = "--" + name.replace("_", "-")
            shown = f"{value:g}" if isinstance(value, float) else value
            raise TrainError(f"{flag} {shown} is not valid: give {what}, e.g. {flag} {example}")


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
    if args.lstm and num_envs % args.num_minibatches:
        raise TrainError(
            f"--lstm minibatches hold whole envs: {num_envs} envs do not split into --num-minibatches "
            f"{args.num_minibatches}; use a --num-minibatches that divides {num_envs}"
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


def _resolve_env(args):
    """A gymnasium id, or the `GodotGame` that --env-path / --env-id name (game.resolve_env decides which)."""
    if args.num_instances < 1:
        raise TrainError("--num-instances must be >= 1")
    env_id = args.env_id if args.env_id is not None or args.env_path is not None else DEFAULT_ENV_ID
    return resolve_env(env_id, args.env_path)


def _check_instance_sizes(args):
    """--num-envs, when given for a Godot game, must split evenly into --num-instances x --agents-per-instance."""
    if args.num_envs is None:
        return
    if args.agents_per_instance is None and args.num_envs % args.num_instances:
        raise TrainError(
            f"--num-envs {args.num_envs} is not a multiple of --num-instances {args.num_instances}: for Godot "
            "games num_envs = num_instances x agents_per_instance (give --agents-per-instance instead)"
        )
    per = args.agents_per_instance or args.num_envs // args.num_instances
    if args.num_envs != args.num_instances * per:
        raise TrainError(
            f"--num-envs {args.num_envs} disagrees with --num-instances {args.num_instances} x "
            f"--agents-per-instance {per} = {args.num_instances * per}: drop --num-envs or make them agree"
        )


def _record_final_video(run_dir, game, seed) -> None:
    """--capture-video of a Godot game: the run's policy.json played in the windowed export, as RUN_DIR/videos/final.mp4
    (a failed recording is reported; the trained model is saved already)."""
    from python_trainer.playback import PlaybackError, record

    out = Path(run_dir) / VIDEO_DIR / "final.mp4"
    try:
        record(Path(run_dir) / policy_file.POLICY_NAME, out, game, seed=seed, seconds=FINAL_VIDEO_SECONDS)
    except (PlaybackError, GameError, InstanceStartError, OSError) as e:
        print(f"warning: --capture-video: no video ({e})", file=sys.stderr, flush=True)


def _env_kwargs(args, game, global_step, run_dir):
    """make_vec_env's options: every env gets num_envs/seed/run_dir, Godot games the instance options."""
    env_kwargs = {"num_envs": args.num_envs, "seed": args.seed + global_step, "run_dir": str(run_dir)}
    if args.capture_video and not isinstance(game, GodotGame):
        env_kwargs["video_dir"] = str(Path(run_dir) / VIDEO_DIR)
    if isinstance(game, GodotGame):
        env_kwargs.update(
            num_instances=args.num_instances, agents_per_instance=args.agents_per_instance, headless=not args.window
        )
        if args.speedup is not None:
            env_kwargs["speedup"] = args.speedup
        if args.action_repeat is not None:
            env_kwargs["action_repeat"] = args.action_repeat
        env_kwargs.update(max_restarts=args.max_restarts, step_timeout=args.step_timeout)
    return env_kwargs


def _check_spaces(obs_space, act_space, ckpt, args, run_dir):
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise TrainError(f"unsupported observation space {obs_space}: the MLP agent needs flat Box observations")
    try:
        action_heads(act_space)
    except ValueError as e:
        raise TrainError(
            f"unsupported action space {act_space} ({e}): ppo.py handles Discrete, 1-D Box, MultiDiscrete and a Dict "
            "of 1-D Box and Discrete keys; wrap the env to expose one of those (e.g. MultiBinary(n) as MultiDiscrete)"
        ) from None
    if ckpt and (
        ckpt["observation_space"] != space_to_dict(obs_space) or ckpt["action_space"] != space_to_dict(act_space)
    ):
        raise TrainError(
            f"--resume {run_dir}: the checkpoint's spaces ({ckpt['observation_space']['shape']}, "
            f"{ckpt['action_space']}) differ from {args.env_id}'s now ({obs_space}, {act_space}); start a new run"
        )


def _check_resumed_model(args, ckpt):
    """--lstm / --lstm-size / --rnd must describe the model a resumed checkpoint holds; Ray workers run MLP agents."""
    if args.ray_address is not None and (args.lstm or args.rnd):
        flag = "--lstm" if args.lstm else "--rnd"
        raise TrainError(f"{flag} is not supported with --ray-address yet (the Ray workers run the MLP agent without "
                         f"RND): drop {flag} or --ray-address")  # fmt: skip
    if not ckpt:
        return
    saved = ckpt.get("args") or {}
    where = f"--resume {args.resume}"
    if bool(saved.get("lstm")) != args.lstm:
        had, has = ("an LSTM (--lstm)", "without --lstm") if saved.get("lstm") else ("no LSTM", "with --lstm")
        raise TrainError(f"{where}: the checkpoint's agent has {had}, and this run asks for one {has}: resume with the "
                         "run's own setting (drop the flag) or start a new run")  # fmt: skip
    if args.lstm and int(saved.get("lstm_size", args.lstm_size)) != args.lstm_size:
        raise TrainError(f"{where}: the checkpoint's LSTM has --lstm-size {saved.get('lstm_size')}, not "
                         f"{args.lstm_size}: drop --lstm-size or start a new run")  # fmt: skip
    if bool(saved.get("rnd")) != args.rnd or (args.rnd and not ckpt.get("rnd")):
        had = "was trained with --rnd" if saved.get("rnd") else "was trained without --rnd (no RND networks or statistics)"
        raise TrainError(f"{where}: the checkpoint {had}, and this run asks for {'--rnd' if args.rnd else '--no-rnd'}: "
                         "resume with the run's own setting (drop the flag) or start a new run")  # fmt: skip


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


# ======================================================================================================================
# Training
# ======================================================================================================================
def train(args: Args, explicit=frozenset()) -> int:
    from python_trainer.vec_env import make_vec_env

    args, run_dir, ckpt = prepare_run(args, set(explicit))  # --resume: flags not given come from its args.json
    _check_values(args)  # every flag that can be checked without a game: before any game starts
    _check_resumed_model(args, ckpt)
    ray_flags = sorted(set(explicit) & {"ray_workers", "ray_cpus_per_worker", "ray_max_restarts"})
    if args.ray_address is None and ray_flags:
        raise TrainError(f"--{ray_flags[0].replace('_', '-')} is for Ray rollout workers: add --ray-address local (this "
                         "machine) or --ray-address HOST:PORT (a cluster), or drop it")  # fmt: skip
    game = _resolve_env(args)  # an unknown id or a bad --env-path: the clear error before any folder exists
    if isinstance(game, GodotGame):
        # The game's name as the binary reports it, and its export's absolute path (a resume or `play` from another
        # folder finds it).
        args = replace(args, env_id=game.env, env_path=game.env_path if args.env_path is not None else None)
        _check_instance_sizes(args)
        if args.watch:
            game.require_addon("--watch")
    elif args.watch:
        raise TrainError(f"--watch shows a Godot game's window; {args.env_id} is a gymnasium env: drop --watch")
    if args.num_envs is not None or not isinstance(game, GodotGame):
        _check_sizes(args, args.num_envs or DEFAULT_NUM_ENVS)  # what can be checked before any game starts
    fresh = run_dir is None
    run_dir = run_dir or new_run_dir(args.run_dir_root, args.env_id, args.exp_name, args.seed)  # made exclusively
    global_step = ckpt["global_step"] if ckpt else 0
    start_update = ckpt["update"] if ckpt else 0

    # Seeding (and, when resuming, the RNG streams exactly where the checkpoint left them)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(max(1, args.torch_threads))
    if ckpt:
        set_rng_state(ckpt["rng"])

    # Env setup: a Godot game says how many agents each instance simulates, and so how many envs there are
    envs = lock = ray_workers = None
    try:
        lock = RunLock(run_dir, prefix="--resume " if ckpt else "")  # one training per run folder, until we end
        if args.ray_address is None:
            envs = make_vec_env(game, **_env_kwargs(args, game, global_step, run_dir))
        else:  # rollout workers on a Ray cluster, each with its own games (ray_rollouts.py)
            from python_trainer.ray_rollouts import RayRollouts

            envs = ray_workers = RayRollouts(game, args, run_dir, _env_kwargs(args, game, global_step, run_dir), _say)
        num_envs = envs.num_envs
        batch_size, minibatch_size = _check_sizes(args, num_envs)
    except BaseException:
        if envs is not None:
            envs.close()
        if fresh:
            discard_if_unused(run_dir)
        if lock is not None:
            lock.release()
        raise
    log = watcher = None
    ready = False  # set once the agent exists: from then on a stop or a crash saves a checkpoint
    try:
        num_iterations = args.total_timesteps // batch_size
        if args.agents_per_instance is not None and getattr(envs, "agents_per_instance", None) not in (None, args.agents_per_instance):
            print(f"note: {args.env_id} simulates {envs.agents_per_instance} agents per instance whatever "
                  f"--agents-per-instance says; training {num_envs} envs", file=sys.stderr, flush=True)  # fmt: skip
        game_settings = getattr(envs, "game_settings", None)  # Godot games: what the instances were given
        if game_settings is not None:
            print(envs.startup_line(), flush=True)
        write_args_json(run_dir, args, {"num_envs_resolved": num_envs, "batch_size": batch_size,
                                        "minibatch_size": minibatch_size, "num_iterations": num_iterations,
                                        **({"game_settings": game_settings} if game_settings else {})})  # fmt: skip
        obs_space, act_space = envs.single_observation_space, envs.single_action_space
        _check_spaces(obs_space, act_space, ckpt, args, run_dir)
        obs_dim = obs_space.shape[0]
        agent = Agent(obs_dim, act_space, **agent_options(asdict(args)))
        rnd = RND(obs_dim) if args.rnd else None  # --rnd: the curiosity bonus (rnd.py); its predictor trains with us
        continuous = agent.n_continuous > 0  # the normalisation defaults: CleanRL's continuous-action script
        norm_obs = continuous if args.norm_obs is None else args.norm_obs
        norm_reward = continuous if args.norm_reward is None else args.norm_reward

        # fused=True: the same Adam update in one kernel, ~4x faster on CPU for these small tensors
        params = list(agent.parameters()) + (list(rnd.predictor.parameters()) if rnd else [])
        optimizer = optim.Adam(params, lr=args.learning_rate, eps=1e-5, fused=True)
        normalizer = Normalizer(obs_dim, num_envs, args.gamma, norm_obs, norm_reward)
        if ckpt:
            agent.load_state_dict(ckpt["model"])
            if rnd is not None:
                rnd.load_state_dict(ckpt["rnd"]["model"])
                rnd.load_stats_state_dict(ckpt["rnd"]["stats"])
            optimizer.load_state_dict(ckpt["optimizer"])
            normalizer.load_state_dict(ckpt["normalizer"])
            norm_obs, norm_reward = normalizer.norm_obs, normalizer.norm_reward

        # TensorBoard, episodes.csv, progress (a resumed run drops what was logged after its checkpoint)
        log = RunLog(run_dir, global_step, resumed=bool(ckpt), hyperparameters={**asdict(args), "num_envs": num_envs,
                     "batch_size": batch_size, "minibatch_size": minibatch_size, "norm_obs": norm_obs,
                     "norm_reward": norm_reward})  # fmt: skip
        writer = log.writer
        env_info = getattr(envs, "env_info", None)  # Godot games: the in-engine player's policy.json goes with it

        def checkpoint(path, step, update):
            save_checkpoint(path, agent=agent, optimizer=optimizer, normalizer=normalizer, args=args, global_step=step,
                            update=update, observation_space=obs_space, action_space=act_space,
                            env_info=env_info, rnd=rnd)  # fmt: skip
            if env_info is not None:  # keep RUN_DIR/policy.json (the in-engine player's weights) up to date
                write_policy(path, step, update)

        def write_policy(path, step, update):
            policy_file.write_policy_or_warn(run_dir / policy_file.POLICY_NAME, lambda: game_policy(
                agent, normalizer, act_space, env_info, path, env_id=args.env_id, global_step=step, update=update,
                args=asdict(args)))  # fmt: skip

        # ALGO Logic: Storage setup
        buf = RolloutBuffer(args.num_steps, num_envs, obs_dim, agent, rnd=rnd is not None)

        # Start the game
        saved_step = global_step if ckpt else None  # the global step of the newest checkpoint on disk

        def checkpoint_note():
            if saved_step is None:
                return "no checkpoint was written yet"
            return f"the last checkpoint {run_dir / CHECKPOINT_NAME} (global step {saved_step}) is intact"

        if args.watch:  # a window plays RUN_DIR/policy.json, reloaded at each checkpoint; now: the actor as it starts
            from python_trainer.playback import start_policy_watcher

            write_policy(run_dir / CHECKPOINT_NAME, global_step, start_update)
            watcher = start_policy_watcher(run_dir / policy_file.POLICY_NAME, game, log_dir=run_dir / "logs",
                                           seed=args.seed, action_repeat=args.action_repeat or 1,
                                           fps=args.watch_fps, say=_say)  # fmt: skip
        done_step, done_update = global_step, start_update  # the last completed update (what Ctrl-C saves)
        start_time, start_step = time.time(), global_step
        if rnd is not None and not ckpt:  # RND whitens observations with statistics of random play (the paper's)
            envs.reset(seed=args.seed + global_step)
            for _ in range(args.rnd_warmup_steps):
                rnd.update_obs_stats(envs.step(envs.action_space.sample())[0])
        if ray_workers is None:  # (Ray workers reset their own envs)
            raw_obs, _ = envs.reset(seed=args.seed + global_step)
            buf.next_obs[:] = normalizer.normalize_obs(raw_obs)
        log.start_progress(total=num_iterations * batch_size, initial=global_step, desc=f"{args.env_id}",
                           num_iterations=num_iterations)  # fmt: skip
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
            try:
                if ray_workers is None:
                    collect_rollout(envs, agent, normalizer, buf, args.pipeline, rnd)
                else:  # each worker runs collect_rollout on its own node's games; their fragments fill buf
                    ray_workers.collect(agent, normalizer, buf)
                    ray_workers.log_scalars(writer, global_step + batch_size)  # per-worker steps/s, update costs
            except NonFiniteEnvData as e:
                raise TrainError(
                    f"{args.env_id} returned NaN/inf observations or rewards at global step "
                    f"{global_step + (e.t + 1) * num_envs}: fix the env's observation/reward code ({checkpoint_note()})"
                ) from None
            global_step += batch_size
            for t, infos in buf.episodes:  # episodic return/length -> TensorBoard and episodes.csv
                log.record_episodes(infos, global_step - batch_size + (t + 1) * num_envs)

            # ---- ADVANTAGES: bootstrap value if not done, then GAE backwards -------------------------------------
            rewards = buf.rewards
            if args.truncation_bootstrap:  # time-limit truncations: r_t + gamma * V(s_final) (see bootstrap_truncated)
                rewards = bootstrap_truncated(buf.rewards, buf.terminated, buf.truncated, buf.final_values, args.gamma)
            with torch.no_grad():
                next_values = agent.get_value(torch.from_numpy(buf.next_obs), *_lstm_args(agent, buf)).numpy()
            advantages, returns = compute_gae(
                rewards, buf.values, buf.dones, next_values[:, 0], buf.next_done, args.gamma, args.gae_lambda
            )
            if rnd is not None:
                # RND: the intrinsic return is non-episodic (dones = 0: novelty keeps counting across resets), with
                # its own value head and discount; the policy's advantage mixes the two, A = c_ext A_ext + c_int A_int
                rnd.update_obs_stats(buf.rnd_next_obs.reshape(-1, obs_dim))
                int_rewards = rnd.normalize_intrinsic(buf.int_rewards)
                no_dones = np.zeros_like(buf.dones)
                int_advantages, int_returns = compute_gae(
                    int_rewards, buf.int_values, no_dones, next_values[:, 1], no_dones[0], INT_GAMMA, args.gae_lambda
                )
                advantages = combine_advantages(advantages, int_advantages, args.rnd_ext_coef, args.rnd_coef)
                b_int_returns = torch.from_numpy(int_returns.reshape(-1))
                b_rnd_next_obs = torch.from_numpy(buf.rnd_next_obs.reshape((-1, obs_dim)))

            # flatten the batch: (num_steps, num_envs, ...) -> (batch_size, ...)
            b_obs = torch.from_numpy(buf.obs.reshape((-1, obs_dim)))
            b_logprobs = torch.from_numpy(buf.logprobs.reshape(-1))
            b_actions = torch.from_numpy(buf.actions.reshape((-1,) + agent.action_shape))
            b_advantages = torch.from_numpy(advantages.reshape(-1))
            b_returns = torch.from_numpy(returns.reshape(-1))
            b_values = torch.from_numpy(buf.values.reshape(-1))
            b_dones = torch.from_numpy(buf.dones.reshape(-1))

            # ---- PPO UPDATE: update_epochs passes over shuffled minibatches ---------------------------------------
            b_inds = np.arange(batch_size)
            clipfracs, grad_norms, epochs_done = [], [], 0
            stop = False
            for epoch in range(args.update_epochs):
                if agent.recurrent:  # minibatches of whole envs, their steps in order, replayed from the rollout's start
                    minibatches = recurrent.env_minibatches(args.num_steps, num_envs, args.num_minibatches, np.random)
                else:
                    np.random.shuffle(b_inds)
                    minibatches = ((None, b_inds[start : start + minibatch_size])
                                   for start in range(0, batch_size, minibatch_size))  # fmt: skip
                for mb_envs, mb_inds in minibatches:
                    mb_inds = torch.from_numpy(mb_inds)

                    if agent.recurrent:
                        mb_state = recurrent.select_envs(buf.initial_state, mb_envs)
                        _, newlogprob, entropy, newvalues, _ = agent.get_action_and_value(
                            b_obs[mb_inds], b_actions[mb_inds], mb_state, b_dones[mb_inds]
                        )
                    else:
                        _, newlogprob, entropy, newvalues = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                    newvalue = newvalues[:, 0]
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
                    pg_loss = torch.max(pg_loss1, pg_loss2).mean() if args.clip else pg_loss1.mean()

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
                    if rnd is not None:  # + c_vf * L^VF_int (unclipped, as in the RND paper) + the predictor's loss
                        int_v_loss = 0.5 * ((newvalues[:, 1] - b_int_returns[mb_inds]) ** 2).mean()
                        rnd_loss = rnd.predictor_loss(b_rnd_next_obs[mb_inds])
                        loss = loss + int_v_loss * args.vf_coef + rnd_loss
                    if not torch.isfinite(loss):
                        raise TrainError(
                            f"the loss became NaN/inf at global step {global_step} (policy {pg_loss.item():.3g}, value "
                            f"{v_loss.item():.3g}); {checkpoint_note()}. Lower --learning-rate, turn on --norm-obs / "
                            "--norm-reward or check the env's reward scale, then --resume"
                        )

                    optimizer.zero_grad()
                    loss.backward()
                    # global gradient clipping; the pre-clip norm is the grad_norm diagnostic
                    grad_norms.append(nn.utils.clip_grad_norm_(params, args.max_grad_norm).item())
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
            if rnd is not None:  # charts/episodic_return stays the game's (extrinsic) return
                writer.add_scalar("charts/intrinsic_reward", float(int_rewards.mean()), global_step)
                writer.add_scalar("charts/intrinsic_return", float(int_returns.mean()), global_step)
                writer.add_scalar("losses/intrinsic_value_loss", int_v_loss.item(), global_step)
                writer.add_scalar("losses/rnd_loss", rnd_loss.item(), global_step)

            # ---- CHECKPOINT (episodes.csv flushed first) and progress ------------------------------------------------
            done_step, done_update = global_step, iteration
            log.flush_episodes()
            if args.checkpoint_every and iteration % args.checkpoint_every == 0:
                writer.flush()
                checkpoint(run_dir / CHECKPOINT_NAME, global_step, iteration)
                saved_step = global_step
            log.progress(global_step, iteration, sps)

        # ---- the end: final checkpoint + model, deterministic evaluation, learning curve ------------------------
        log.close_progress()
        checkpoint(run_dir / CHECKPOINT_NAME, global_step, done_update)
        checkpoint(run_dir / MODEL_NAME, global_step, done_update)
        eval_mean = None
        if args.eval_episodes:
            policy = LoadedAgent(agent, normalizer, obs_space, act_space, args.env_id, global_step)
            if ray_workers is None:
                eval_returns = evaluate(policy.act, envs, args.eval_episodes, seed=args.seed + 10**6)
            else:  # on worker 0's games
                eval_returns = ray_workers.evaluate(policy.act, args.eval_episodes, seed=args.seed + 10**6)
            if eval_returns:
                eval_mean = float(np.mean(eval_returns))
                writer.add_scalar("eval/episodic_return", eval_mean, global_step)
                print(f"eval: deterministic policy, {len(eval_returns)} episodes: mean return {eval_mean:.2f} "
                      f"+- {np.std(eval_returns):.2f} (min {min(eval_returns):.1f}, max {max(eval_returns):.1f})")  # fmt: skip
        log.plot(eval_mean)
        if args.capture_video and isinstance(game, GodotGame):
            _record_final_video(run_dir, game, args.seed)
        print(f"run folder: {run_dir}  (model: {run_dir / MODEL_NAME}; tensorboard --logdir {run_dir.parent})")
        return 0
    except TrainError:
        raise  # NaN observations or loss: its message names the last checkpoint (the model may be diverging)
    except (KeyboardInterrupt, Exception) as e:
        # Ctrl-C, SIGTERM, SIGHUP (cli.Interrupted), an instance out of restarts, a closed stdout (`| head`), a bug:
        # the model in memory is intact, so the last completed update is saved first, with a second signal held off.
        with hold_signals():
            saved = False
            if ready:
                try:
                    checkpoint(run_dir / CHECKPOINT_NAME, done_step, done_update)
                    saved = True
                except Exception as save_error:
                    _say(f"godot-ppo train: could not write the checkpoint ({_one_line(save_error)}); "
                         f"{checkpoint_note()}")  # fmt: skip
            _quiet_closed_stdout()
            if log is not None:
                _best_effort(log.close_progress)
                if saved:
                    _best_effort(log.plot)
            if isinstance(e, KeyboardInterrupt):
                status, head = 128 + signum_of(e), f"\ninterrupted by {signal.Signals(signum_of(e)).name}: "
            else:
                status, head = 1, f"godot-ppo train: error: {_describe_crash(e, run_dir)}\n"
            if saved:
                _say(f"{head}checkpoint at global step {done_step} (the last completed update) in "
                     f"{run_dir / CHECKPOINT_NAME}; continue with: godot-ppo train --resume {run_dir}")  # fmt: skip
            else:
                kept = f"; {run_dir / CHECKPOINT_NAME} is unchanged" if ckpt else ""
                _say(f"{head}{'nothing saved' if ready else 'training had not started: nothing to save'}{kept}")
            return status
    finally:
        if watcher is not None:
            watcher.close()
        if log is not None:
            log.close()
        envs.close()
        lock.release()


def _lstm_args(agent, buf):
    """(lstm_state, done) after the rollout's last step, for V(s_T) of a recurrent agent; () for an MLP."""
    if not agent.recurrent:
        return ()
    return buf.lstm_state, torch.from_numpy(buf.next_done)


# ======================================================================================================================
# Stopping early: what is said, and saying it when the terminal or a pipe is gone
# ======================================================================================================================
def _say(msg):
    """A line on stderr, unless stderr is gone (a hung-up terminal, a closed pipe): the work is saved either way."""
    try:
        print(msg, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _best_effort(fn):
    try:
        fn()
    except Exception:
        pass


def _quiet_closed_stdout():
    """When stdout is a closed pipe (`| head`), point it at /dev/null: nothing more fails, and Python's own flush at
    exit prints no 'Exception ignored ... BrokenPipeError'."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def _one_line(e):
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def _describe_crash(e, run_dir):
    """One line for an error that ended training once the agent existed (the traceback of an unexpected one goes to
    RUN_DIR/error.log)."""
    if isinstance(e, BrokenPipeError):
        return "an output of the trainer was closed under it (broken pipe, e.g. `godot-ppo train ... | head`)"
    if isinstance(e, InstanceCrashedError):
        return f"{_one_line(e)} (--max-restarts allows more restarts)"
    if isinstance(e, (InstanceStartError, GodotConnectionError, GameError, WorkerLostError)):
        return _one_line(e)
    try:
        (run_dir / "error.log").write_text("".join(traceback.format_exception(e)))
        return f"{type(e).__name__}: {_one_line(e)} (traceback in {run_dir / 'error.log'})"
    except OSError:
        return f"{type(e).__name__}: {_one_line(e)}"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with signal_policy():  # SIGINT, SIGTERM and SIGHUP stop training like Ctrl-C (cli.py); `godot-ppo` installed it too
        try:
            args = tyro.cli(
                Args, args=_bool_flag_aliases(argv), prog="godot-ppo train", description=__doc__.split("\n\n")[0]
            )
        except SystemExit as e:  # --help, or a bad flag (tyro printed why)
            return e.code if isinstance(e.code, int) else 0
        try:
            return train(args, explicit_fields(argv, Args))
        except (TrainError, UnknownEnvError, UnsupportedSpaceError, MissingDependencyError, GameError) as e:
            _say(f"godot-ppo train: error: {e}")
            return 2
        except (InstanceStartError, InstanceCrashedError, GodotConnectionError, OSError) as e:  # before training
            _quiet_closed_stdout()
            if getattr(e, "errno", None) == errno.EADDRINUSE:  # the launcher binds port 0: no free local port left
                e = f"{e} (while opening a local port for a game instance: are the ephemeral ports used up?)"
            _say(f"godot-ppo train: error: {e}")
            return 1
        except KeyboardInterrupt as e:  # before training started (e.g. while the Godot instances were launching)
            _say(f"\ngodot-ppo train: interrupted by {signal.Signals(signum_of(e)).name}")
            return 128 + signum_of(e)


if __name__ == "__main__":
    sys.exit(main())
