"""The fast twins of agent.py's heads, tanh and acting, which its Agent runs in training: the same numbers and random
draws at less cost per call.

agent.Agent is the agent the trainer builds (trained_agent.make_agent) and the one to read: its `pi` is written on
torch.distributions, as CleanRL's. With ``fast=True`` (the trainer's; the default) the same class runs these twins
instead of its torch.distributions lines, three changes of how, not of what:

* `pi` is Agent.pi written out: each head's log-probability and entropy without torch.distributions objects (half
  the cost per call on these tiny batches), a categorical head drawn by Gumbel-max as agent.Categorical draws it;
* `Tanh` runs numpy's tanh on a large minibatch (torch 2.13's CPU tanh took 7x as long), over its input when asked;
* `RolloutPolicy` acts in the rollout on numpy, with no autograd, the actor and the critic's first layers in one
  matrix product, and draws the very random numbers Agent.pi draws, in its order, so the same generator state gives
  the same actions.

tests/test_acting.py holds every twin to the reference draw by draw over a short rollout (the same actions, the
log-probabilities within 1e-6, the same random draws) and names the twin when they part: an edit to Agent.pi or
Agent.distributions is made here too, in `pi` and `RolloutPolicy._sample`. The game's in-engine actors sample with a
third twin, godot_project/addons/rl_sync/policy_sampling.gd (tests/test_fragment_mode.py holds it to
Agent.distributions). The training's numbers are these: tests/test_same_seed.py's fixtures were recorded with them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class _NumpyTanh(torch.autograd.Function):
    """y = tanh(x) by numpy's ufunc, dy/dx = 1 - y^2 (torch's own tanh_backward)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)  # the result in torch's own allocation (its alignment), as torch.tanh gives it
        np.tanh(x.detach().numpy(), out=y.numpy())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class _NumpyTanhInPlace(torch.autograd.Function):
    """_NumpyTanh written over its input, and its gradient over its saved output (the same numbers): for a layer's
    fresh output that only the next layer reads, so a minibatch's forward and backward allocate no buffer for the
    tanh. After the backward the output holds the gradient; autograd's version counters refuse a second backward
    through it (retain_graph), as for any in-place op."""

    @staticmethod
    def forward(ctx, x):
        np.tanh(x.detach().numpy(), out=x.detach().numpy())
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors  # the next layer's backward, which read y, has run: y is ours to overwrite
        return torch.ops.aten.tanh_backward.grad_input(grad, y, grad_input=y)


class Tanh(nn.Tanh):
    """nn.Tanh whose forward runs numpy's tanh on a large float32 CPU batch: torch 2.13's CPU tanh took about 7x as long
    on one machine here (240 against 33 us for a 1024 x 64 minibatch), a quarter of an update's time, and the
    numbers differ in the last bit only. A small batch (acting, CartPole's 128-row minibatches) keeps torch's, whose
    call costs less than the autograd Function's. ``inplace=True`` (nn.ReLU's option, for the output of the Linear
    layer before it, which only the next layer reads): the large batch's tanh and its gradient overwrite their
    inputs, which keeps the update's working set in the caches (7% to 9% of an update's time on one machine
    here). Still an nn.Tanh, so the policy file and the numpy acting path read it as one; it has no parameters, so
    checkpoints keep their keys."""

    NUMPY_FROM = 16384  # elements: 256 rows of a 64-wide layer

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        if x.numel() >= self.NUMPY_FROM and x.dtype == torch.float32 and x.device.type == "cpu":
            if self.inplace and x.is_contiguous() and x._base is None:
                return _NumpyTanhInPlace.apply(x)
            return _NumpyTanh.apply(x)
        return torch.tanh(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""




def pi(agent, out, action=None):
    """agent.Agent.pi written out, the trainer's: (a ~ pi(.|s) unless given, log pi(a|s), H[pi(.|s)]) from the
    actor's output ``out`` of ``agent`` (its heads' layout: discrete, n_continuous, logit_slices, actor_logstd)."""
    if agent.discrete:  # Categorical over softmax(logits)
        logp = torch.log_softmax(out, dim=-1)  # log pi(.|s)
        if action is None:  # Gumbel-max trick: argmax(log p + G), G = -log(Exp(1)) ~ Gumbel, samples a ~ p
            action = (logp - torch.empty_like(logp).exponential_().log()).argmax(-1)
        logprob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)  # H = -sum_a p log p
        return action, logprob, entropy
    logprob = entropy = 0.0
    parts = []  # the sampled action's columns
    if agent.n_continuous:
        # Normal(mean, std) per continuous dimension, independent: log-probabilities and entropies add up
        mean = out[:, : agent.n_continuous]
        log_std = agent.actor_logstd.expand_as(mean)
        std = log_std.exp()
        a = mean + std * torch.randn_like(mean) if action is None else action[:, : agent.n_continuous]
        logprob = (-0.5 * ((a - mean) / std) ** 2 - log_std - _HALF_LOG_2PI).sum(1)
        entropy = (0.5 + _HALF_LOG_2PI + log_std).sum(1)
        parts.append(a)
    for j, (start, end) in enumerate(agent.logit_slices):  # one Categorical per discrete head, as above
        logp = torch.log_softmax(out[:, start:end], dim=-1)
        if action is None:
            a = (logp - torch.empty_like(logp).exponential_().log()).argmax(-1)
        else:
            a = action[:, agent.n_continuous + j].long()
        logprob = logprob + logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        entropy = entropy - (logp.exp() * logp).sum(-1)
        parts.append(a.unsqueeze(-1).to(out.dtype))
    if action is None:
        action = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
    return action, logprob, entropy


# ======================================================================================================================
# Acting in a rollout: get_action_and_value's numbers on numpy, actor and critic in one product per layer
# ======================================================================================================================
def _numpy_layers(sequential) -> list:
    """[(weight (out, in), bias, tanh?)] of a Sequential of Linear and Tanh layers, as float32 numpy."""
    layers = []
    for module in sequential:
        if isinstance(module, nn.Linear):
            layers.append([module.weight.detach().numpy(), module.bias.detach().numpy(), False])
        elif isinstance(module, nn.Tanh):
            layers[-1][2] = True
        else:
            raise TypeError(f"cannot fuse {type(module).__name__}")
    return layers


def _transposed(layers) -> list:
    return [(np.ascontiguousarray(w.T), b, tanh) for w, b, tanh in layers]


class Fused:
    """The actor and the critic (Sequentials of Linear/Tanh on the same input) as one forward pass on numpy: their
    first layers side by side in one matrix product, then each network's later layers on its own part."""

    def __init__(self, actor, critic):
        (wa, ba, ta), *actor_rest = _numpy_layers(actor)
        (wc, bc, tc), *critic_rest = _numpy_layers(critic)
        if ta != tc:
            raise TypeError("the actor's and the critic's first layers have different activations")
        self.first = (np.ascontiguousarray(np.concatenate([wa, wc]).T), np.concatenate([ba, bc]), ta)
        self.split = wa.shape[0]  # the first layer's columns [0, split) are the actor's
        self.actor_rest, self.critic_rest = _transposed(actor_rest), _transposed(critic_rest)

    def __call__(self, x: np.ndarray, actor: bool = True) -> tuple:
        """(the actor's output or None, the critic's) for x (n, in)."""
        h = forward([self.first], x)
        out = forward(self.actor_rest, h[:, : self.split]) if actor else None
        return out, forward(self.critic_rest, h[:, self.split :])


def forward(layers, x: np.ndarray) -> np.ndarray:
    """x (n, in) through [(W^T, b, tanh?)]."""
    for w_t, b, tanh in layers:
        x = x @ w_t
        x += b
        if tanh:
            np.tanh(x, out=x)
    return x


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


class RolloutPolicy:
    """The agent's acting in a rollout (agent.Acting's fast twin): `Agent.get_action_and_value` without autograd,
    on numpy, giving (action, log pi(a|s), the critic's values, the state after x) for a batch of observations. The
    actor and the critic run as one network (`Fused`), and the random draws are the very calls on torch's generator
    that Agent.pi makes, in its order (a Gaussian draw for the continuous values, then an exponential one per
    discrete head), so the same generator state gives the same actions, and the same log-probabilities to float
    rounding. Built once per rollout from the weights as they are (the update changes them only between rollouts); a
    subclass replaces `features` for an agent with memory."""

    def __init__(self, agent):
        self.heads = Fused(agent.actor, agent.critic)
        self.discrete, self.n_continuous, self.logit_slices = agent.discrete, agent.n_continuous, agent.logit_slices
        if self.n_continuous:
            self.log_std = agent.actor_logstd.detach().numpy()[0].astype(np.float32)
            self.std = np.exp(self.log_std)
            self.logprob_const = np.float32(-(self.log_std.sum() + self.n_continuous * _HALF_LOG_2PI))

    def features(self, x, state, done):
        return x, state

    def value(self, x: np.ndarray, state=None, done=None) -> np.ndarray:
        """The critic's values (n, n_values)."""
        return self.heads(self.features(x, state, done)[0], actor=False)[1]

    def __call__(self, x: np.ndarray, state=None, done=None):
        """a ~ pi(.|s), log pi(a|s), V(s) (n, n_values) and the state after x, for observations x (n, obs_dim)."""
        h, state = self.features(x, state, done)
        out, value = self.heads(h)
        action, logprob = self._sample(out)
        return action, logprob, value, state

    def _sample(self, out):
        n = out.shape[0]
        if self.discrete:  # Gumbel-max, as Agent.pi: argmax(log p - log(Exp(1)))
            logp = _log_softmax(out)
            gumbel = torch.empty(logp.shape).exponential_().numpy()
            action = (logp - np.log(gumbel)).argmax(axis=1)
            return action, logp[np.arange(n), action]
        columns, logprob = [], np.zeros(n, np.float32)
        if self.n_continuous:  # a = mean + std * noise: log pi = sum(-noise^2 / 2 - log std - log(2 pi) / 2)
            noise = torch.randn(n, self.n_continuous).numpy()
            columns.append(out[:, : self.n_continuous] + self.std * noise)
            logprob = logprob + (-0.5 * noise * noise).sum(axis=1) + self.logprob_const
        for start, end in self.logit_slices:
            logp = _log_softmax(out[:, start:end])
            gumbel = torch.empty(logp.shape).exponential_().numpy()
            a = (logp - np.log(gumbel)).argmax(axis=1)
            logprob = logprob + logp[np.arange(n), a]
            columns.append(a[:, None].astype(np.float32))
        return (columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)), logprob
