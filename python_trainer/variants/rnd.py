"""Random Network Distillation (Burda et al. 2018, "Exploration by Random Network Distillation"): a curiosity bonus.

A fixed, randomly initialised *target* network maps an observation to a feature vector; a *predictor* network is
trained to output the same vector. On observations the agent has seen often the predictor has learned the target
and the error is small; on novel ones it is large. That error is the intrinsic reward.

It fills the bonus slot of ppo.py and the rollout (--rnd); the lines CleanRL's ppo_rnd_envpool.py adds to ppo.py:

    bonus = RND(obs_dim, ext_coef, int_coef)               # bonus.predictor's parameters join the optimizer
    ...before training: a few dozen steps of random actions, bonus.update_obs_stats(obs) on each (the paper's
       warm-up: whitening with statistics of nothing would make the first bonuses meaningless; the rollouts run it)
    ...rollout, after envs.step(): bonus.rate(buf, t, envs, obs, done, infos)
        the observation reached (infos["final_obs"] where an episode ended: the goal state itself must be rated,
        not the next episode's start) and its raw bonus, into buf.rnd_next_obs / buf.int_rewards
    ...after the rollout (ppo.py):
        int_rewards = bonus.normalized_rewards(buf)        # folds in the rollout's observations, then / return std
        int_advantages via GAE with dones = 0 (non-episodic) and gamma = bonus.gamma, on the second value output
        advantages = bonus.combine(ext_advantages, int_advantages)    # ext_coef * A_ext + int_coef * A_int
    ...each minibatch:
        inputs, targets = bonus.prepare(rollout's reached observations)     # once per update
        loss = pg_loss - ent_coef * entropy + vf_coef * (v_loss_ext + v_loss_int) + bonus.predictor_loss(inputs[mb],
                                                                                                   targets[mb])

Two normalisations, as in the paper:
- the networks see observations whitened by their own running statistics and clipped to [-5, 5] (the policy's
  observation normaliser is separate: RND must not change when the policy's normalisation is switched off);
- the intrinsic reward is divided by a running estimate of the standard deviation of the *discounted intrinsic
  return*, so its scale stays comparable across games and over training while its mean is kept (a falling bonus
  must stay visible as falling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from python_trainer.base.combinations import refusal
from python_trainer.base.flags import GoesWith, at_least, flag, non_negative
from python_trainer.base.running_stats import RunningMeanStd

# The paper's settings for the bonus (Table 5 of Burda et al.): the intrinsic return is discounted with 0.99 (the
# extrinsic one with 0.999 there; our trainer keeps its own gamma), the advantages are mixed 2:1 (extrinsic to
# intrinsic), and each sample trains the predictor with probability 0.25 so the bonus does not vanish too fast when
# many environments run in parallel.
INT_GAMMA = 0.99
EXT_COEF = 2.0
INT_COEF = 1.0
UPDATE_PROPORTION = 0.25
OBS_CLIP = 5.0


_WITH_RND = GoesWith("rnd", "the curiosity bonus", "--rnd")


@dataclass
class RNDArgs:
    rnd: bool = False
    """Random Network Distillation curiosity bonus (CleanRL's ppo_rnd_envpool.py; rnd.py): an intrinsic reward for
    novel observations, with its own value head and non-episodic return"""
    rnd_coef: float = flag(INT_COEF, non_negative("1"), goes_with=_WITH_RND)
    """with --rnd: the intrinsic advantages' weight (A = rnd_ext_coef * A_ext + rnd_coef * A_int)"""
    rnd_ext_coef: float = flag(EXT_COEF, non_negative("2"), goes_with=_WITH_RND)
    """with --rnd: the extrinsic advantages' weight"""
    rnd_warmup_steps: int = flag(50, at_least(0, "an integer >= 0", "50"), goes_with=_WITH_RND)
    """with --rnd: steps of random actions that prime RND's observation statistics before training"""


def resume_refusal(args, ckpt: dict) -> Optional[str]:
    """Why the checkpoint ``ckpt`` does not resume with this run's --rnd / --no-rnd (its RND networks and statistics
    are there, or not), in one line, or None."""
    saved = ckpt.get("args") or {}
    if bool(saved.get("rnd")) != args.rnd or (args.rnd and not ckpt.get("rnd")):
        had = "was trained with --rnd" if saved.get("rnd") else "was trained without --rnd (no RND networks or statistics)"
        return refusal("resume/rnd", where=f"--resume {args.resume}", had=had, asked="--rnd" if args.rnd else "--no-rnd")
    return None


def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers with LeakyReLU between them (none after the last), orthogonally initialised like CleanRL's."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(n_in, n_out)
        nn.init.orthogonal_(linear.weight, np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(nn.LeakyReLU())
    return nn.Sequential(*layers)


class RunningDiscountedReturn:
    """Per-environment running sum R_t = gamma * R_{t-1} + r_t that never resets at episode ends: the intrinsic
    return is non-episodic (novelty found after a reset still counts as the continuation of the same search)."""

    def __init__(self, gamma: float):
        self.gamma = gamma
        self.returns: np.ndarray | None = None

    def update(self, rewards: np.ndarray) -> np.ndarray:
        """Folds in one step's rewards (num_envs,) and returns the running returns (a copy)."""
        rewards = np.asarray(rewards, dtype=np.float64)
        self.returns = rewards.copy() if self.returns is None else self.returns * self.gamma + rewards
        return self.returns.copy()


class RND(nn.Module):
    """Target and predictor networks plus the two normalisers.

    obs_dim:  length of a flat observation.
    feature_dim: size of the vector the predictor must match.
    hidden: width of the hidden layers. The predictor has one more layer than the target (as in the paper), so it
        can fit the target well where it has data and the remaining error measures novelty rather than capacity.
    """

    def __init__(
        self,
        obs_dim: int,
        ext_coef: float = EXT_COEF,
        int_coef: float = INT_COEF,
        feature_dim: int = 64,
        hidden: int = 128,
        int_gamma: float = INT_GAMMA,
        update_proportion: float = UPDATE_PROPORTION,
        obs_clip: float = OBS_CLIP,
        epsilon: float = 1e-8,
    ):
        super().__init__()
        self.target = _mlp([obs_dim, hidden, hidden, feature_dim])
        self.predictor = _mlp([obs_dim, hidden, hidden, hidden, feature_dim])
        for p in self.target.parameters():  # the target stays random forever
            p.requires_grad_(False)
        self.obs_rms = RunningMeanStd(shape=(obs_dim,))
        self.int_return_rms = RunningMeanStd(shape=())
        self.discounted = RunningDiscountedReturn(int_gamma)
        self.update_proportion, self.obs_clip, self.epsilon = update_proportion, obs_clip, epsilon
        self.gamma, self.ext_coef, self.int_coef = int_gamma, ext_coef, int_coef

    # ------------------------------------------------------------------------------------------ observations
    def update_obs_stats(self, obs: np.ndarray) -> None:
        """Folds a batch of raw observations (batch, obs_dim) into the running statistics RND whitens with."""
        self.obs_rms.update(np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_rms.mean.shape[0]))

    def normalize_obs(self, obs) -> torch.Tensor:
        """clip((obs - mean) / sqrt(var + eps), -5, 5) as float32: the networks' input."""
        obs = torch.as_tensor(obs, dtype=torch.float32)
        mean = torch.as_tensor(self.obs_rms.mean, dtype=torch.float32)
        std = torch.as_tensor(np.sqrt(self.obs_rms.var + self.epsilon), dtype=torch.float32)
        return ((obs - mean) / std).clamp(-self.obs_clip, self.obs_clip)

    # ------------------------------------------------------------------------------------------ the bonus
    def prediction_error(self, obs) -> torch.Tensor:
        """Per observation: mean over features of (predictor - target)^2, on whitened observations (batch,)."""
        x = self.normalize_obs(obs)
        return (self.predictor(x) - self.target(x)).pow(2).mean(-1)

    @torch.no_grad()
    def intrinsic_reward(self, next_obs) -> np.ndarray:
        """The raw (unnormalised) bonus of reaching each of ``next_obs`` (batch, obs_dim) -> (batch,) float32."""
        return self.prediction_error(next_obs).numpy().astype(np.float32)

    def rate(self, buf, t: int, envs, raw_obs, done, infos) -> None:
        """In the rollout, after step ``t`` of ``envs`` (a slice of the batch): the observation each env reached
        (the final one where an episode ended) and its raw bonus, into buf.rnd_next_obs and buf.int_rewards."""
        reached = np.array(raw_obs, dtype=np.float32)
        ended = np.flatnonzero(done)
        if ended.size:
            reached[ended] = np.stack(infos["final_obs"][ended])
        buf.rnd_next_obs[t, envs] = reached
        buf.int_rewards[t, envs] = self.intrinsic_reward(reached)

    def normalized_rewards(self, buf) -> np.ndarray:
        """After a rollout: fold its reached observations into the whitening statistics, then its raw bonuses divided
        by the running std of the intrinsic return (normalize_intrinsic)."""
        self.update_obs_stats(buf.rnd_next_obs.reshape(-1, buf.rnd_next_obs.shape[-1]))
        return self.normalize_intrinsic(buf.int_rewards)

    def combine(self, ext_advantages, int_advantages):
        """A = ext_coef * A_ext + int_coef * A_int (combine_advantages with this run's weights)."""
        return combine_advantages(ext_advantages, int_advantages, self.ext_coef, self.int_coef)

    def normalize_intrinsic(self, rewards: np.ndarray) -> np.ndarray:
        """Divides a rollout's raw bonuses (num_steps, num_envs) by the running std of the discounted intrinsic
        return, after folding this rollout's returns into that estimate. Call once per rollout, in time order."""
        rewards = np.asarray(rewards, dtype=np.float64)
        returns = np.stack([self.discounted.update(r) for r in rewards])  # (num_steps, num_envs), time order
        self.int_return_rms.update(returns.reshape(-1))
        return (rewards / np.sqrt(self.int_return_rms.var + self.epsilon)).astype(np.float32)

    @torch.no_grad()
    def prepare(self, next_obs) -> tuple[torch.Tensor, torch.Tensor]:
        """(the networks' input, the target's features) for a rollout's observations: both stay fixed through an
        update (the whitening statistics change once per rollout, the target never), so the update computes them
        once instead of once per minibatch and epoch."""
        x = self.normalize_obs(next_obs)
        return x, self.target(x)

    def predictor_loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The predictor's loss on a minibatch (`prepare`'s rows): the prediction error averaged over a random
        ``update_proportion`` of the samples (the others train nothing this time; see UPDATE_PROPORTION)."""
        error = (self.predictor(inputs) - targets).pow(2).mean(-1)
        mask = (torch.rand(error.shape[0]) < self.update_proportion).to(error.dtype)
        return (error * mask).sum() / mask.sum().clamp(min=1.0)

    # ------------------------------------------------------------------------------------------ checkpoints
    def stats_state_dict(self) -> dict:
        """The normalisers' state (the networks' weights are in ``state_dict()``); save both to resume."""
        returns = self.discounted.returns
        return {
            "obs_rms": self.obs_rms.state_dict(),
            "int_return_rms": self.int_return_rms.state_dict(),
            "discounted": None if returns is None else torch.from_numpy(returns.copy()),
        }

    def load_stats_state_dict(self, d: dict) -> None:
        self.obs_rms.load_state_dict(d["obs_rms"])
        self.int_return_rms.load_state_dict(d["int_return_rms"])
        self.discounted.returns = None if d["discounted"] is None else d["discounted"].numpy().copy()


def combine_advantages(ext_advantages, int_advantages, ext_coef: float = EXT_COEF, int_coef: float = INT_COEF):
    """A = ext_coef * A_ext + int_coef * A_int: each stream has its own value head and GAE (extrinsic episodic,
    intrinsic non-episodic), and only the policy sees their mix."""
    return ext_coef * ext_advantages + int_coef * int_advantages
