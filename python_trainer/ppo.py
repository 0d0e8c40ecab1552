"""PPO in one file, in the shape of CleanRL's ppo.py (discrete) + ppo_continuous_action.py (continuous).

    godot-ppo train --env-id CartPole-v1 --total-timesteps 500000 --learning-rate 2.5e-4 \\
        --num-envs 4 --num-steps 128 --num-minibatches 4 --update-epochs 4
    godot-ppo train --env-id ball_chase --num-instances 2          # 2 Godot instances x 16 agents

This file is the algorithm and only the algorithm: its arguments (Args), the pure functions of the advantage
(bootstrap_truncated, compute_gae, explained_variance), and `iterations`, which runs CleanRL's loop one update at a
time: anneal the learning rate -> collect a rollout -> advantages -> update epochs over minibatches -> the numbers
to log. The equations (Schulman et al. 2017, 2016):

    delta_t  = r_t + gamma * V(s_{t+1}) * (1 - done_{t+1}) - V(s_t)            (TD error)
    A_t      = delta_t + gamma * lambda * (1 - done_{t+1}) * A_{t+1}            (GAE, backwards)
    R_t      = A_t + V(s_t)                                                     (value target)
    r_t(th)  = pi_th(a_t|s_t) / pi_th_old(a_t|s_t)                              (probability ratio)
    L^CLIP   = E[ min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t) ]                   (maximised -> we minimise -L)
    L^VF     = 0.5 * E[ max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) ]
    loss     = -L^CLIP - c_ent * H[pi] + c_vf * L^VF

What fills its slots lives next door: the agent (agent.py: an MLP with one actor head per action key, so a game may
mix continuous and discrete keys, on torch.distributions; fast_acting.py: the fast twins it runs in training;
recurrent.py: --lstm, CleanRL's ppo_atari_lstm.py), the bonus (rnd.py: --rnd, CleanRL's ppo_rnd_envpool.py, whose
lines are the `if bonus` blocks below), an auxiliary loss (cloning.py: --demos' behavioural cloning, added to each
minibatch's loss), the rollouts (rollout.py: CleanRL's rollout on this machine's games, pipelined; policies.py:
several policies in one game; ray_rollouts.py: Ray workers), the normaliser (normalization.py). The command around
the loop (flags, run folder, resume, checkpoints, signals, TensorBoard, evaluation) is train.py.
Differences from CleanRL, all on purpose: one actor head per action key; a truncated episode (time limit) is
bootstrapped with gamma * V(final obs) instead of being treated as a death; observation normalisation / reward
scaling are done by the normaliser (saved with the model) instead of by gym wrappers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np
import torch
import torch.nn as nn

from python_trainer.base.flags import Rule, at_least, flag, in_range, non_negative, positive
# Not torch.optim.Adam: optimizer.Adam runs torch.optim.Adam(fused=True)'s own kernel with the same state and state_dict
# (bit for bit, tests/test_optimizer.py) but without torch.optim's Python wrappers, which cost more than the step on
# networks this small, and without their import of torch._dynamo (1.3 s of every start-up).
from python_trainer.optimizer import Adam, clip_grad_norm


@dataclass
class Args:
    total_timesteps: int = flag(500000, at_least(0, "an integer >= 1 (0 only with --demos: the clone alone)", "500000"))
    """total timesteps of the experiments"""
    learning_rate: float = flag(2.5e-4, positive("2.5e-4"))
    """the learning rate of the optimizer"""
    num_steps: int = flag(128, at_least(1, "an integer >= 1", "128"))
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = flag(0.99, Rule(lambda v: 0 < v <= 1, "a discount in (0, 1]", "0.99"))
    """the discount factor gamma"""
    gae_lambda: float = flag(0.95, in_range(0, 1, "a number in [0, 1]", "0.95"))
    """the lambda for the general advantage estimation"""
    num_minibatches: int = flag(4, at_least(1, "an integer >= 1", "4"))
    """the number of mini-batches"""
    update_epochs: int = flag(4, at_least(1, "an integer >= 1", "4"))
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = flag(0.2, positive("0.2"))
    """the surrogate clipping coefficient"""
    clip: bool = True
    """the clipped surrogate objective L^CLIP (--no-clip: the unclipped E[r_t A_t], an ablation; the value loss
    keeps its own switch, --clip-vloss)"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = flag(0.01, non_negative("0.01"))
    """coefficient of the entropy"""
    vf_coef: float = flag(0.5, non_negative("0.5"))
    """coefficient of the value function"""
    max_grad_norm: float = flag(0.5, positive("0.5"))
    """the maximum norm for the gradient clipping"""
    truncation_bootstrap: bool = True
    """bootstrap time-limit truncations with gamma * V(final obs) (--no-truncation-bootstrap: CleanRL's behaviour,
    a truncation ends the return like a termination)"""
    target_kl: Optional[float] = flag(None, positive("0.02", "a number > 0 (typical: 0.01 to 0.05)"))
    """the target KL divergence threshold: stop the update epochs early when approx_kl exceeds it"""


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


class NonFiniteLoss(ArithmeticError):
    """The loss became NaN/inf, or (``weights``) a step with a finite loss took the weights there: the policy, value
    and auxiliary (cloning) losses of that minibatch are kept, for the message."""

    def __init__(self, pg_loss: float, v_loss: float, aux_loss: Optional[float] = None, weights: bool = False):
        what = "the weights became" if weights else "the loss became"
        aux = "" if aux_loss is None else f", cloning {aux_loss:.3g}"
        super().__init__(f"{what} NaN/inf (policy {pg_loss:.3g}, value {v_loss:.3g}{aux})")
        self.pg_loss, self.v_loss, self.aux_loss, self.weights = pg_loss, v_loss, aux_loss, weights


@dataclass
class Iteration:
    """What one update did: its number, the global step after it, and {TensorBoard tag: value} to log."""

    iteration: int
    global_step: int
    scalars: dict


def iterations(args: Args, agent: nn.Module, optimizer: Adam, rollouts, buf, normalizer,
               bonus=None, aux=None, *, num_iterations: int, start: int = 0, global_step: int = 0,
               time_share: Callable[[], float] = lambda: 0.0) -> Iterator[Iteration]:
    """PPO's loop from update ``start + 1`` to ``num_iterations``, yielding after each update (its rollout's ended
    episodes are in buf.episodes). ``rollouts``: rollout.Rollouts; ``buf``: its rollout.RolloutBuffer, with the
    first observations in buf.next_obs; ``bonus``: rnd.RND or None; ``aux``: an auxiliary loss or None, whose
    ``loss(agent, global_step)`` is added to each minibatch's loss and ``scalars(agent, global_step)`` to the update's
    (cloning.CloningLoss); ``time_share()``: the share of a wall-clock budget spent (run/clock.py). Raises
    rollout.NonFiniteEnvData for NaN/inf from the env and NonFiniteLoss for a NaN/inf loss."""
    num_envs = rollouts.num_envs
    batch_size = args.num_steps * num_envs
    obs_dim = buf.obs.shape[-1]
    params = optimizer.param_groups[0]["params"]
    for iteration in range(start + 1, num_iterations + 1):
        # Annealing the rate if instructed to do so: lr decays linearly to 0 at the last update (with a wall-clock
        # budget, train --max-seconds, by the larger of the two shares spent: the updates' and the time's).
        if args.anneal_lr:
            frac = 1.0 - max((iteration - 1.0) / num_iterations, time_share())
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        # ---- ROLLOUT: num_steps x num_envs transitions with the current policy ----------------------------------
        t_rollout = time.perf_counter()
        rollouts.collect(agent, normalizer, buf, bonus)
        global_step += batch_size
        t_rollout = time.perf_counter() - t_rollout

        # ---- ADVANTAGES: bootstrap value if not done, then GAE backwards ---------------------------------------
        rewards = buf.rewards
        if args.truncation_bootstrap:  # time-limit truncations: r_t + gamma * V(s_final) (see bootstrap_truncated)
            rewards = bootstrap_truncated(buf.rewards, buf.terminated, buf.truncated, buf.final_values, args.gamma)
        with torch.no_grad():
            next_values = agent.get_value(torch.from_numpy(buf.next_obs), buf.state, torch.from_numpy(buf.next_done))
            next_values = next_values.numpy()
        advantages, returns = compute_gae(
            rewards, buf.values[..., 0], buf.dones, next_values[:, 0], buf.next_done, args.gamma, args.gae_lambda
        )
        if bonus is not None:
            # RND: the intrinsic return is non-episodic (dones = 0: novelty keeps counting across resets), with its
            # own value output and discount; the policy's advantage mixes the two, A = c_ext A_ext + c_int A_int
            int_rewards = bonus.normalized_rewards(buf)
            no_dones = np.zeros_like(buf.dones)
            int_advantages, int_returns = compute_gae(
                int_rewards, buf.values[..., 1], no_dones, next_values[:, 1], no_dones[0], bonus.gamma, args.gae_lambda
            )
            advantages = bonus.combine(advantages, int_advantages)
            b_int_returns = torch.from_numpy(int_returns.reshape(-1))
            b_rnd_inputs, b_rnd_targets = bonus.prepare(buf.rnd_next_obs.reshape((-1, obs_dim)))

        # flatten the batch: (num_steps, num_envs, ...) -> (batch_size, ...)
        b_obs = buf.batch_obs()  # a tensor (a camera's images: uint8 rows, made float by each index_select)
        b_logprobs = torch.from_numpy(buf.logprobs.reshape(-1))
        b_actions = torch.from_numpy(buf.actions.reshape((-1,) + agent.action_shape))
        b_advantages = torch.from_numpy(advantages.reshape(-1))
        b_returns = torch.from_numpy(returns.reshape(-1))
        b_values = torch.from_numpy(buf.values[..., 0].reshape(-1))
        b_dones = torch.from_numpy(buf.dones.reshape(-1))

        # ---- PPO UPDATE: update_epochs passes over shuffled minibatches ------------------------------------------
        # (a recurrent agent's minibatches are whole envs, their steps in order, replayed from the rollout's start)
        t_update = time.perf_counter()
        b_inds = np.arange(batch_size)
        clipfracs, grad_norms, epochs_done = [], [], 0
        stop = False
        for epoch in range(args.update_epochs):
            for mb_inds, mb_envs in agent.minibatches(b_inds, args.num_steps, args.num_minibatches):
                mb_inds = torch.from_numpy(mb_inds)  # b_x[mb_inds], taken with index_select (a third of the cost)
                mb_obs, mb_actions, mb_logprobs, mb_advantages, mb_returns, mb_values, mb_dones = (
                    b.index_select(0, mb_inds)
                    for b in (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values, b_dones)
                )
                _, newlogprob, entropy, newvalues, _ = agent.get_action_and_value(
                    mb_obs, mb_actions, buf.initial_state[mb_envs], mb_dones
                )
                newvalue = newvalues[:, 0]
                # r_t(theta) = pi_theta(a|s) / pi_theta_old(a|s), computed in log space
                logratio = newlogprob - mb_logprobs
                ratio = logratio.exp()

                with torch.no_grad():
                    # KL(pi_old || pi_new) estimators, http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())
                if args.target_kl is not None and grad_norms and approx_kl.item() > args.target_kl:
                    stop = True  # --target-kl: the policy moved far enough from pi_old; skip this and later steps
                    break

                if args.norm_adv:  # per-minibatch advantage normalisation
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss: -L^CLIP = E[ max(-A r_t, -A clip(r_t, 1-eps, 1+eps)) ]
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean() if args.clip else pg_loss1.mean()

                # Value loss: L^VF = 0.5 * E[(V - R)^2], clipped around the rollout's values like the policy
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - mb_returns) ** 2
                    v_clipped = mb_values + torch.clamp(newvalue - mb_values, -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - mb_returns) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()

                # Entropy bonus H[pi] (maximised, so subtracted from the loss)
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                if bonus is not None:  # + c_vf * L^VF_int (unclipped, as in the RND paper) + the predictor's loss
                    int_v_loss = 0.5 * ((newvalues[:, 1] - b_int_returns.index_select(0, mb_inds)) ** 2).mean()
                    rnd_loss = bonus.predictor_loss(b_rnd_inputs.index_select(0, mb_inds),
                                                    b_rnd_targets.index_select(0, mb_inds))
                    loss = loss + int_v_loss * args.vf_coef + rnd_loss
                if aux is not None:  # e.g. + c_bc(t) * L^BC on demonstrations (cloning.py)
                    aux_loss = aux.loss(agent, global_step)
                    loss = loss + aux_loss
                if not torch.isfinite(loss):
                    raise NonFiniteLoss(pg_loss.item(), v_loss.item(), None if aux is None else float(aux_loss))

                optimizer.zero_grad()
                loss.backward()
                # global gradient clipping; the pre-clip norm is the grad_norm diagnostic
                grad_norms.append(clip_grad_norm(params, args.max_grad_norm))
                optimizer.step()
            if stop:
                break
            epochs_done = epoch + 1
        if grad_norms and not torch.stack([torch.isfinite(p).all() for p in params]).all():  # e.g. a huge lr
            raise NonFiniteLoss(pg_loss.item(), v_loss.item(), weights=True)
        t_update = time.perf_counter() - t_update

        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        explained_var = explained_variance(y_pred, y_true)

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        scalars = {
            "charts/learning_rate": optimizer.param_groups[0]["lr"],
            "losses/value_loss": v_loss.item(),
            "losses/policy_loss": pg_loss.item(),
            "losses/entropy": entropy_loss.item(),
            "losses/old_approx_kl": old_approx_kl.item(),
            "losses/approx_kl": approx_kl.item(),
            "losses/clipfrac": torch.stack(clipfracs).mean().item(),
            "losses/explained_variance": explained_var,
            **({"diagnostics/grad_norm": torch.stack(grad_norms).mean().item()} if grad_norms else {}),
            "diagnostics/update_epochs_done": epochs_done,
            # where the iteration's time went (the train command adds perf/other_s: everything else)
            "perf/rollout_s": t_rollout, "perf/policy_s": buf.policy_s, "perf/env_wait_s": buf.env_wait_s,
            "perf/update_s": t_update,
        }
        if bonus is not None:  # charts/episodic_return stays the game's (extrinsic) return
            scalars.update({
                "charts/intrinsic_reward": float(int_rewards.mean()),
                "charts/intrinsic_return": float(int_returns.mean()),
                "losses/intrinsic_value_loss": int_v_loss.item(),
                "losses/rnd_loss": rnd_loss.item(),
            })
        if aux is not None:
            scalars.update(aux.scalars(agent, global_step))
        yield Iteration(iteration, global_step, scalars)
