"""The rollout's fast acting path (agent.RolloutPolicy, recurrent.RecurrentRolloutPolicy) against the agent's own
get_action_and_value: for the same observations and the same torch generator state, the same discrete actions, and
continuous actions, log-probabilities and values within 1e-6 (of their size, when it is over 1: float32 rounding in
another order of the same sums), for every action space and for the recurrent agent (whose memory it carries and
resets the same way)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from python_trainer.agent import Agent
from python_trainer.variants.recurrent import RecurrentAgent

SPACES = {
    "discrete": gym.spaces.Discrete(5),
    "box": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "hybrid": gym.spaces.Dict({"aim": gym.spaces.Box(-1.0, 1.0, (1,), np.float32), "jump": gym.spaces.Discrete(3),
                               "move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(2)}),
}  # fmt: skip


def _trained_like(agent):
    """Weights away from the initialisation, as training moves them (its std-0.01 heads would make every comparison
    trivially close): outputs of order 1."""
    torch.manual_seed(7)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return agent


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "lstm"])
@pytest.mark.parametrize("name", list(SPACES))
def test_the_fast_path_acts_as_get_action_and_value(name, recurrent):
    space, obs_dim, n = SPACES[name], 12, 16
    torch.set_num_threads(1)  # as in training (the matrix products' rounding may depend on the thread count)
    torch.manual_seed(0)
    agent = _trained_like(RecurrentAgent(obs_dim, space, 16, rnd=True) if recurrent else Agent(obs_dim, space, rnd=True))
    policy = agent.rollout_policy()
    rng = np.random.default_rng(0)
    slow_state, fast_state = agent.initial_state(n), agent.initial_state(n)
    for step in range(20):  # a sequence, so the LSTM's memory is carried, with episode starts along the way
        obs = rng.normal(0, 2, (n, obs_dim)).astype(np.float32)
        done = (rng.random(n) < 0.2).astype(np.float32)
        generator_state = torch.get_rng_state()
        with torch.no_grad():
            action, logprob, _, value, slow_state = agent.get_action_and_value(
                torch.from_numpy(obs), None, slow_state, torch.from_numpy(done))
        after_slow = torch.get_rng_state()
        torch.set_rng_state(generator_state)
        fast_action, fast_logprob, fast_value, fast_state = policy(obs, fast_state, done)
        assert torch.equal(torch.get_rng_state(), after_slow), "the fast path drew other random numbers"
        discrete_columns = slice(None) if agent.discrete else slice(agent.n_continuous, None)
        np.testing.assert_array_equal(action.numpy()[..., discrete_columns] if not agent.discrete else action.numpy(),
                                      fast_action[..., discrete_columns] if not agent.discrete else fast_action)
        assert fast_action.dtype == action.numpy().dtype and fast_action.shape == tuple(action.shape)
        close = {"atol": 1e-6, "rtol": 1e-6}
        np.testing.assert_allclose(fast_action, action.numpy(), **close)
        np.testing.assert_allclose(fast_logprob, logprob.numpy(), **close)
        # the values are sums of 64 products of O(1) numbers, taken in another order: a few float32 ulps of O(1)
        values_close = {"atol": 1e-5, "rtol": 1e-6}
        np.testing.assert_allclose(fast_value, value.numpy(), **values_close)
        with torch.no_grad():
            slow_value = agent.get_value(torch.from_numpy(obs), fast_state, torch.from_numpy(done)).numpy()
        np.testing.assert_allclose(policy.value(obs, fast_state, done), slow_value, **values_close)
        if recurrent:
            np.testing.assert_allclose(fast_state.h.numpy(), slow_state.h.numpy(), **close)
            np.testing.assert_allclose(fast_state.c.numpy(), slow_state.c.numpy(), **close)


@pytest.mark.parametrize("inplace", [False, True], ids=["new_buffer", "in_place"])
@pytest.mark.parametrize("rows", [128, 1024], ids=["torch_path", "numpy_path"])
def test_the_updates_tanh_is_torchs_tanh(rows, inplace):
    """agent.Tanh (numpy's tanh from 256 rows of 64 on, for the update's speed; with inplace=True written over a
    layer's output and its gradient over the saved output) gives torch.tanh's values and gradients within float32
    rounding, and stays an nn.Tanh (the policy file and the acting path read it as one)."""
    from python_trainer.agent import Tanh

    torch.manual_seed(0)
    x = torch.randn(rows, 64).requires_grad_()
    ours = Tanh(inplace=inplace)(x * 3)  # x * 3: a fresh result, as a Linear layer's output is
    loss = (ours * torch.linspace(-1.0, 1.0, 64)).sum()
    ours_values = ours.detach().clone()  # (in place, the backward writes the gradient over them)
    loss.backward(retain_graph=True)
    ours_grad, x.grad = x.grad, None
    theirs = torch.tanh(x * 3)
    (theirs * torch.linspace(-1.0, 1.0, 64)).sum().backward()
    assert isinstance(Tanh(), torch.nn.Tanh) and ours.shape == x.shape and ours.requires_grad
    assert torch.allclose(ours_values, theirs, rtol=0, atol=2e-7)
    assert torch.allclose(ours_grad, x.grad, rtol=1e-5, atol=1e-6)
    if inplace and rows == 1024:  # the saved output was overwritten by the gradient: a second backward is refused
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
