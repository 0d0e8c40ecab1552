"""The agent: separate 64-64 tanh actor and critic (CleanRL's), orthogonal init, one actor head per action key.

One head per key, so a game's action space may mix continuous and discrete keys: a Categorical over logits for
each discrete key and Normal(mean, exp(log_std)) with a state-independent log-std for the continuous values; the
keys are independent given s, so pi(a|s) is their product (log-probabilities and entropies add up). For a Discrete
space this is CleanRL's ppo.py (the action is one int64 index); for any other space the action is one flat float
row: the continuous values, then one index per discrete head (a Box space: CleanRL's ppo_continuous_action.py).

The agent is the slot ppo.py and the rollout fill: whatever its kind (this MLP, or recurrent.RecurrentAgent), they
call the same methods, and an agent without memory simply has none:

    state = agent.initial_state(num_envs)                        # NO_STATE here; an LSTM's (h, c) there
    action, logprob, entropy, value, state = agent.get_action_and_value(x, action=None, state, done)
    value = agent.get_value(x, state, done)                      # (batch, 1), or (batch, 2) with RND's V_int
    for mb_inds, mb_envs in agent.minibatches(b_inds, num_steps, num_minibatches): ...   # one epoch
    action, state = agent.act(x, deterministic=True, state, done)                       # playback, evaluation
    policy = agent.rollout_policy()    # acting in a rollout: the same numbers on numpy, no autograd (RolloutPolicy)

``done[t] = 1`` where obs[t] starts an episode (see recurrent.py); `env_action` turns the agent's action into the
env's (Box values clipped to the space, discrete indices as integers, a Dict space's {key: values}).
"""

from __future__ import annotations

import math
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

CONTINUOUS, DISCRETE = "continuous", "discrete"
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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


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


class NoState:
    """The memory of an agent that has none: indexing it, storing into it and copying it all give nothing, so the
    rollout and the update treat every agent's state alike."""

    def __getitem__(self, envs):
        return self

    def __setitem__(self, envs, value):
        pass

    def clone(self):
        return self

    def __reduce__(self):  # pickled (a Ray fragment) as the one instance
        return "NO_STATE"


NO_STATE = NoState()


class Agent(nn.Module):
    """The MLP agent. ``rnd``: the critic has a second output, RND's intrinsic value V_int(s) (rnd.py)."""

    recurrent = False

    def __init__(self, obs_dim: int, action_space: gym.Space, rnd: bool = False):
        super().__init__()
        self.obs_dim = int(obs_dim)
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
        self.n_values = 2 if rnd else 1  # V(s), and with RND the intrinsic value V_int(s): its own output
        self.build(obs_dim, n_out)
        if self.n_continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, self.n_continuous))

    def build(self, obs_dim: int, n_out: int) -> None:
        """The networks (their creation order is the order of the random initialisation and of the parameters)."""
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            Tanh(inplace=True),
            layer_init(nn.Linear(64, 64)),
            Tanh(inplace=True),
            layer_init(nn.Linear(64, self.n_values), std=1.0),
        )
        self.actor = nn.Sequential(  # continuous means, then each discrete head's logits
            layer_init(nn.Linear(obs_dim, 64)),
            Tanh(inplace=True),
            layer_init(nn.Linear(64, 64)),
            Tanh(inplace=True),
            layer_init(nn.Linear(64, n_out), std=0.01),
        )

    # ------------------------------------------------------------------------------------------ the slot's methods
    def initial_state(self, num_envs: int):
        return NO_STATE

    def features(self, x, state=NO_STATE, done=None):
        """What the heads see, and the state after x: here the observation itself (each head has its own 64-64)."""
        return x, state

    def get_value(self, x, state=NO_STATE, done=None):
        """V(s) as (batch, 1), or (batch, 2) = (V_ext, V_int) with RND."""
        return self.critic(self.features(x, state, done)[0])

    def get_action_and_value(self, x, action=None, state=NO_STATE, done=None):
        """(a ~ pi(.|s) unless given, log pi(a|s), entropy H[pi(.|s)], V(s), the state after x), written out instead
        of going through torch.distributions (same numbers, half the per-call cost on these tiny batches)."""
        h, state = self.features(x, state, done)
        action, logprob, entropy = self._policy(self.actor(h), action)
        return action, logprob, entropy, self.critic(h), state

    def act(self, x, deterministic=True, state=NO_STATE, done=None):
        """(actions, the state after x) for playback/evaluation: the mean of each continuous value (unclipped) and the
        argmax of each discrete head's logits, or a sample with ``deterministic=False``."""
        h, state = self.features(x, state, done)
        out = self.actor(h)
        action = self._deterministic(out) if deterministic else self._policy(out, None)[0]
        return action, state

    def minibatches(self, b_inds: np.ndarray, num_steps: int, num_minibatches: int):
        """One epoch's minibatches as (indices into the flat batch, their envs: None), CleanRL's way: ``b_inds``
        shuffled in place (so each epoch shuffles the last), then cut in ``num_minibatches`` equal parts."""
        np.random.shuffle(b_inds)
        size = len(b_inds) // num_minibatches
        for start in range(0, len(b_inds), size):
            yield b_inds[start : start + size], None

    def policy_parts(self) -> dict:
        """The networks a policy file holds (policy_file.policy_dict's keyword arguments)."""
        return {"actor": self.actor}

    def rollout_policy(self) -> "RolloutPolicy":
        """This agent's acting for one rollout, from its weights as they are now (the update changes them only
        between rollouts)."""
        return RolloutPolicy(self)

    # ------------------------------------------------------------------------------------------ the heads
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

    def _deterministic(self, out):
        if self.discrete:
            return out.argmax(dim=-1)
        parts = [out[:, : self.n_continuous]]
        parts += [out[:, start:end].argmax(-1, keepdim=True).to(out.dtype) for start, end in self.logit_slices]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


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
    """The agent's acting in a rollout, `Agent.get_action_and_value` without autograd, on numpy: (action, log pi(a|s),
    the critic's values, the state after x) for a batch of observations. The actor and the critic run as one
    network (`fuse`), and the random draws are the very calls on torch's generator that get_action_and_value makes,
    in its order (a Gaussian draw for the continuous values, then an exponential one per discrete head), so the same
    generator state gives the same actions, and the same log-probabilities to float rounding. Built once per rollout
    (the weights are copied in, so it is a snapshot); a subclass replaces `features` for an agent with memory."""

    def __init__(self, agent: Agent):
        self.heads = Fused(agent.actor, agent.critic)
        self.discrete, self.n_continuous, self.logit_slices = agent.discrete, agent.n_continuous, agent.logit_slices
        if self.n_continuous:
            self.log_std = agent.actor_logstd.detach().numpy()[0].astype(np.float32)
            self.std = np.exp(self.log_std)
            self.logprob_const = np.float32(-(self.log_std.sum() + self.n_continuous * _HALF_LOG_2PI))

    def features(self, x, state, done):
        return x, state

    def value(self, x: np.ndarray, state=NO_STATE, done=None) -> np.ndarray:
        """The critic's values (n, n_values)."""
        return self.heads(self.features(x, state, done)[0], actor=False)[1]

    def __call__(self, x: np.ndarray, state=NO_STATE, done=None):
        """a ~ pi(.|s), log pi(a|s), V(s) (n, n_values) and the state after x, for observations x (n, obs_dim)."""
        h, state = self.features(x, state, done)
        out, value = self.heads(h)
        action, logprob = self._sample(out)
        return action, logprob, value, state

    def _sample(self, out):
        n = out.shape[0]
        if self.discrete:  # Gumbel-max, as Agent._policy: argmax(log p - log(Exp(1)))
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
