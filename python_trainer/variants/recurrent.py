"""Recurrent PPO (CleanRL's ppo_atari_lstm.py), the --lstm variant of the agent slot: `RecurrentAgent` puts an LSTM
between a shared encoder and the actor/critic heads, carries its state through the rollout, and replays the
rollout in minibatches made of whole environments, so each minibatch holds complete, ordered sequences. ppo.py and
the rollout call it exactly as they call the MLP agent (agent.py); what differs is all here.

How the pieces work together:

    core = LSTMCore(encoder_out, hidden_size)
    state = core.initial_state(num_envs)
    ...each rollout:
        initial_state = clone_state(state)                 # what the update replays the rollout from
        per step:  features, state = core(encoder(next_obs), state, next_done)     # one step, T = 1
    ...update:
        for envs, flat in env_minibatches(num_steps, num_envs, num_minibatches, rng):
            state_mb = select_envs(initial_state, envs)
            features, _ = core(encoder(b_obs[flat]), state_mb, b_dones[flat])      # T = num_steps again
            ... heads on features, the usual PPO losses on flat

``done`` follows ppo.py's convention: done[t] = 1 when obs[t] is the first observation of a new episode (the game
resets in the same step an episode ends, so the observation that comes with done=1 already belongs to the next
episode). The core therefore zeroes the state *before* consuming obs[t]: no memory leaks across an episode end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from python_trainer.agent import Agent, layer_init
from python_trainer.fast_acting import RolloutPolicy, Tanh, _numpy_layers, _transposed, forward
from python_trainer.base.combinations import refusal
from python_trainer.base.flags import GoesWith, at_least, flag

DEFAULT_HIDDEN_SIZE = 64
ENCODER_OUT = 32  # the encoder's output, the LSTM's input

LSTMTuple = tuple[torch.Tensor, torch.Tensor]  # (h, c), each (1, num_envs, hidden_size) as nn.LSTM wants


@dataclass
class LSTMArgs:
    lstm: bool = False
    """recurrent PPO (CleanRL's ppo_atari_lstm.py): an LSTM between the encoder and the actor/critic heads, its state
    carried across steps and reset where an episode ends; minibatches hold whole envs"""
    lstm_size: int = flag(DEFAULT_HIDDEN_SIZE, at_least(1, "an integer >= 1 (the LSTM's hidden state size)", "64"),
                          goes_with=GoesWith("lstm", "the recurrent agent", "--lstm"))
    """with --lstm: the LSTM's hidden state size (the in-engine player's cost per agent grows with its square; 64
    after a 32-wide encoder keeps 16 agents under 5 ms per frame, see scripts/bench_playback.py)"""


def resume_refusal(args, saved: dict) -> Optional[str]:
    """Why a checkpoint whose run had the flags ``saved`` does not resume with this run's --lstm / --lstm-size (its
    LSTM is another, or none), in one line, or None."""
    where = f"--resume {args.resume}"
    if bool(saved.get("lstm")) != args.lstm:
        had, has = ("an LSTM (--lstm)", "without --lstm") if saved.get("lstm") else ("no LSTM", "with --lstm")
        return refusal("resume/lstm", where=where, had=had, has=has)
    if args.lstm and int(saved.get("lstm_size", args.lstm_size)) != args.lstm_size:
        return refusal("resume/lstm_size", where=where, saved=saved.get("lstm_size"), asked=args.lstm_size)
    return None


def size_refusal(args, num_envs: int) -> Optional[str]:
    """Why --lstm's minibatches, made of whole envs, cannot be cut from ``num_envs`` envs by --num-minibatches, in one
    line, or None."""
    if args.lstm and num_envs % args.num_minibatches:
        return (f"--lstm minibatches hold whole envs: {num_envs} envs do not split into --num-minibatches "
                f"{args.num_minibatches}; use a --num-minibatches that divides {num_envs}")
    return None


class LSTMCore(nn.Module):
    """One-layer LSTM whose state is reset per environment where an episode begins.

    Weights are orthogonal, as in CleanRL; the gate order of the weights is PyTorch's (i, f, g, o), which is what
    ``export_weights`` writes for the in-engine cell (addons/rl_sync/lstm_cell.gd).

    Biases are zero except the forget gate's, ``forget_bias`` (1 by default; CleanRL uses 0): with 0 the forget
    gate starts near sigmoid(0) = 0.5 and a fresh network halves what it holds every step, so a cue seen 20 steps
    before it matters arrives a millionth as strong and its gradient with it. With 1 (Gers et al. 2000;
    Jozefowicz et al. 2015) it starts near 0.73, and the network can learn to keep what it needs from the start.
    """

    def __init__(self, input_size: int, hidden_size: int = 64, forget_bias: float = 1.0):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.lstm = nn.LSTM(input_size, hidden_size)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        with torch.no_grad():  # rows H..2H of a bias are the forget gate's; one of the two biases carries it
            self.lstm.bias_ih_l0[hidden_size : 2 * hidden_size].fill_(forget_bias)

    def initial_state(self, num_envs: int) -> LSTMTuple:
        zeros = torch.zeros(1, num_envs, self.hidden_size)
        return zeros, zeros.clone()

    def forward(self, x: torch.Tensor, state: LSTMTuple, done: torch.Tensor) -> tuple[torch.Tensor, LSTMTuple]:
        """x: (T * N, input_size) time-major (all N envs of step 0, then of step 1, ...); done: (T * N,);
        state: the (h, c) before step 0. Returns (outputs (T * N, hidden_size), the state after step T - 1).

        Steps run one at a time because an env's state must be zeroed exactly where its episode begins, which
        a single call over the whole sequence cannot do.
        """
        n = state[0].shape[1]
        x = x.reshape(-1, n, self.input_size)
        done = done.reshape(-1, n).to(x.dtype)
        h, c = state
        outputs = []
        for x_t, done_t in zip(x, done):
            keep = (1.0 - done_t).view(1, -1, 1)  # 0 where obs[t] starts a new episode
            out, (h, c) = self.lstm(x_t.unsqueeze(0), (keep * h, keep * c))
            outputs.append(out)
        return torch.flatten(torch.cat(outputs), 0, 1), (h, c)

    def export_weights(self) -> dict:
        """The cell's weights as nested lists for a policy file: weight_ih (4H x I), weight_hh (4H x H), bias (4H,
        bias_ih + bias_hh: the cell only ever adds them), rows in PyTorch's gate order i, f, g, o."""
        lstm = self.lstm
        return {
            "input_size": self.input_size,
            "hidden_size": self.hidden_size,
            "weight_ih": lstm.weight_ih_l0.detach().double().tolist(),
            "weight_hh": lstm.weight_hh_l0.detach().double().tolist(),
            "bias": (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().double().tolist(),
        }


def clone_state(state: LSTMTuple) -> LSTMTuple:
    """A detached copy: the state at the start of a rollout, which the update replays the rollout from."""
    return state[0].detach().clone(), state[1].detach().clone()


def select_envs(state: LSTMTuple, envs: np.ndarray) -> LSTMTuple:
    """The state of some environments only (a minibatch's)."""
    index = torch.as_tensor(envs, dtype=torch.long)
    return state[0][:, index], state[1][:, index]


def env_minibatches(
    num_steps: int, num_envs: int, num_minibatches: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """One epoch of minibatches, each made of whole environments: yields (envs, flat) where ``envs`` are the
    environment indices of the minibatch and ``flat`` indexes the flattened (num_steps * num_envs) rollout
    time-major, ``flat.reshape(num_steps, len(envs))[t, j]`` being env ``envs[j]`` at step t. Every env appears in
    exactly one minibatch per epoch; the envs are shuffled, the steps never are.
    """
    if num_envs % num_minibatches:
        raise ValueError(
            f"a recurrent policy's minibatches hold whole environments: num_envs={num_envs} must be a multiple of "
            f"num_minibatches={num_minibatches}; change --num-minibatches or the number of agents"
        )
    per_batch = num_envs // num_minibatches
    flat_index = np.arange(num_steps * num_envs).reshape(num_steps, num_envs)
    order = rng.permutation(num_envs)
    for start in range(0, num_envs, per_batch):
        envs = order[start : start + per_batch]
        yield envs, flat_index[:, envs].ravel()


class LSTMState:
    """The LSTM state (h, c) of a batch of envs, indexed by env: ``state[envs]`` is theirs (a view for a slice, a
    copy for an index array), ``state[envs] = other`` stores theirs, ``state.clone()`` a detached copy."""

    def __init__(self, h: torch.Tensor, c: torch.Tensor):
        self.h, self.c = h, c

    def __getitem__(self, envs) -> "LSTMState":
        if not isinstance(envs, slice):
            envs = torch.as_tensor(envs, dtype=torch.long)
        return LSTMState(self.h[:, envs], self.c[:, envs])

    def __setitem__(self, envs, value: "LSTMState") -> None:
        if not isinstance(envs, slice):
            envs = torch.as_tensor(envs, dtype=torch.long)
        self.h[:, envs], self.c[:, envs] = value.h, value.c

    def clone(self) -> "LSTMState":
        return LSTMState(*clone_state((self.h, self.c)))


class RecurrentAgent(Agent):
    """CleanRL's ppo_atari_lstm.py agent: a shared encoder (64 then ENCODER_OUT wide), an LSTM of ``hidden_size``,
    then the actor and the critic as one linear layer each on its output, with the MLP agent's heads (one per
    action key) and, with ``rnd``, its intrinsic value output."""

    recurrent = True

    def __init__(self, obs_dim: int, action_space: gym.Space, hidden_size: int = DEFAULT_HIDDEN_SIZE, rnd: bool = False):
        self.hidden_size = int(hidden_size)
        super().__init__(obs_dim, action_space, rnd=rnd)

    def build(self, obs_dim: int, n_out: int) -> None:
        self.encoder = nn.Sequential(  # 64 -> 32: the LSTM's input, small so the in-engine step stays cheap
            layer_init(nn.Linear(obs_dim, 64)),
            Tanh(inplace=True),
            layer_init(nn.Linear(64, ENCODER_OUT)),
            Tanh(inplace=True),
        )
        self.lstm = LSTMCore(ENCODER_OUT, self.hidden_size)
        self.critic = nn.Sequential(layer_init(nn.Linear(self.hidden_size, self.n_values), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(self.hidden_size, n_out), std=0.01))

    def initial_state(self, num_envs: int) -> LSTMState:
        return LSTMState(*self.lstm.initial_state(num_envs))

    def features(self, x, state=None, done=None):
        """The LSTM's output after the encoder for x ((T * N, obs_dim) time-major; done[t] = 1 where obs[t] starts an
        episode: the state is zeroed before it), and the state after x."""
        out, (h, c) = self.lstm(self.encoder(x), (state.h, state.c), done)
        return out, LSTMState(h, c)

    def minibatches(self, b_inds: np.ndarray, num_steps: int, num_minibatches: int):
        """One epoch's minibatches of whole envs, their steps in order (env_minibatches): (flat indices, envs)."""
        for envs, flat in env_minibatches(num_steps, len(b_inds) // num_steps, num_minibatches, np.random):
            yield flat, envs

    def policy_parts(self) -> dict:
        return {"actor": self.actor, "encoder": self.encoder, "lstm": self.lstm.export_weights()}

    def rollout_policy(self) -> "RecurrentRolloutPolicy":
        return RecurrentRolloutPolicy(self)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class RecurrentRolloutPolicy(RolloutPolicy):
    """RecurrentAgent's acting in a rollout on numpy (fast_acting.RolloutPolicy): the encoder, one LSTM step per call
    (the state zeroed first where ``done``), then the actor and the critic as one product. ``encode``: the encoder
    as a function of numpy rows, for an encoder that is not Linear/Tanh layers (cnn_agent.py's CNN)."""

    def __init__(self, agent: RecurrentAgent, encode=None):
        super().__init__(agent)
        if encode is None:
            layers = _transposed(_numpy_layers(agent.encoder))
            encode = lambda x: forward(layers, x)  # noqa: E731
        self.encode = encode
        lstm = agent.lstm.lstm
        self.w_ih_t = np.ascontiguousarray(lstm.weight_ih_l0.detach().numpy().T)
        self.w_hh_t = np.ascontiguousarray(lstm.weight_hh_l0.detach().numpy().T)
        self.bias = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy()
        self.hidden = agent.hidden_size

    def features(self, x, state, done):
        """The LSTM's output for one step of n envs, and their state after it (PyTorch's gate order i, f, g, o)."""
        H = self.hidden
        keep = (1.0 - np.asarray(done, np.float32))[:, None]  # 0 where x starts an episode: forget first
        h, c = state.h.numpy()[0] * keep, state.c.numpy()[0] * keep
        gates = self.encode(x) @ self.w_ih_t + h @ self.w_hh_t + self.bias
        i, f, o = _sigmoid(gates[:, :H]), _sigmoid(gates[:, H : 2 * H]), _sigmoid(gates[:, 3 * H :])
        c = f * c + i * np.tanh(gates[:, 2 * H : 3 * H])
        h = o * np.tanh(c)
        return h, LSTMState(torch.from_numpy(h[None]), torch.from_numpy(c[None]))
