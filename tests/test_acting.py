"""The agent to read (agent.Agent with fast=False: torch.distributions as in CleanRL) and its fast twins, which the
same class chooses with fast=True, the trainer's (fast_acting: pi, the numpy Tanh and the rollout's RolloutPolicy):
one network, the same log-probabilities, entropies and values within 1e-6 (of their size, when it is over 1: float32
rounding of the same sums in another order), for discrete, continuous, multi-discrete and hybrid action spaces; at
every step of a short rollout the twins draw the reference's random numbers in its order and its actions, and a
reference changed without its twins fails that check with the twin's file and function named; the rollout's numpy
path draws the very random numbers of the fast agent's get_action_and_value, also for the recurrent agent (whose
memory it carries and resets the same way); and the agent.py class is what the trainer builds, acting and updating
through the twins."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import REPO
from python_trainer import agent as agent_mod
from python_trainer.agent import Agent
from python_trainer.envs.gym_env import GymVecEnv
from python_trainer import fast_acting
from python_trainer.fast_acting import RolloutPolicy, Tanh
from python_trainer.normalization import Normalizer
from python_trainer.ppo import Args
from python_trainer.rollout import RolloutBuffer, collect_rollout
from python_trainer.run import train
from python_trainer.variants.recurrent import RecurrentAgent
from python_trainer.variants.trained_agent import make_agent

SPACES = {
    "discrete": gym.spaces.Discrete(5),
    "box": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "hybrid": gym.spaces.Dict({"aim": gym.spaces.Box(-1.0, 1.0, (1,), np.float32), "jump": gym.spaces.Discrete(3),
                               "move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(2)}),
}
CLOSE = {"atol": 1e-6, "rtol": 1e-6}


def _trained_like(agent):
    """Weights away from the initialisation, as training moves them (its std-0.01 heads would make every comparison
    trivially close): outputs of order 1."""
    torch.manual_seed(7)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return agent


def _twins(space, obs_dim=12):
    """(the reference, the fast agent) with the same weights, the reference's loaded from the fast one's state_dict."""
    fast = _trained_like(Agent(obs_dim, space, rnd=True))
    reference = Agent(obs_dim, space, rnd=True, fast=False)
    reference.load_state_dict(fast.state_dict())
    return reference, fast


@pytest.mark.parametrize("name", list(SPACES))
def test_the_reference_and_the_fast_agent_are_one_network_with_the_same_keys(name):
    """Built from the same seed, the same parameters under the same state_dict keys (the checkpoints' keys): a
    checkpoint of either loads into the other, and only the activations' kind differs."""
    torch.manual_seed(0)
    reference = Agent(12, SPACES[name], rnd=True, fast=False)
    torch.manual_seed(0)
    fast = Agent(12, SPACES[name], rnd=True)
    assert list(reference.state_dict()) == list(fast.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(reference.state_dict().values(), fast.state_dict().values()))
    keys = [f"{net}.{i}.{p}" for net in ("critic", "actor") for i in (0, 2, 4) for p in ("weight", "bias")]
    assert [k for k in fast.state_dict() if k != "actor_logstd"] == keys
    assert ("actor_logstd" in fast.state_dict()) == (name in ("box", "hybrid"))
    assert {type(m) for m in reference.modules() if isinstance(m, torch.nn.Tanh)} == {torch.nn.Tanh}
    assert {type(m) for m in fast.modules() if isinstance(m, torch.nn.Tanh)} == {Tanh}


def test_a_checkpoint_of_an_older_trainer_loads_into_both_agents():
    """main 7743056's model (before the reference and the fast twin were two classes) loads into each, strictly."""
    ckpt = torch.load(REPO / "tests" / "fixtures" / "main_7743056" / "ball_chase_pipelined" / "model.pt",
                      weights_only=True)
    for fast in (False, True):
        Agent(12, gym.spaces.Box(-1, 1, (2,), np.float32), fast=fast).load_state_dict(ckpt["model"])


@pytest.mark.parametrize("rows", [16, 1024], ids=["acting_batch", "update_minibatch"])
@pytest.mark.parametrize("name", list(SPACES))
def test_the_fast_agent_scores_actions_as_the_reference(name, rows):
    """log pi(a|s), H[pi(.|s)] and V(s) of the same actions within 1e-6, whichever agent sampled them; both sample the
    same kind of action (dtype, shape, a discrete head's index); 1024 rows: the update's numpy tanh."""
    torch.set_num_threads(1)  # as in training (the matrix products' rounding may depend on the thread count)
    reference, fast = _twins(SPACES[name])
    x = torch.from_numpy(np.random.default_rng(0).normal(0, 2, (rows, 12)).astype(np.float32))
    with torch.no_grad():
        for sampler, scorer in ((reference, fast), (fast, reference)):
            action, logprob, entropy, value, _ = sampler.get_action_and_value(x)
            _, their_logprob, their_entropy, their_value, _ = scorer.get_action_and_value(x, action)
            np.testing.assert_allclose(their_logprob.numpy(), logprob.numpy(), **CLOSE)
            np.testing.assert_allclose(their_entropy.numpy(), entropy.numpy(), **CLOSE)
            np.testing.assert_allclose(their_value.numpy(), value.numpy(), **CLOSE)
            assert action.dtype == (torch.int64 if name == "discrete" else torch.float32)
            assert tuple(action.shape) == (rows,) + fast.action_shape
            heads = [(action, 5)] if name == "discrete" else [
                (action[:, fast.n_continuous + j], end - start) for j, (start, end) in enumerate(fast.logit_slices)]
            for index, size in heads:  # each discrete head's sample: one of its indices (1024 rows: all drawn)
                assert set(index.tolist()) <= set(range(size)) and (rows < 1024 or len(set(index.tolist())) == size)


@pytest.mark.parametrize("name", list(SPACES))
def test_the_rollouts_numpy_acting_scores_as_the_reference(name):
    """fast_acting.RolloutPolicy (what the rollout runs) against agent.Acting (CleanRL's no-grad
    get_action_and_value on the reference): the reference gives the numpy path's actions the same log-probabilities,
    and the same values and final values (policy.value), within 1e-6, in the same arrays."""
    torch.set_num_threads(1)
    reference, fast = _twins(SPACES[name])
    fast_policy, reference_policy = fast.rollout_policy(), reference.rollout_policy()
    assert isinstance(fast_policy, RolloutPolicy) and isinstance(reference_policy, agent_mod.Acting)
    obs = np.random.default_rng(1).normal(0, 2, (32, 12)).astype(np.float32)
    action, logprob, value, _ = fast_policy(obs)
    with torch.no_grad():
        _, their_logprob, _, their_value, _ = reference.get_action_and_value(torch.from_numpy(obs), torch.from_numpy(action))
    np.testing.assert_allclose(logprob, their_logprob.numpy(), **CLOSE)
    np.testing.assert_allclose(value, their_value.numpy(), **CLOSE)
    np.testing.assert_allclose(fast_policy.value(obs), reference_policy.value(obs), **CLOSE)
    ref_action, ref_logprob, ref_value, _ = reference_policy(obs)
    for ours, theirs in ((action, ref_action), (logprob, ref_logprob), (value, ref_value)):
        assert type(ours) is type(theirs) is np.ndarray and ours.dtype == theirs.dtype and ours.shape == theirs.shape


def test_the_reference_agent_fills_the_rollout_as_the_fast_one_does():
    """The student's path runs as it reads: collect_rollout with the reference agent (agent.Acting) fills the buffer
    of a truncating CartPole, and its stored log-probabilities and values are the reference's for its actions; with
    the fast agent of the same weights, the same kinds of arrays come out."""
    torch.manual_seed(0)
    reference = Agent(4, gym.spaces.Discrete(2), fast=False)
    fast = Agent(4, gym.spaces.Discrete(2))
    fast.load_state_dict(reference.state_dict())
    bufs = []
    for agent in (reference, fast):
        envs = GymVecEnv("CartPole-v1", num_envs=2, seed=0, max_episode_steps=5)
        normalizer, buf = Normalizer(4, 2, 0.99, norm_obs=True, norm_reward=True), RolloutBuffer(12, 2, 4, agent)
        buf.next_obs[:] = normalizer.normalize_obs(envs.reset(seed=0)[0])
        collect_rollout(envs, agent, normalizer, buf, pipeline=True)
        envs.close()
        bufs.append(buf)
    buf = bufs[0]
    with torch.no_grad():
        _, logprob, _, value, _ = reference.get_action_and_value(torch.from_numpy(buf.obs.reshape(-1, 4)),
                                                                 torch.from_numpy(buf.actions.reshape(-1)))
    np.testing.assert_allclose(buf.logprobs.reshape(-1), logprob.numpy(), **CLOSE)
    np.testing.assert_allclose(buf.values.reshape(-1, 1), value.numpy(), **CLOSE)
    assert buf.truncated.any() and (buf.final_values[buf.truncated] != 0).all()  # V(final obs) of each time limit
    assert buf.episodes and buf.group_steps == 12
    for field in buf.fields:
        assert getattr(buf, field).dtype == getattr(bufs[1], field).dtype
        assert getattr(buf, field).shape == getattr(bufs[1], field).shape


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "lstm"])
@pytest.mark.parametrize("name", list(SPACES))
def test_the_numpy_path_draws_the_fast_agents_random_numbers(name, recurrent):
    """For the same observations and the same torch generator state, RolloutPolicy gives the fast agent's discrete actions
    exactly, and its continuous actions, log-probabilities, values and LSTM memory within 1e-6, step after step."""
    space, obs_dim, n = SPACES[name], 12, 16
    torch.set_num_threads(1)
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
        np.testing.assert_allclose(fast_action, action.numpy(), **CLOSE)
        np.testing.assert_allclose(fast_logprob, logprob.numpy(), **CLOSE)
        np.testing.assert_allclose(fast_value, value.numpy(), **CLOSE)
        with torch.no_grad():
            slow_value = agent.get_value(torch.from_numpy(obs), fast_state, torch.from_numpy(done)).numpy()
        np.testing.assert_allclose(policy.value(obs, fast_state, done), slow_value, **CLOSE)
        if recurrent:
            np.testing.assert_allclose(fast_state.h.numpy(), slow_state.h.numpy(), **CLOSE)
            np.testing.assert_allclose(fast_state.c.numpy(), slow_state.c.numpy(), **CLOSE)


TWINS = ("fast_acting.py: pi", "fast_acting.py: RolloutPolicy._sample")  # the update's and the rollout's


def _parted(twin: str, step: int, what: str) -> str:
    return (f"the agent to read (agent.py: Agent.pi on Agent.distributions) and its twin that the trainer runs, "
            f"{twin}, part at step {step}: {what}; make a change to the one in the other (the game's twin, "
            "godot_project/addons/rl_sync/policy_sampling.gd, is held to Agent.distributions by "
            "tests/test_fragment_mode.py)")


def _rollout_draw_by_draw(space, steps=12, n=8, obs_dim=12) -> int:
    """A short rollout of a toy env (each step's observations follow from the last ones and the actions drawn) by the
    reference (fast=False); at every step, from the generator state the reference drew from, each twin of the fast
    agent draws too: fast_acting.pi (get_action_and_value) and RolloutPolicy. Raises AssertionError naming the twin,
    the step and what differs (the random draws, an action, a log-probability) when they part; returns the steps."""
    torch.set_num_threads(1)
    reference, fast = _twins(space, obs_dim)
    policy = fast.rollout_policy()
    rng = np.random.default_rng(3)
    obs = rng.normal(0, 2, (n, obs_dim)).astype(np.float32)
    mix = rng.normal(0, 1, (1 if reference.discrete else reference.action_shape[0], obs_dim)).astype(np.float32)
    discrete = slice(None) if reference.discrete else slice(reference.n_continuous, None)
    torch.manual_seed(11)
    for step in range(steps):
        before = torch.get_rng_state()
        with torch.no_grad():
            action, logprob, _, _, _ = reference.get_action_and_value(torch.from_numpy(obs))
        after = torch.get_rng_state()
        action, logprob = action.numpy(), logprob.numpy()
        for twin in TWINS:
            torch.set_rng_state(before)
            if twin == TWINS[0]:
                with torch.no_grad():
                    theirs, their_logprob, _, _, _ = fast.get_action_and_value(torch.from_numpy(obs))
                theirs, their_logprob = theirs.numpy(), their_logprob.numpy()
            else:
                theirs, their_logprob, _, _ = policy(obs)
            assert torch.equal(torch.get_rng_state(), after), _parted(twin, step, "other random draws")
            assert theirs.dtype == action.dtype and theirs.shape == action.shape, _parted(twin, step, "another action")
            assert np.array_equal(theirs[..., discrete], action[..., discrete]), _parted(twin, step, "other actions")
            assert np.allclose(theirs, action, **CLOSE), _parted(twin, step, "other continuous actions")
            assert np.allclose(their_logprob, logprob, **CLOSE), _parted(twin, step, "other log-probabilities")
        torch.set_rng_state(after)
        obs = np.tanh(0.8 * obs + action.reshape(n, -1).astype(np.float32) @ mix).astype(np.float32)
    return steps


@pytest.mark.parametrize("name", list(SPACES))
def test_the_trainers_twins_draw_the_references_actions_at_every_step_of_a_rollout(name):
    """The same generator state gives the reference's actions exactly (a discrete head's index; a continuous value
    within 1e-6: numpy's exp of the log-std) and its log-probabilities within 1e-6, through the same random draws,
    from fast_acting.pi and from RolloutPolicy, step after step."""
    assert _rollout_draw_by_draw(SPACES[name]) == 12


@pytest.mark.parametrize("name", ["discrete", "box", "hybrid"])
def test_a_reference_changed_without_its_twins_fails_naming_them(name, monkeypatch):
    """Agent.pi made to change the logits (a temperature of 2/3) for the reference's lines only: the draw-by-draw
    check fails at the first step and names fast_acting.py's pi, the twin the trainer runs."""
    pi = Agent.pi
    monkeypatch.setattr(Agent, "pi", lambda self, out, action=None: pi(self, out if self.fast else out * 1.5, action))
    with pytest.raises(AssertionError, match=r"its twin that the trainer runs, fast_acting\.py: pi, part at step 0"):
        _rollout_draw_by_draw(SPACES[name])


def test_a_reference_that_draws_its_heads_in_another_order_fails_naming_the_twins(monkeypatch):
    """The hybrid space's reference drawing its categorical heads before the Gaussian (the same distributions, other
    draws): the check fails, naming the twin."""

    def discrete_first(self, out, action=None):
        if self.fast or action is not None:
            return pi(self, out, action)
        dists = self.distributions(out)
        samples = [d.sample() for d in dists[1:]]
        action = self._join([dists[0].sample()] + samples)
        return pi(self, out, action)

    pi = Agent.pi
    monkeypatch.setattr(Agent, "pi", discrete_first)
    with pytest.raises(AssertionError, match=r"fast_acting\.py: pi, part at step 0: other actions"):
        _rollout_draw_by_draw(SPACES["hybrid"])


@pytest.mark.slow
def test_the_trainer_builds_the_agent_to_read_and_runs_its_fast_twins(tmp_path, monkeypatch):
    """make_agent builds agent.py's Agent (and the recurrent one on it), its fast twins chosen, and a training acts
    through their numpy RolloutPolicy and updates through fast_acting.pi, never through the torch.distributions
    lines (the draw-by-draw test above holds those to the twins)."""
    assert type(make_agent(4, gym.spaces.Discrete(2), vars(Args()))) is Agent
    assert make_agent(4, gym.spaces.Discrete(2), vars(Args())).fast
    assert isinstance(make_agent(4, gym.spaces.Discrete(2), {"lstm": True}), Agent)
    calls = {"rollout": 0, "update": 0}
    rollout_policy, pi = Agent.rollout_policy, fast_acting.pi

    def counted_rollout_policy(self):
        calls["rollout"] += 1
        return rollout_policy(self)

    def counted_pi(agent, out, action=None):
        calls["update"] += action is not None
        return pi(agent, out, action)

    def refused(*args, **kwargs):
        raise AssertionError("the trainer used the reference agent's distributions")

    monkeypatch.setattr(Agent, "rollout_policy", counted_rollout_policy)
    monkeypatch.setattr(fast_acting, "pi", counted_pi)
    monkeypatch.setattr(Agent, "distributions", refused)
    monkeypatch.setattr(agent_mod.Acting, "__call__", refused)
    assert train.main(["--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256",
                       "--eval-episodes", "1", "--run-dir-root", str(tmp_path)]) == 0
    assert calls["rollout"] == 2  # one RolloutPolicy per rollout
    assert calls["update"] == 2 * Args().update_epochs * Args().num_minibatches  # one per minibatch


@pytest.mark.parametrize("inplace", [False, True], ids=["new_buffer", "in_place"])
@pytest.mark.parametrize("rows", [128, 1024], ids=["torch_path", "numpy_path"])
def test_the_updates_tanh_is_torchs_tanh(rows, inplace):
    """fast_acting.Tanh (numpy's tanh from 256 rows of 64 on, for the update's speed; with inplace=True written over
    a layer's output and its gradient over the saved output) gives torch.tanh's values and gradients within float32
    rounding, and stays an nn.Tanh (the policy file and the acting path read it as one)."""
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
