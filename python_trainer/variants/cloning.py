"""Behavioural cloning from demonstrations (--demos): pre-training the actor, then an auxiliary loss in PPO's update.

Maximum likelihood under the agent's own action heads (agent.py): for a demonstration step (s, a),

    L^BC = -E_demos[ log pi_theta(a|s) ]    (Gaussian heads for continuous keys, categorical ones for discrete keys,
                                              summed over keys: hybrid spaces clone like the others)

1. before PPO, `pretrain` minimises L^BC for --bc-epochs passes over the demonstrations (its own Adam), after the
   observation normaliser was seeded with the demonstrations' observations (`seed_normalizer`);
2. then `CloningLoss` fills ppo.iterations' auxiliary-loss slot: each minibatch adds

    c_bc(t) * L^BC(a batch of demonstration steps),   c_bc(t) = --bc-coef * max(0, 1 - t / --bc-anneal-steps)

   (ML-Agents' behavioral_cloning `strength` and `steps`), so PPO starts from the clone and leaves it gradually.

With --lstm the demonstrations are replayed in order: cut into sequences of SEQ_LEN steps whose memory starts empty
and is emptied again where an episode begins, as the rollout's own sequences are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from python_trainer.demos import Demos
from python_trainer.base.flags import GoesWith, at_least, flag, non_negative, positive
from python_trainer.optimizer import Adam, clip_grad_norm

SEQ_LEN = 32  # --lstm: the length of the demonstration sequences the LSTM is replayed over
FIT_SAMPLE = 2048  # demonstration steps the per-update accuracy / log-likelihood are measured on


DEMOS = GoesWith("demos", "behavioural cloning", "--demos FILE [FILE...]")  # what every --bc-* flag needs


@dataclass
class CloningArgs:
    demos: Optional[list[str]] = None
    """demonstration files (godot-ppo record, --record_demos, or godot_rl_agents' demo.json): behavioural cloning
    before PPO (--bc-epochs) and a cloning loss added to PPO's (--bc-coef); with --total-timesteps 0, the clone alone"""
    bc_epochs: int = flag(100, at_least(0, "an integer >= 0 (0: no pre-training)", "100"), goes_with=DEMOS)
    """with --demos: passes over the demonstrations that pre-train the actor before PPO"""
    bc_batch_size: int = flag(256, at_least(1, "an integer >= 1", "256"), goes_with=DEMOS)
    """with --demos: demonstration steps per gradient step (pre-training and each PPO minibatch's cloning loss)"""
    bc_learning_rate: float = flag(1e-3, positive("1e-3"), goes_with=DEMOS)
    """with --demos: the pre-training's learning rate"""
    bc_coef: float = flag(0.5, non_negative("0.5"), goes_with=DEMOS)
    """with --demos: the weight of the cloning loss added to PPO's loss at the start (0: pre-training only)"""
    bc_anneal_steps: int = flag(100000, at_least(0, "an integer >= 0 (0: no annealing)", "100000"), goes_with=DEMOS)
    """with --demos: the cloning loss's weight falls linearly to 0 over this many agent-steps (0: it stays)"""


def clones_only(args) -> bool:
    """--total-timesteps 0 with --demos: the cloned policy alone, no batch of PPO (so no batch need fit the budget)."""
    return args.total_timesteps == 0 and bool(args.demos)


def budget_refusal(args) -> Optional[str]:
    """Why --total-timesteps 0 trains nothing without --demos, in one line, or None."""
    if args.total_timesteps == 0 and not args.demos:
        return ("--total-timesteps 0 trains nothing: give --demos FILE [FILE...] (the cloned policy alone) or a budget "
                ">= 1, e.g. --total-timesteps 500000")
    return None


class CloningDiverged(ArithmeticError):
    """Pre-training's loss, or the actor's weights after a step of it, became NaN/inf (the message says which)."""


def seed_normalizer(normalizer, demos: Demos) -> None:
    """The observation normaliser starts from the demonstrations' statistics (when it normalises)."""
    if normalizer.norm_obs:
        normalizer.obs_rms.update(demos.obs.astype(np.float64))


class DemoBatches:
    """Batches of demonstration steps as the agent takes them: single steps for the MLP agent, time-major
    sequences of SEQ_LEN steps for a recurrent one (a unit is one step, or one sequence)."""

    def __init__(self, agent, demos: Demos):
        self.agent, self.demos = agent, demos
        self.seq = SEQ_LEN if agent.recurrent else 1
        self.units = math.ceil(demos.steps / self.seq)
        self.actions = torch.from_numpy(demos.actions)

    def batch(self, units: np.ndarray, normalizer):
        """(x, actions, state, done, mask) of these units, time-major; mask: the steps that exist (the last
        sequence may be short)."""
        t = np.arange(self.seq)[:, None]
        idx = units[None, :] * self.seq + t  # (seq, units)
        mask = idx < self.demos.steps
        idx = np.minimum(idx, self.demos.steps - 1)
        done = self.demos.starts[idx] | (t == 0)  # a sequence starts with an empty memory
        flat = idx.ravel()
        x = torch.from_numpy(normalizer.normalize_obs(self.demos.obs[flat], update=False))
        state = self.agent.initial_state(len(units))
        return (x, self.actions.index_select(0, torch.from_numpy(flat)), state,
                torch.from_numpy(done.ravel().astype(np.float32)), torch.from_numpy(mask.ravel().astype(np.float32)))

    def loss(self, units: np.ndarray, normalizer) -> torch.Tensor:
        """L^BC = -mean log pi(a|s) over the units' steps."""
        x, actions, state, done, mask = self.batch(units, normalizer)
        _, logprob, _, _, _ = self.agent.get_action_and_value(x, actions, state, done)
        return -(logprob * mask).sum() / mask.sum()

    def sample(self, rng: np.random.Generator, steps: int) -> np.ndarray:
        return rng.integers(0, self.units, max(1, steps // self.seq))

    @torch.no_grad()
    def fit(self, units: np.ndarray, normalizer) -> dict:
        """How well the policy matches these demonstration steps: the mean log-likelihood, the share of discrete
        choices its deterministic action (argmax) gets right, the mean distance of its continuous actions."""
        agent = self.agent
        x, actions, state, done, mask = self.batch(units, normalizer)
        _, logprob, _, _, _ = agent.get_action_and_value(x, actions, state, done)
        chosen, _ = agent.act(x, True, agent.initial_state(len(units)), done)
        keep = mask.bool()
        out = {"demos/log_likelihood": float(logprob[keep].mean())}
        if agent.discrete:
            out["demos/accuracy"] = float((chosen[keep] == actions[keep]).float().mean())
            return out
        n = agent.n_continuous
        if agent.logit_slices:
            out["demos/accuracy"] = float((chosen[keep, n:] == actions[keep, n:]).float().mean())
        if n:
            out["demos/action_error"] = float((chosen[keep, :n].clamp(-1, 1) - actions[keep, :n]).abs().mean())
        return out


def pretrain(agent, normalizer, demos: Demos, args: CloningArgs, seed: int, log=print) -> dict:
    """--bc-epochs passes of L^BC over the demonstrations, shuffled, --bc-batch-size steps a gradient step; returns
    the fit to the demonstrations afterwards (DemoBatches.fit, over all of them)."""
    batches = DemoBatches(agent, demos)
    rng = np.random.default_rng(seed)
    params = list(agent.parameters())
    optimizer = Adam(params, lr=args.bc_learning_rate, eps=1e-5)
    per_batch = max(1, args.bc_batch_size // batches.seq)
    for epoch in range(args.bc_epochs):
        order = rng.permutation(batches.units)
        losses = []
        for start in range(0, len(order), per_batch):
            loss = batches.loss(order[start : start + per_batch], normalizer)
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                raise CloningDiverged(f"the loss became {losses[-1]} at epoch {epoch + 1}/{args.bc_epochs}")
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm(params, 1.0)  # (the critic has no gradient here: it is not cloned)
            optimizer.step()
        if epoch == 0 or (epoch + 1) % max(1, args.bc_epochs // 5) == 0 or epoch + 1 == args.bc_epochs:
            log(f"behavioural cloning: epoch {epoch + 1}/{args.bc_epochs}, loss {np.mean(losses):.4f}")
    if not torch.stack([torch.isfinite(p).all() for p in params]).all():  # the last step, from a finite loss
        raise CloningDiverged(f"the weights became NaN/inf at epoch {args.bc_epochs}/{args.bc_epochs}")
    return batches.fit(np.arange(batches.units), normalizer)


class CloningLoss:
    """ppo.iterations' auxiliary-loss slot: c_bc(t) * L^BC on a fresh batch of demonstration steps per minibatch,
    and the update's cloning scalars (losses/bc_loss, charts/bc_coef, demos/*)."""

    def __init__(self, agent, normalizer, demos: Demos, args: CloningArgs, seed: int):
        self.batches, self.normalizer = DemoBatches(agent, demos), normalizer
        self.coef, self.anneal_steps, self.batch_size = args.bc_coef, args.bc_anneal_steps, args.bc_batch_size
        self.rng = np.random.default_rng(seed)
        self.losses: list = []

    def weight(self, global_step: int) -> float:
        if not self.anneal_steps:
            return self.coef
        return self.coef * max(0.0, 1.0 - global_step / self.anneal_steps)

    def loss(self, agent, global_step: int):
        weight = self.weight(global_step)
        if weight <= 0:
            return 0.0
        loss = self.batches.loss(self.batches.sample(self.rng, self.batch_size), self.normalizer)
        self.losses.append(loss.item())
        return weight * loss

    def scalars(self, agent, global_step: int) -> dict:
        out = {"charts/bc_coef": self.weight(global_step)}
        if self.losses:
            out["losses/bc_loss"] = float(np.mean(self.losses))
            self.losses = []
        units = self.batches.sample(self.rng, FIT_SAMPLE) if self.batches.units * self.batches.seq > FIT_SAMPLE \
            else np.arange(self.batches.units)
        return {**out, **self.batches.fit(units, self.normalizer)}
