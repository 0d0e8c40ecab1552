"""The LSTM core resets exactly where episodes begin; whole-environment minibatches keep sequence order."""

import numpy as np
import pytest
import torch

from python_trainer.variants.recurrent import LSTMCore, clone_state, env_minibatches, select_envs


def _run_alone(core, x_env, state=None):
    """Plain nn.LSTM over one env's sequence, no resets: the reference."""
    state = state or (torch.zeros(1, 1, core.hidden_size), torch.zeros(1, 1, core.hidden_size))
    out, _ = core.lstm(x_env.unsqueeze(1), state)
    return out.squeeze(1)


def test_state_is_reset_exactly_where_an_episode_begins():
    torch.manual_seed(0)
    core = LSTMCore(input_size=3, hidden_size=5)
    steps, envs = 8, 3
    x = torch.randn(steps, envs, 3)
    done = torch.zeros(steps, envs)
    done[4, 0] = 1.0  # env 0: obs[4] is the first of a new episode (same-step reset)
    done[0, 2] = 1.0  # env 2: a reset on the very first step of the rollout
    state = (torch.randn(1, envs, 5), torch.randn(1, envs, 5))  # carried over from the previous rollout
    with torch.no_grad():
        out, (h, c) = core(x.reshape(-1, 3), state, done.reshape(-1))
        out = out.reshape(steps, envs, 5)
        carried = [(state[0][:, [e]], state[1][:, [e]]) for e in range(envs)]
        # env 0: continues the carried state up to step 3, then starts from zero at step 4
        torch.testing.assert_close(out[:4, 0], _run_alone(core, x[:4, 0], carried[0]))
        torch.testing.assert_close(out[4:, 0], _run_alone(core, x[4:, 0]))
        assert not torch.allclose(out[4:, 0], _run_alone(core, x[:, 0], carried[0])[4:])  # the reset mattered
        # env 1: never reset
        torch.testing.assert_close(out[:, 1], _run_alone(core, x[:, 1], carried[1]))
        # env 2: the carried state is dropped before step 0 is consumed
        torch.testing.assert_close(out[:, 2], _run_alone(core, x[:, 2]))
        torch.testing.assert_close(h[0, 1], out[-1, 1])  # the returned state is the last step's


def test_replaying_a_rollout_in_one_call_equals_stepping_it():
    """The update replays the rollout from its initial state; it must see what the rollout saw."""
    torch.manual_seed(1)
    core = LSTMCore(input_size=4, hidden_size=6)
    steps, envs = 10, 4
    x = torch.randn(steps, envs, 4)
    done = (torch.rand(steps, envs) < 0.2).float()
    state = core.initial_state(envs)
    start = clone_state(state)
    stepped = []
    with torch.no_grad():
        for t in range(steps):
            out, state = core(x[t], state, done[t])
            stepped.append(out)
        replayed, end = core(x.reshape(-1, 4), start, done.reshape(-1))
    torch.testing.assert_close(replayed, torch.cat(stepped))
    torch.testing.assert_close(end[1], state[1])
    # and a minibatch of some envs replays those envs' sequences
    envs_mb = np.array([3, 1])
    flat = np.arange(steps * envs).reshape(steps, envs)[:, envs_mb].ravel()
    with torch.no_grad():
        part, _ = core(x.reshape(-1, 4)[flat], select_envs(start, envs_mb), done.reshape(-1)[flat])
    torch.testing.assert_close(part, replayed[flat])


def test_minibatches_hold_whole_envs_in_time_order_and_cover_each_env_once():
    steps, envs, n_mb = 5, 8, 4
    rng = np.random.default_rng(0)
    seen = []
    for env_ids, flat in env_minibatches(steps, envs, n_mb, rng):
        assert len(env_ids) == envs // n_mb and flat.shape == (steps * len(env_ids),)
        grid = flat.reshape(steps, len(env_ids))
        for j, e in enumerate(env_ids):
            # flat index = t * num_envs + e: column j is env e at steps 0, 1, 2, ... in order
            assert grid[:, j].tolist() == [t * envs + e for t in range(steps)]
        seen.extend(env_ids.tolist())
    assert sorted(seen) == list(range(envs))
    orders = {tuple(ids.tolist()) for _ in range(5) for ids, _ in env_minibatches(steps, envs, n_mb, rng)}
    assert len(orders) > n_mb  # envs are shuffled between epochs


def test_minibatches_refuse_envs_that_do_not_split_evenly():
    with pytest.raises(ValueError, match="num_envs=6 must be a multiple of num_minibatches=4"):
        next(env_minibatches(5, 6, 4, np.random.default_rng(0)))


def test_exported_weights_compute_the_same_step_by_hand():
    """export_weights' layout (gate order i, f, g, o; one summed bias) is what the GDScript cell computes."""
    torch.manual_seed(2)
    core = LSTMCore(input_size=3, hidden_size=4)
    with torch.no_grad():
        for p in core.lstm.parameters():
            p.normal_()
    w = core.export_weights()
    rng = np.random.default_rng(2)
    x, h, c = rng.standard_normal(3), rng.standard_normal(4), rng.standard_normal(4)
    gates = np.array(w["weight_ih"]) @ x + np.array(w["weight_hh"]) @ h + np.array(w["bias"])
    i, f, g, o = np.split(gates, 4)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c_new = sig(f) * c + sig(i) * np.tanh(g)
    h_new = sig(o) * np.tanh(c_new)
    state = (torch.tensor(h).view(1, 1, 4).float(), torch.tensor(c).view(1, 1, 4).float())
    with torch.no_grad():
        out, (_, c_t) = core(torch.tensor(x).float().view(1, 3), state, torch.zeros(1))
    np.testing.assert_allclose(out.numpy()[0], h_new, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c_t.numpy()[0, 0], c_new, rtol=1e-5, atol=1e-6)


def test_the_forget_gate_starts_open_and_everything_else_at_zero():
    core = LSTMCore(input_size=3, hidden_size=4)
    bias = core.lstm.bias_ih_l0 + core.lstm.bias_hh_l0
    assert bias[4:8].tolist() == [1.0] * 4  # the forget gate (PyTorch's order: i, f, g, o)
    assert bias[:4].abs().sum() == 0 and bias[8:].abs().sum() == 0
    assert LSTMCore(3, 4, forget_bias=0.0).export_weights()["bias"] == [0.0] * 16
