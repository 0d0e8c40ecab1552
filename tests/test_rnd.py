"""RND: the bonus falls on states seen often and stays high on novel ones; both normalisations behave."""

import numpy as np
import torch

from python_trainer.variants.rnd import RND, RunningDiscountedReturn, combine_advantages


def _cluster(rng, centre, n=256, dim=6):
    return (centre + 0.05 * rng.standard_normal((n, dim))).astype(np.float32)


def test_bonus_falls_on_states_seen_often_but_not_on_novel_ones():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    familiar_centre, novel_centre = np.full(6, -1.0), np.full(6, 1.0)
    rnd = RND(obs_dim=6, update_proportion=1.0)
    # statistics from both regions, so whitening treats them alike and only the training differs
    rnd.update_obs_stats(np.concatenate([_cluster(rng, familiar_centre), _cluster(rng, novel_centre)]))
    familiar, novel = _cluster(rng, familiar_centre), _cluster(rng, novel_centre)
    before_familiar = rnd.intrinsic_reward(familiar).mean()
    before_novel = rnd.intrinsic_reward(novel).mean()
    optimizer = torch.optim.Adam(rnd.predictor.parameters(), lr=1e-3)
    target_before = [p.clone() for p in rnd.target.parameters()]
    for _ in range(300):
        loss = rnd.predictor_loss(*rnd.prepare(_cluster(rng, familiar_centre, n=64)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after_familiar = rnd.intrinsic_reward(familiar).mean()
    after_novel = rnd.intrinsic_reward(novel).mean()
    assert after_familiar < 0.1 * before_familiar
    assert after_novel > 5 * after_familiar
    assert after_novel > 0.3 * before_novel  # training elsewhere barely touched the novel region
    assert all(torch.equal(a, b) for a, b in zip(target_before, rnd.target.parameters()))  # the target never trains


def test_predictor_loss_uses_the_given_proportion_of_samples():
    torch.manual_seed(1)
    rnd = RND(obs_dim=3, update_proportion=0.25)
    obs = np.random.default_rng(1).standard_normal((4000, 3)).astype(np.float32)
    rnd.predictor_loss(*rnd.prepare(obs)).backward()
    assert rnd.predictor[0].weight.grad is not None and all(p.grad is None for p in rnd.target.parameters())
    # the mask keeps about a quarter of the samples: the loss is the mean error over that subset
    torch.manual_seed(2)
    mask = torch.rand(4000) < 0.25
    torch.manual_seed(2)
    loss = rnd.predictor_loss(*rnd.prepare(obs))
    error = rnd.prediction_error(obs).detach()
    assert 0.2 < mask.float().mean() < 0.3
    assert torch.isclose(loss, error[mask].mean(), rtol=1e-5)
    nothing = RND(obs_dim=3, update_proportion=0.0)
    nothing = nothing.predictor_loss(*nothing.prepare(obs))  # no sample: 0, not NaN
    assert nothing.item() == 0.0


def test_observations_are_whitened_with_their_own_statistics_and_clipped():
    rnd = RND(obs_dim=2)
    data = np.random.default_rng(3).normal([10.0, -4.0], [2.0, 0.5], size=(5000, 2))
    rnd.update_obs_stats(data[:2500])
    rnd.update_obs_stats(data[2500:])  # two batches give the statistics of the whole
    np.testing.assert_allclose(rnd.obs_rms.mean, data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rnd.obs_rms.var, data.var(0), rtol=1e-3)
    x = rnd.normalize_obs(data).numpy()
    np.testing.assert_allclose(x.mean(0), [0, 0], atol=0.02)
    np.testing.assert_allclose(x.std(0), [1, 1], atol=0.02)
    far = rnd.normalize_obs(np.array([[1000.0, -1000.0]])).numpy()
    assert far.tolist() == [[5.0, -5.0]]


def test_intrinsic_reward_is_divided_by_the_std_of_the_non_episodic_discounted_return():
    rnd = RND(obs_dim=2, int_gamma=0.5)
    raw = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])  # (num_steps=3, num_envs=2)
    out = rnd.normalize_intrinsic(raw)
    # returns per env: 1, 1.5, 1.75 and 2, 3, 3.5; never reset (no dones are even passed)
    returns = np.array([1, 1.5, 1.75, 2, 3, 3.5])
    np.testing.assert_allclose(out, raw / returns.std(), rtol=1e-3)  # count starts at 1e-4: nearly the batch std
    assert (out > 0).all()  # the mean is not subtracted: a bonus stays a bonus
    # the filter carries over into the next rollout
    np.testing.assert_allclose(rnd.discounted.returns, [1.75, 3.5])
    f = RunningDiscountedReturn(0.9)
    f.update(np.array([1.0]))
    np.testing.assert_allclose(f.update(np.array([0.0])), [0.9])


def test_normalizer_state_survives_a_round_trip():
    rnd = RND(obs_dim=2)
    rnd.update_obs_stats(np.ones((4, 2)) * 3)
    rnd.normalize_intrinsic(np.ones((2, 3)))
    other = RND(obs_dim=2)
    other.load_stats_state_dict(rnd.stats_state_dict())
    np.testing.assert_array_equal(other.obs_rms.mean, rnd.obs_rms.mean)
    np.testing.assert_array_equal(other.int_return_rms.var, rnd.int_return_rms.var)
    np.testing.assert_array_equal(other.discounted.returns, rnd.discounted.returns)
    assert combine_advantages(np.array([1.0]), np.array([3.0])).tolist() == [5.0]
