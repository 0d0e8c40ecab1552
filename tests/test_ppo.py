"""PPO trainer and gymnasium vector env: pure functions against hand numbers, then tiny real training runs."""

import json
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import CLEANRL_TAGS, event_accumulator, read_scalars, run_dirs
from python_trainer import cli
from python_trainer import ppo
from python_trainer import rollout
from python_trainer.base import flags
from python_trainer.checkpoint import load_checkpoint
from python_trainer import normalization
from python_trainer.run import train
from python_trainer.variants import trained_agent
from python_trainer import agent as agent_mod
from python_trainer.agent import Agent
from python_trainer.envs.gym_env import EpisodeStatistics, GymVecEnv



# ---------------------------------------------------------------------------------------------------------------------
# GAE and truncation bootstrapping: hand-computed numbers
# ---------------------------------------------------------------------------------------------------------------------
def test_gae_unit_four_step_example():
    # The course unit: one 4-step episode, rewards [0, 0, 0, 1], all values 0, gamma 0.99, lambda 0.95, ends after step 3.
    rewards = [[0.0], [0.0], [0.0], [1.0]]
    zeros = [[0.0]] * 4
    adv, ret = ppo.compute_gae(rewards, zeros, zeros, next_value=[0.0], next_done=[1.0], gamma=0.99, gae_lambda=0.95)
    np.testing.assert_allclose(adv[:, 0], [0.831, 0.884, 0.940, 1.0], atol=1e-3)
    np.testing.assert_allclose(adv[:, 0], [0.9405**3, 0.9405**2, 0.9405, 1.0], rtol=1e-6)
    np.testing.assert_allclose(ret, adv)  # returns = advantages + values (values are 0)
    # lambda = 0: only the last step gets the signal (pure TD error)
    adv0, _ = ppo.compute_gae(rewards, zeros, zeros, next_value=[0.0], next_done=[1.0], gamma=0.99, gae_lambda=0.0)
    np.testing.assert_allclose(adv0[:, 0], [0.0, 0.0, 0.0, 1.0])


def test_gae_episode_boundary_and_bootstrap_by_hand():
    # gamma = lambda = 0.5. Env 0: the episode ends at step 1 (dones[2] = 1), the rollout ends mid-episode (V = 4).
    # Env 1: no boundary, the rollout ends with a finished episode (next_done = 1: nothing bootstrapped).
    rewards = [[1.0, 1.0], [2.0, 0.0], [3.0, 2.0]]
    values = [[0.5, 1.0], [1.0, 2.0], [2.0, 1.0]]
    dones = [[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]
    adv, ret = ppo.compute_gae(
        rewards, values, dones, next_value=[4.0, 9.0], next_done=[0.0, 1.0], gamma=0.5, gae_lambda=0.5
    )
    # env 0: d2 = 3 + .5*4 - 2 = 3, A2 = 3;  d1 = 2 + 0 - 1 = 1, A1 = 1 (boundary);  d0 = 1 + .5*1 - .5 = 1, A0 = 1 + .25*1
    # env 1: d2 = 2 + 0 - 1 = 1, A2 = 1;  d1 = 0 + .5*1 - 2 = -1.5, A1 = -1.5 + .25*1 = -1.25;
    #        d0 = 1 + .5*2 - 1 = 1, A0 = 1 + .25*(-1.25) = 0.6875
    np.testing.assert_allclose(adv, [[1.25, 0.6875], [1.0, -1.25], [3.0, 1.0]])
    np.testing.assert_allclose(ret, np.array(adv) + np.array(values))


def test_truncation_bootstraps_and_termination_does_not():
    rewards = [1.0, 1.0, 1.0, 1.0]
    terminated = np.array([False, True, False, True])
    truncated = np.array([False, False, True, True])  # env 3: both (a terminal state reached at the time limit)
    final_values = [10.0, 20.0, 30.0, 40.0]
    out = ppo.bootstrap_truncated(rewards, terminated, truncated, final_values, gamma=0.9)
    np.testing.assert_allclose(out, [1.0, 1.0, 1.0 + 0.9 * 30.0, 1.0])


def test_truncated_episode_keeps_its_future_in_the_return():
    # One env, 2 steps, reward 1 each, V = 5 everywhere, gamma 0.9, lambda 1: the episode is cut off by the time
    # limit after step 0 with V(final obs) = 5. Truncation: G_0 = 1 + 0.9 * 5; a termination would give G_0 = 1.
    gamma = 0.9
    trunc_r0 = ppo.bootstrap_truncated([1.0], [False], [True], [5.0], gamma)[0]
    term_r0 = ppo.bootstrap_truncated([1.0], [True], [False], [5.0], gamma)[0]
    kw = dict(
        values=[[5.0], [5.0]], dones=[[0.0], [1.0]], next_value=[5.0], next_done=[0.0], gamma=gamma, gae_lambda=1.0
    )
    _, ret_trunc = ppo.compute_gae([[trunc_r0], [1.0]], **kw)
    _, ret_term = ppo.compute_gae([[term_r0], [1.0]], **kw)
    assert ret_trunc[0, 0] == pytest.approx(5.5)
    assert ret_term[0, 0] == pytest.approx(1.0)
    assert ret_trunc[1, 0] == ret_term[1, 0] == pytest.approx(1.0 + 0.9 * 5.0)  # next episode bootstraps as usual


@pytest.mark.parametrize("fast", [False, True], ids=["reference", "fast"])
def test_agent_log_probs_and_entropy_match_torch_distributions(fast):
    """The reference's heads are torch.distributions'; the fast twin's, written out, give the same numbers."""
    torch.manual_seed(0)
    x = torch.randn(6, 3)
    agent = Agent(3, gym.spaces.Discrete(4), fast=fast)
    torch.nn.init.normal_(agent.actor[-1].weight)
    a = torch.randint(0, 4, (6,))
    _, logprob, entropy, _, _ = agent.get_action_and_value(x, a)
    dist = torch.distributions.Categorical(logits=agent.actor(x))
    torch.testing.assert_close(logprob, dist.log_prob(a))
    torch.testing.assert_close(entropy, dist.entropy())

    agent = Agent(3, gym.spaces.Box(-1, 1, (2,)), fast=fast)
    with torch.no_grad():
        agent.actor_logstd[:] = torch.tensor([[0.3, -0.7]])
    a = torch.randn(6, 2)
    _, logprob, entropy, _, _ = agent.get_action_and_value(x, a)
    dist = torch.distributions.Normal(agent.actor(x), agent.actor_logstd.exp().expand(6, 2))
    torch.testing.assert_close(logprob, dist.log_prob(a).sum(1))
    torch.testing.assert_close(entropy, dist.entropy().sum(1))


@pytest.mark.parametrize("fast", [False, True], ids=["reference", "fast"])
def test_hybrid_agent_sums_one_head_per_key(fast):
    """A Dict space of both kinds (a 3-choice discrete key next to continuous ones): the continuous means first, then
    each discrete key's logits; log-probabilities and entropies are the sums over the heads, in the reference and
    in its fast twin."""
    torch.manual_seed(0)
    space = gym.spaces.Dict({"aim": gym.spaces.Box(-1, 1, (1,)), "jump": gym.spaces.Discrete(3),
                             "mode": gym.spaces.Discrete(2), "move": gym.spaces.Box(-1, 1, (2,))})
    agent = Agent(3, space, fast=fast)
    assert agent.heads == [("aim", "continuous", 1), ("move", "continuous", 2), ("jump", "discrete", 3),
                           ("mode", "discrete", 2)]
    assert agent.actor[-1].out_features == 3 + 3 + 2 and agent.action_shape == (5,)
    torch.nn.init.normal_(agent.actor[-1].weight)
    with torch.no_grad():
        agent.actor_logstd[:] = torch.tensor([[0.3, -0.7, 0.1]])
    x = torch.randn(200, 3)
    action, logprob, entropy, _, _ = agent.get_action_and_value(x)
    assert action.shape == (200, 5) and action.dtype == torch.float32
    assert set(action[:, 3].tolist()) == {0.0, 1.0, 2.0} and set(action[:, 4].tolist()) == {0.0, 1.0}
    out = agent.actor(x)
    normal = torch.distributions.Normal(out[:, :3], agent.actor_logstd.exp().expand(200, 3))
    jump, mode = torch.distributions.Categorical(logits=out[:, 3:6]), torch.distributions.Categorical(logits=out[:, 6:8])
    expected = normal.log_prob(action[:, :3]).sum(1) + jump.log_prob(action[:, 3].long()) + mode.log_prob(action[:, 4].long())
    torch.testing.assert_close(logprob, expected)
    torch.testing.assert_close(entropy, normal.entropy().sum(1) + jump.entropy() + mode.entropy())
    _, logprob_again, _, _, _ = agent.get_action_and_value(x, action)  # the update re-evaluates the stored action
    torch.testing.assert_close(logprob_again, logprob)

    env_actions = agent_mod.env_action(space, np.array([[2.5, -3.0, 0.5, 2.0, 1.0]], np.float32))
    assert set(env_actions) == {"aim", "jump", "mode", "move"}
    np.testing.assert_array_equal(env_actions["aim"], [[1.0]])
    np.testing.assert_array_equal(env_actions["move"], [[-1.0, 0.5]])
    assert env_actions["jump"].tolist() == [2] and env_actions["mode"].tolist() == [1]
    with torch.no_grad():
        deterministic, out = agent.act(x[:4])[0], agent.actor(x[:4])
    torch.testing.assert_close(deterministic[:, :3], out[:, :3])
    torch.testing.assert_close(deterministic[:, 3:], torch.stack([out[:, 3:6].argmax(1), out[:, 6:8].argmax(1)], 1).float())

    multi = Agent(3, gym.spaces.MultiDiscrete([3, 2]))  # several discrete keys (a Godot game's MultiDiscrete)
    assert multi.heads == [("0", "discrete", 3), ("1", "discrete", 2)] and not hasattr(multi, "actor_logstd")
    assert agent_mod.env_action(gym.spaces.MultiDiscrete([3, 2]), np.array([[2.0, 1.0]], np.float32)).tolist() == [[2, 1]]


# ---------------------------------------------------------------------------------------------------------------------
# GymVecEnv: same-step autoreset and episode statistics
# ---------------------------------------------------------------------------------------------------------------------
def test_gym_vec_env_same_step_autoreset_matches_single_envs():
    n, seed = 3, 7
    envs = GymVecEnv("CartPole-v1", num_envs=n, seed=seed)
    assert envs.metadata["autoreset_mode"] == "same-step"
    assert envs.num_envs == n and envs.single_action_space == gym.spaces.Discrete(2)
    assert envs.single_observation_space.shape == (4,) and envs.observation_space.shape == (n, 4)
    refs = [gym.make("CartPole-v1") for _ in range(n)]
    ref_obs = [r.reset(seed=seed + i)[0] for i, r in enumerate(refs)]
    obs, _ = envs.reset()
    np.testing.assert_array_equal(obs, np.stack(ref_obs))

    lengths, finished = np.zeros(n, int), np.zeros(n, bool)
    for t in range(60):
        actions = np.array([(t + i) % 2 if i else 1 for i in range(n)])  # env 0 always pushes right: falls fast
        obs, rew, term, trunc, infos = envs.step(actions)
        lengths += 1
        for i in range(n):
            if finished[i]:
                continue
            r_obs, _, r_term, r_trunc, _ = refs[i].step(int(actions[i]))
            assert (term[i], trunc[i]) == (r_term, r_trunc)
            if r_term or r_trunc:
                finished[i] = True
                assert infos["_final_obs"][i] and infos["_episode"][i]
                np.testing.assert_array_equal(infos["final_obs"][i], r_obs)  # the last obs of the finished episode
                assert np.all(np.abs(obs[i]) <= 0.05)  # ...while obs[i] is already a reset state (U(-0.05, 0.05))
                assert infos["episode"]["l"][i] == lengths[i] and infos["episode"]["r"][i] == float(lengths[i])
                lengths[i] = 0
            else:
                np.testing.assert_array_equal(obs[i], r_obs)
        if "_episode" in infos:
            np.testing.assert_array_equal(infos["_episode"], term | trunc)
            assert infos["episode"]["r"].shape == (n,) and infos["episode"]["l"].dtype.kind == "i"
            assert np.all(infos["episode"]["r"][~infos["_episode"]] == 0)
            assert infos["final_obs"][~infos["_final_obs"]].tolist() == [None] * int((~infos["_final_obs"]).sum())
        else:
            assert not (term | trunc).any() and "final_obs" not in infos
    assert finished[0]
    envs.close()


def test_gym_vec_env_truncation_and_episode_statistics():
    envs = GymVecEnv("CartPole-v1", num_envs=2, seed=0, max_episode_steps=5)
    envs.reset()
    for t in range(5):
        obs, rew, term, trunc, infos = envs.step(np.array([t % 2, (t + 1) % 2]))
    assert trunc.all() and not term.any()  # alternating pushes cannot drop the pole in 5 steps: time limit
    np.testing.assert_array_equal(infos["episode"]["l"], [5, 5])
    np.testing.assert_array_equal(infos["episode"]["r"], [5.0, 5.0])
    assert infos["episode"]["t"].dtype.kind == "f" and infos["_final_obs"].all()
    _, _, _, _, infos = envs.step(np.array([0, 1]))
    assert "episode" not in infos
    assert envs.episode_stats.episode_lengths.tolist() == [1, 1]  # counting the new episodes from their first step
    envs.close()


def test_episode_statistics_alone():
    stats = EpisodeStatistics(3)
    stats.reset()
    f = np.zeros(3, bool)
    assert stats.update(np.array([1.0, 2.0, 3.0]), f, f, {}) == {}
    infos = stats.update(np.array([1.0, 1.0, 1.0]), np.array([False, True, False]), np.array([False, False, True]), {})
    np.testing.assert_array_equal(infos["_episode"], [False, True, True])
    np.testing.assert_array_equal(infos["episode"]["r"], [0.0, 3.0, 4.0])
    np.testing.assert_array_equal(infos["episode"]["l"], [0, 2, 2])
    assert list(stats.return_queue) == [3.0, 4.0] and stats.episode_count == 2
    infos = stats.update(np.array([1.0, 1.0, 1.0]), np.array([True, True, False]), f, {})
    np.testing.assert_array_equal(infos["episode"]["r"], [3.0, 1.0, 0.0])


# ---------------------------------------------------------------------------------------------------------------------
# Training runs (tiny budgets)
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env_id, extra",
    [
        ("CartPole-v1", ["--num-envs", "2", "--num-steps", "128", "--total-timesteps", "512"]),
        ("Pendulum-v1", ["--num-envs", "2", "--num-steps", "256", "--total-timesteps", "1024", "--target-kl", "0.05"]),
    ],
)
def test_smoke_run_writes_every_tag_and_a_reloadable_model(tmp_path, env_id, extra):
    argv = [
        "--env-id",
        env_id,
        *extra,
        "--eval-episodes",
        "2",
        "--run-dir-root",
        str(tmp_path),
        "--checkpoint-every",
        "1",
    ]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path)
    assert run_dir.name.startswith(f"{env_id}__ppo__1__")
    scalars = read_scalars(run_dir)
    missing = [t for t in CLEANRL_TAGS if t not in scalars]
    assert not missing, f"missing TensorBoard tags: {missing}"
    assert any("hyperparameters" in t for t in event_accumulator(run_dir).Tags()["tensors"])
    batch, total = int(extra[1]) * int(extra[3]), int(extra[5])  # num_envs * num_steps; total_timesteps
    assert [s for s, _ in scalars["charts/SPS"]] == list(range(batch, total + 1, batch))  # one event per update
    for name in ("args.json", "checkpoint.pt", "model.pt", "learning_curve.png", "episodes.csv"):
        assert (run_dir / name).is_file(), name
    assert json.loads((run_dir / "args.json").read_text())["env_id"] == env_id

    loaded = trained_agent.load_agent(run_dir / "model.pt")
    assert loaded.env_id == env_id and loaded.global_step == total
    continuous = env_id == "Pendulum-v1"
    assert loaded.normalizer.norm_obs == continuous and loaded.normalizer.norm_reward == continuous
    if continuous:  # the observation statistics of training travel with the model
        assert loaded.normalizer.obs_rms.count > 1000 and np.abs(loaded.normalizer.obs_rms.mean).sum() > 0
        action = loaded.act(np.array([[1.0, 0.0, 8.0]], np.float32))
        assert action.shape == (1, 1) and -2.0 <= action[0, 0] <= 2.0
    else:
        assert loaded.act(np.zeros((3, 4), np.float32)).shape == (3,)


@pytest.mark.slow
def test_resume_continues_at_the_saved_global_step(tmp_path, capsys):
    base = ["--num-envs", "2", "--num-steps", "128", "--eval-episodes", "0", "--run-dir-root", str(tmp_path)]
    assert train.main([*base, "--total-timesteps", "1024", "--checkpoint-every", "1"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == 1024
    capsys.readouterr()

    # flags not given (num-envs, num-steps, ...) come from the run's args.json
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "2048"]) == 0
    assert "resuming" in capsys.readouterr().out and run_dirs(tmp_path) == [run_dir]
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert (ckpt["global_step"], ckpt["update"]) == (2048, 8)
    scalars = read_scalars(run_dir)
    # One event per update, nothing repeated or skipped. Sorted: the two runs' event files are read in the order of
    # their names, which end in a per-process counter (".9" sorts after ".10").
    steps = sorted(s for s, _ in scalars["charts/SPS"])
    assert steps == list(range(256, 2049, 256))
    lr = dict(scalars["charts/learning_rate"])
    assert lr[1280] == pytest.approx(2.5e-4 * (1 - 4 / 8))  # update 5 of 8: the annealing continued, not restarted

    # wrong env / no checkpoint: clear errors, the checkpoint is untouched
    assert cli.main(["train", "--resume", str(run_dir), "--env-id", "Pendulum-v1"]) == 2
    assert "godot-ppo train: error:" in capsys.readouterr().err
    empty = tmp_path / "empty_run"
    empty.mkdir()
    assert cli.main(["train", "--resume", str(empty)]) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == 2048


@pytest.mark.slow
def test_a_resume_with_another_number_of_envs_ends_at_its_total_timesteps(tmp_path, capsys):
    """The updates left are counted from the steps left, not from the update index: more envs (a bigger batch) do
    not stop short of --total-timesteps, fewer do not run past it (each within one batch)."""
    base = ["--num-steps", "64", "--eval-episodes", "0", "--run-dir-root", str(tmp_path)]
    assert train.main([*base, "--num-envs", "4", "--total-timesteps", "1024"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    capsys.readouterr()
    # 6 envs: batch 384. Counted from the update index (4 of 3000 // 384 = 7) it would stop at 2176 of 3000
    assert train.main(["--resume", str(run_dir), "--num-envs", "6", "--total-timesteps", "3000"]) == 0
    err = capsys.readouterr().err
    ckpt = load_checkpoint(run_dir / "model.pt")
    assert 3000 - 384 < ckpt["global_step"] <= 3000 and ckpt["batch_size"] == 384, ckpt["global_step"]
    assert "collected 256 steps per update, this one 384" in err and "end at global step 2944" in err, err
    # 2 envs: batch 128. Counted from the update index (7 of 4096 // 128 = 32) it would run on to 6144
    assert train.main(["--resume", str(run_dir), "--num-envs", "2", "--total-timesteps", "4096"]) == 0
    assert load_checkpoint(run_dir / "model.pt")["global_step"] == 4096
    scalars = read_scalars(run_dir)
    lr = dict(scalars["charts/learning_rate"])
    # the steps done, in batches of 384, number the updates: 1024 // 384 = 2 done, the first resumed one is 3 of 7
    assert lr[1024 + 384] == pytest.approx(2.5e-4 * (1 - 2 / 7))


def test_keyboard_interrupt_leaves_a_checkpoint(tmp_path, monkeypatch, capsys):
    calls = {"n": 0}
    real_step = GymVecEnv.step

    def step(self, actions):
        calls["n"] += 1
        if calls["n"] == 300:  # mid-rollout of update 5 (64 vector steps per update)
            raise KeyboardInterrupt
        return real_step(self, actions)

    monkeypatch.setattr(GymVecEnv, "step", step)
    closed = []
    monkeypatch.setattr(GymVecEnv, "close_extras", lambda self, **kw: closed.append(True))
    argv = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "4096", "--checkpoint-every", "100",
            "--run-dir-root", str(tmp_path)]
    assert cli.main(["train", *argv]) == 130
    assert closed  # envs.close() ran
    (run_dir,) = run_dirs(tmp_path)
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert (ckpt["global_step"], ckpt["update"]) == (4 * 128, 4)
    assert "--resume" in capsys.readouterr().err
    assert not list(run_dir.glob(".*tmp*")), "a temporary file was left"


def test_inconsistent_sizes_and_unknown_env_are_clear_errors(tmp_path, capsys):
    root = ["--run-dir-root", str(tmp_path)]
    assert cli.main(["train", "--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4", *root]) == 2
    err = capsys.readouterr().err
    assert err.startswith("godot-ppo train: error:") and "--num-minibatches" in err and "15" in err
    assert cli.main(["train", "--num-envs", "4", "--num-steps", "128", "--total-timesteps", "100", *root]) == 2
    assert "--total-timesteps" in capsys.readouterr().err
    assert cli.main(["train", "--env-id", "NoSuchEnv-v9", *root]) == 2
    err = capsys.readouterr().err
    assert "NoSuchEnv-v9" in err and "ball_chase" in err
    assert (
        cli.main(["train", "--env-id", "ball_chase", "--num-envs", "10", "--num-instances", "2",
                  "--agents-per-instance", "4", *root])
        == 2
    )
    assert "--agents-per-instance" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no run folder for a run that never started


class _NanAfterThree(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(2, np.nan if self.t > 3 else 0.0, np.float32)
        return obs, 0.0, False, False, {}


class _HugeRewardAfterThree(_NanAfterThree):
    """A reward of 1e39: a finite float64, inf as the buffer's float32."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return np.zeros(2, np.float32), 1e39 if self.t > 3 else 0.0, terminated, truncated, info


def test_a_reward_beyond_float32_is_named_like_a_nan(tmp_path, capsys):
    gym.register("TestHugeReward-v0", entry_point=_HugeRewardAfterThree)
    try:
        assert cli.main(["train", "--env-id", "TestHugeReward-v0", "--run-dir-root", str(tmp_path), "--num-envs", "2",
                         "--num-steps", "8", "--total-timesteps", "64"]) == 2
    finally:
        gym.registry.pop("TestHugeReward-v0")
    err = capsys.readouterr().err.strip()
    assert "TestHugeReward-v0 returned NaN/inf observations or rewards at global step 8" in err and "\n" not in err
    assert not list(tmp_path.glob("*/model.pt"))


def test_finite_as_float32_reads_every_kind_of_row():
    assert rollout.finite_as_float32(np.array([1e38, -3e38])) and rollout.finite_as_float32(np.full(3, 255, np.uint8))
    assert not rollout.finite_as_float32(np.array([0.0, 1e39])) and not rollout.finite_as_float32(np.array([np.inf]))
    assert not rollout.finite_as_float32(np.array([np.nan], np.float32))


class _MultiBinaryActions(_NanAfterThree):
    action_space = gym.spaces.MultiBinary(3)


def test_nan_observations_and_unsupported_spaces_are_clear_errors(tmp_path, capsys):
    gym.register("TestNanObs-v0", entry_point=_NanAfterThree)
    gym.register("TestMultiBinary-v0", entry_point=_MultiBinaryActions)
    try:
        root = ["--run-dir-root", str(tmp_path), "--num-envs", "2", "--num-steps", "8", "--total-timesteps", "64"]
        assert cli.main(["train", "--env-id", "TestNanObs-v0", *root]) == 2
        assert "NaN" in capsys.readouterr().err
        assert cli.main(["train", "--env-id", "TestMultiBinary-v0", *root]) == 2
        assert "MultiBinary" in capsys.readouterr().err
    finally:
        gym.registry.pop("TestNanObs-v0")
        gym.registry.pop("TestMultiBinary-v0")


def test_auto_normalisation_flags_parse():
    assert normalization.bool_flag_aliases(["--norm-obs", "--no-norm-reward", "--seed", "3"]) == [
        "--norm-obs", "True", "--norm-reward", "False", "--seed", "3"]
    assert flags.explicit_fields(["--env-id=Pendulum-v1", "--no-anneal-lr", "--seed", "3"], train.Args) == {
        "env_id",
        "anneal_lr",
        "seed",
    }


def test_target_kl_stops_the_update_epochs_early(tmp_path):
    base = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--eval-episodes", "0"]
    assert train.main([*base, "--run-dir-root", str(tmp_path / "a"), "--target-kl", "1e-9"]) == 0
    assert train.main([*base, "--run-dir-root", str(tmp_path / "b")]) == 0
    (stopped,), (full,) = run_dirs(tmp_path / "a"), run_dirs(tmp_path / "b")
    # after the first gradient step any KL exceeds 1e-9: the update stops inside epoch 1 (0 epochs completed)
    assert [v for _, v in read_scalars(stopped)["diagnostics/update_epochs_done"]] == [0.0, 0.0]
    assert [v for _, v in read_scalars(full)["diagnostics/update_epochs_done"]] == [4.0, 4.0]


def test_ppo_trains_a_hybrid_space_with_a_three_choice_key(tmp_path):
    """The fake game with a continuous key (a0, 2 values) and a discrete key of 3 choices (a1), through train.main:
    rollout, update, checkpoint, resume and the deterministic evaluation."""
    import stat

    from helpers import FAKE_GAME

    script = tmp_path / "hybrid_game.sh"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GAME}" "$@" --fake_action=continuous:2,discrete:3\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    root = tmp_path / "runs"
    argv = ["--env-path", str(script), "--agents-per-instance", "4", "--num-steps", "16", "--num-minibatches", "2",
            "--total-timesteps", "128", "--eval-episodes", "2", "--checkpoint-every", "1", "--run-dir-root", str(root)]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(root)
    loaded = trained_agent.load_agent(run_dir)
    assert loaded.action_space == gym.spaces.Dict({"a0": gym.spaces.Box(-1, 1, (2,), np.float32),
                                                   "a1": gym.spaces.Discrete(3)})
    assert loaded.agent.heads == [("a0", "continuous", 2), ("a1", "discrete", 3)] and loaded.global_step == 128
    policy = json.loads((run_dir / "policy.json").read_text())  # for in-engine playback: one rule per key
    assert len(policy["action_keys"][0].pop("log_std")) == 2  # the continuous key's, for --policy_sample
    assert policy["action_rule"] == "per_key" and policy["action_keys"] == [
        {"key": "a0", "action_type": "continuous", "size": 2}, {"key": "a1", "action_type": "discrete", "size": 3}]
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "192"]) == 0
    assert trained_agent.load_agent(run_dir).global_step == 192


def test_weights_stepped_to_inf_stop_the_run_in_one_line_and_keep_the_last_checkpoint(tmp_path, capsys):
    root = ["--run-dir-root", str(tmp_path), "--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "16",
            "--num-minibatches", "1", "--update-epochs", "1", "--eval-episodes", "0", "--checkpoint-every", "1"]
    assert cli.main(["train", *root, "--total-timesteps", "32"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    saved = {name: (run_dir / name).read_bytes() for name in ("checkpoint.pt", "model.pt")}
    capsys.readouterr()
    # a finite loss whose Adam step (of size ~ the learning rate) takes every weight past float32's range
    assert cli.main(["train", "--resume", str(run_dir), "--total-timesteps", "64", "--learning-rate", "1e39"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("godot-ppo train: error: the weights became NaN/inf (policy ") and "\n" not in err
    assert (f"in the update to global step 64; the last checkpoint {run_dir / 'checkpoint.pt'} (global step 32) is "
            "intact. Lower --learning-rate") in err
    assert {name: (run_dir / name).read_bytes() for name in saved} == saved  # no NaN model.pt, nothing altered
