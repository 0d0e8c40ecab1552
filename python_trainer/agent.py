"""The agent, the one the trainer builds: separate 64-64 tanh actor and critic (CleanRL's), orthogonal init, one actor
head per action key.

One head per key, so a game's action space may mix continuous and discrete keys: a Categorical over logits for
each discrete key and Normal(mean, exp(log_std)) with a state-independent log-std for the continuous values; the
keys are independent given s, so pi(a|s) is their product (log-probabilities and entropies add up). For a Discrete
space this is CleanRL's ppo.py (the action is one int64 index); for any other space the action is one flat float
row: the continuous values, then one index per discrete head (a Box space: CleanRL's ppo_continuous_action.py).

This is the agent the trainer builds (trained_agent.make_agent; recurrent.py's and cnn_agent.py's agents build on
it). Its heads are torch.distributions', as in CleanRL. In training (``fast=True``, the default) the class runs twins
of them that cost less per call, from fast_acting.py: `fast_acting.pi` in place of `pi` (the update's
log-probabilities and entropies), `fast_acting.Tanh` for the activation, and `fast_acting.RolloutPolicy` for a
rollout's acting (numpy, no autograd). ``fast=False`` runs the lines below as they read. tests/test_acting.py runs
both through a short rollout, draw by draw: the same random numbers in the same order, the same actions, and
log-probabilities within 1e-6. When they part, it names the twin, so a change here is made there too. The game's
in-engine actors sample with a third twin, godot_project/addons/rl_sync/policy_sampling.gd, which
tests/test_fragment_mode.py holds to `distributions`.

The agent is the slot ppo.py and the rollout fill: whatever its kind (this MLP, or recurrent.RecurrentAgent), they
call the same methods, and an agent without memory simply has none:

    state = agent.initial_state(num_envs)                        # NO_STATE here; an LSTM's (h, c) there
    action, logprob, entropy, value, state = agent.get_action_and_value(x, action=None, state, done)
    value = agent.get_value(x, state, done)                      # (batch, 1), or (batch, 2) with RND's V_int
    for mb_inds, mb_envs in agent.minibatches(b_inds, num_steps, num_minibatches): ...   # one epoch
    action, state = agent.act(x, deterministic=True, state, done)                       # playback, evaluation
    policy = agent.rollout_policy()    # acting in a rollout: numpy in and out, no autograd (RolloutPolicy)

``done[t] = 1`` where obs[t] starts an episode (see recurrent.py); `env_action` turns the agent's action into the
env's (Box values clipped to the space, discrete indices as integers, a Dict space's {key: values}).
"""

from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Independent, Normal

from python_trainer import fast_acting
from python_trainer.fast_acting import RolloutPolicy, Tanh

CONTINUOUS, DISCRETE = "continuous", "discrete"


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


class Categorical(torch.distributions.Categorical):
    """torch's Categorical, drawn by the Gumbel-max trick: argmax_a (log p_a - log E_a), E_a ~ Exp(1), is a draw
    a ~ p. The same distribution as torch's own sample() (CleanRL's), through other random numbers: those the fast
    twins draw (fast_acting.pi, fast_acting.RolloutPolicy), so the same generator state gives the same actions."""

    def sample(self, sample_shape=torch.Size()):
        with torch.no_grad():
            exponential = torch.empty(torch.Size(sample_shape) + self.logits.shape).exponential_()
            return (self.logits - exponential.log()).argmax(-1)


class Agent(nn.Module):
    """The MLP agent. ``rnd``: the critic has a second output, RND's intrinsic value V_int(s) (rnd.py). ``fast``:
    sample, score and act through fast_acting's twins (the trainer's; see the module's docstring)."""

    recurrent = False
    image_layout = None  # an agent that reads a camera image: where it sits in the row (variants/cnn_agent.py)

    def __init__(self, obs_dim: int, action_space: gym.Space, rnd: bool = False, fast: bool = True):
        super().__init__()
        self.obs_dim, self.fast = int(obs_dim), bool(fast)
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

    def activation(self) -> nn.Module:
        """The hidden layers' activation: tanh (the fast one runs numpy's on a large minibatch, over the Linear
        layer's fresh output, which only the next layer reads: the same numbers)."""
        return Tanh(inplace=True) if self.fast else nn.Tanh()

    def build(self, obs_dim: int, n_out: int) -> None:
        """The networks (their creation order is the order of the random initialisation and of the parameters)."""
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            self.activation(),
            layer_init(nn.Linear(64, 64)),
            self.activation(),
            layer_init(nn.Linear(64, self.n_values), std=1.0),
        )
        self.actor = nn.Sequential(  # continuous means, then each discrete head's logits
            layer_init(nn.Linear(obs_dim, 64)),
            self.activation(),
            layer_init(nn.Linear(64, 64)),
            self.activation(),
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
        """(a ~ pi(.|s) unless given, log pi(a|s), entropy H[pi(.|s)], V(s), the state after x)."""
        h, state = self.features(x, state, done)
        action, logprob, entropy = self.pi(self.actor(h), action)
        return action, logprob, entropy, self.critic(h), state

    def act(self, x, deterministic=True, state=NO_STATE, done=None):
        """(actions, the state after x) for playback/evaluation: the mean of each continuous value (unclipped) and the
        argmax of each discrete head's logits, or a sample with ``deterministic=False``."""
        h, state = self.features(x, state, done)
        out = self.actor(h)
        action = self._deterministic(out) if deterministic else self.pi(out)[0]
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

    def rollout_policy(self):
        """This agent's acting for one rollout (the update changes its weights only between rollouts): Acting below,
        or its fast twin fast_acting.RolloutPolicy."""
        return RolloutPolicy(self) if self.fast else Acting(self)

    # ------------------------------------------------------------------------------------------ the heads
    def distributions(self, out) -> list:
        """pi(.|s) from the actor's output, one distribution per head: Normal(mean, exp(log_std)) over the continuous
        values (independent dimensions: Independent sums their log-probabilities and entropies), then a
        Categorical(logits) per discrete head."""
        if self.discrete:
            return [Categorical(logits=out)]
        dists = []
        if self.n_continuous:
            mean = out[:, : self.n_continuous]
            std = self.actor_logstd.expand_as(mean).exp()
            dists.append(Independent(Normal(mean, std), 1))
        return dists + [Categorical(logits=out[:, start:end]) for start, end in self.logit_slices]

    def pi(self, out, action=None):
        """(a ~ pi(.|s) unless given, log pi(a|s), H[pi(.|s)]) from the actor's output. The heads are independent
        given s, so pi(a|s) is their product: their log-probabilities and entropies add up. The fast agent runs
        these lines written out, fast_acting.pi (the same draws, in this order)."""
        if self.fast:
            return fast_acting.pi(self, out, action)
        dists = self.distributions(out)
        if action is None:
            action = self._join([d.sample() for d in dists])
        logprob = sum(d.log_prob(a) for d, a in zip(dists, self._split(action)))
        entropy = sum(d.entropy() for d in dists)
        return action, logprob, entropy

    def _join(self, samples: list):
        """The agent's action from each head's sample: a Discrete space's index as it is, else one float row (the
        continuous values, then each discrete head's index)."""
        if self.discrete:
            return samples[0]
        columns = [s if s.dim() == 2 else s.unsqueeze(-1).float() for s in samples]
        return columns[0] if len(columns) == 1 else torch.cat(columns, dim=-1)

    def _split(self, action) -> list:
        """Each head's part of the agent's action (what _join joined)."""
        if self.discrete:
            return [action]
        parts = [action[:, : self.n_continuous]] if self.n_continuous else []
        return parts + [action[:, self.n_continuous + j].long() for j in range(len(self.logit_slices))]

    def _deterministic(self, out):
        if self.discrete:
            return out.argmax(dim=-1)
        parts = [out[:, : self.n_continuous]]
        parts += [out[:, start:end].argmax(-1, keepdim=True).to(out.dtype) for start, end in self.logit_slices]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


class Acting:
    """An agent's acting in a rollout, CleanRL's ``with torch.no_grad(): agent.get_action_and_value(next_obs)`` with
    numpy in and out, as the rollout buffer holds them: (a ~ pi(.|s), log pi(a|s), V(s) as (n, n_values), the state
    after x): the agent's with fast=False. fast_acting.RolloutPolicy is its fast twin."""

    def __init__(self, agent: Agent):
        self.agent = agent

    @torch.no_grad()
    def __call__(self, x: np.ndarray, state=NO_STATE, done=None):
        done = None if done is None else torch.as_tensor(done)
        action, logprob, _, value, state = self.agent.get_action_and_value(torch.as_tensor(x), None, state, done)
        return action.numpy(), logprob.numpy(), value.numpy(), state

    @torch.no_grad()
    def value(self, x: np.ndarray, state=NO_STATE, done=None) -> np.ndarray:
        """The critic's values (n, n_values)."""
        done = None if done is None else torch.as_tensor(done)
        return self.agent.get_value(torch.as_tensor(x), state, done).numpy()


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
