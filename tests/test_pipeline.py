"""Pipelined rollouts: the vector env's groups (step_async / step_wait) and ppo.py's rollout over them.

With 2 or more instances the Godot env has two groups of instances; ppo.py sends a group's actions as soon as they are
computed (pipelined) or all groups' together (--no-pipeline, strict turns). Both must give the same trajectories and
the same model for the same seed: only the order of the waiting changes."""

import csv

import numpy as np
import pytest
import torch

from helpers import FAKE, fake_env, run_dirs
from python_trainer.run import checks, train
from python_trainer.envs.game import godot_game
from python_trainer.envs.gym_env import GymVecEnv
from python_trainer.envs.vec_env import GodotVecEnv



def _same_step(a, b):
    """Two step() tuples are equal, infos included (episode wall times aside)."""
    for x, y in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(x, y)
    ia, ib = a[4], b[4]
    assert sorted(ia) == sorted(ib)
    for key in ia:
        if key == "episode":
            for k in ("r", "l"):
                np.testing.assert_array_equal(ia[key][k], ib[key][k])
        elif ia[key].dtype == object:  # final_info; GymVecEnv's final_obs
            assert len(ia[key]) == len(ib[key])
            for x, y in zip(ia[key], ib[key]):
                assert (x is None and y is None) or np.array_equal(x, y) or x == y
        else:
            np.testing.assert_array_equal(ia[key], ib[key])


def _grouped_step(env, actions):
    """step() done group by group: every group's actions sent first, then every group's results, concatenated."""
    for group, g in enumerate(env.groups):
        env.step_async(actions[g], group)
    parts = [env.step_wait(group) for group in range(len(env.groups))]
    obs, rew, term, trunc = (np.concatenate([p[k] for p in parts]) for k in range(4))
    infos = {}
    for key in {k for p in parts for k in p[4]}:  # a group without the key: what step() has there
        if key == "episode":
            infos[key] = {k: np.concatenate([p[4][key][k] if key in p[4] else np.zeros(len(p[1])) for p in parts])
                          for k in ("r", "l")}
            continue
        like = next(p[4][key] for p in parts if key in p[4])
        blank = lambda n: (np.full(n, None, object) if like.dtype == object  # noqa: E731
                           else np.zeros((n,) + like.shape[1:], like.dtype))
        infos[key] = np.concatenate([p[4][key] if key in p[4] else blank(len(p[1])) for p in parts])
    return obs, rew, term, trunc, infos


# ---------------------------------------------------------------------------------------------- the vec env API
def test_groups_are_halves_of_the_instances(tmp_path):
    env = fake_env(tmp_path / "a", instances=3, agents=2)
    try:
        assert env.groups == [slice(0, 4), slice(4, 6)]  # instances 0-1, then 2
    finally:
        env.close()
    env = fake_env(tmp_path / "b", instances=1, agents=2)
    try:
        assert env.groups == [slice(0, 2)]
    finally:
        env.close()


def test_grouped_steps_equal_whole_steps(tmp_path):
    """step_async/step_wait per group give step()'s results: autoreset, final_obs/final_info, episode statistics."""
    envs = [fake_env(tmp_path / str(k), "--fake_info", instances=3) for k in range(2)]
    try:
        for env in envs:
            env.reset(seed=0)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(45):  # episodes end (fake RNG) and are truncated at 20 steps
            actions = rng.uniform(-1, 1, (9, 2))
            whole = envs[0].step(actions)
            grouped = _grouped_step(envs[1], actions)
            _same_step(whole, grouped)
            ended += int(whole[2].sum() + whole[3].sum())
        assert ended > 9
        np.testing.assert_array_equal(envs[0].episode_stats.episode_lengths, envs[1].episode_stats.episode_lengths)
        assert list(envs[0].episode_stats.return_queue) == list(envs[1].episode_stats.return_queue)
    finally:
        for env in envs:
            env.close()


def test_group_misuse_is_a_clear_error(tmp_path):
    env = fake_env(tmp_path, instances=2)
    try:
        with pytest.raises(RuntimeError, match="reset"):
            env.step_async(np.zeros((3, 2)), 0)
        env.reset()
        with pytest.raises(RuntimeError, match="without a step_async"):
            env.step_wait(1)
        with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
            env.step_async(np.zeros((6, 2)), 0)  # the whole batch, not the group's
        env.step_async(np.zeros((3, 2)), 0)
        with pytest.raises(RuntimeError, match="already has actions in flight"):
            env.step_async(np.zeros((3, 2)), 0)
        with pytest.raises(RuntimeError, match="step_wait"):
            env.step(np.zeros((6, 2)))
        obs, rew, *_ = env.step_wait(0)
        assert obs.shape == (3, 4) and rew.shape == (3,)
        env.step_async(np.zeros((3, 2)), 1)
        obs, _ = env.reset()  # a reset collects the replies still on the way first
        assert obs[:, 0].tolist() == [0.0] * 6
        env.step(np.zeros((6, 2)))
    finally:
        env.close()


def test_a_crashed_instance_of_a_group_is_restarted(tmp_path):
    env = fake_env(tmp_path, "--fake_mode=crash_after=4", instances=2, max_restarts=3,
                   report=lambda msg: None)
    try:
        env.reset()
        restarted = 0
        for _ in range(6):
            for group in (0, 1):
                env.step_async(np.zeros((3, 2)), group)
            for group in (0, 1):
                obs, rew, term, trunc, infos = env.step_wait(group)
                assert obs.shape == (3, 4)
                if "instance_restarted" in infos:
                    assert infos["instance_restarted"].all() and trunc.all() and not term.any()
                    assert infos["_final_obs"].all() and "episode" in infos
                    restarted += 1
        assert restarted == 2  # each group's instance once
        assert env.launcher.restarts == [1, 1]
    finally:
        env.close()


def test_gym_vec_env_has_one_group():
    envs = [GymVecEnv("CartPole-v1", num_envs=3, seed=0) for _ in range(2)]
    try:
        assert envs[1].groups == [slice(0, 3)]
        for env in envs:
            env.reset(seed=0)
        for t in range(60):
            actions = np.array([t % 2, 1, 0])
            whole = envs[0].step(actions)
            envs[1].step_async(actions, 0)
            _same_step(whole, envs[1].step_wait(0))
        with pytest.raises(RuntimeError):
            envs[1].step_wait(0)
        with pytest.raises(IndexError):
            envs[1].step_async(actions, 1)
    finally:
        for env in envs:
            env.close()


# ---------------------------------------------------------------------------------------------- ppo.py's rollout
def _train_and_record(monkeypatch, root, argv, fake=False):
    """Run train.main(argv) recording every step_async/step_wait of the Godot env: (events, model weights,
    episodes.csv rows). ``fake``: the fake game stands in for the export."""
    events = []
    real_async, real_wait = GodotVecEnv.step_async, GodotVecEnv.step_wait

    def step_async(self, actions, group):
        events.append(("send", group, np.array(actions, copy=True)))
        return real_async(self, actions, group)

    def step_wait(self, group):
        out = real_wait(self, group)
        events.append(("wait", group, out[0].copy(), out[1].copy(), out[2] | out[3]))
        return out

    with monkeypatch.context() as m:
        m.setattr(GodotVecEnv, "step_async", step_async)
        m.setattr(GodotVecEnv, "step_wait", step_wait)
        if fake:
            m.setattr(checks, "resolve_game", lambda args: godot_game("ball_chase", program=FAKE))
        assert train.main([*argv, "--run-dir-root", str(root), "--eval-episodes", "0"]) == 0
    (run_dir,) = run_dirs(root)
    model = torch.load(run_dir / "model.pt", weights_only=False)["model"]
    with open(run_dir / "episodes.csv") as f:
        episodes = list(csv.reader(f))
    return events, model, episodes


def _check_same_training(monkeypatch, tmp_path, argv, fake=False, min_episodes=0):
    piped, model_p, episodes_p = _train_and_record(monkeypatch, tmp_path / "piped", argv, fake)
    strict, model_s, episodes_s = _train_and_record(monkeypatch, tmp_path / "strict", [*argv, "--no-pipeline"], fake)
    # the order of work: pipelined, a group's actions leave before the next group is collected
    order_p = [(e[0], e[1]) for e in piped[2:6]]
    order_s = [(e[0], e[1]) for e in strict[2:6]]
    assert order_p == [("wait", 0), ("send", 0), ("wait", 1), ("send", 1)], order_p
    assert order_s == [("wait", 0), ("wait", 1), ("send", 0), ("send", 1)], order_s
    # the same trajectories: every group's actions, observations, rewards and dones, step by step
    key = lambda e: (e[0], e[1])  # noqa: E731
    piped, strict = sorted(piped, key=key), sorted(strict, key=key)  # stable: each (kind, group) in step order
    assert len(piped) == len(strict) and len(piped) > 4 * 200
    for a, b in zip(piped, strict):
        assert key(a) == key(b)
        for x, y in zip(a[2:], b[2:]):
            np.testing.assert_array_equal(x, y)
    assert episodes_p == episodes_s and len(episodes_s) - 1 >= min_episodes  # (a header line)
    # and so the same model, bit for bit
    assert model_p.keys() == model_s.keys()
    for name in model_p:
        assert torch.equal(model_p[name], model_s[name]), name


@pytest.mark.slow
def test_pipelined_and_strict_rollouts_match_on_the_fake_game(monkeypatch, tmp_path):
    argv = ["--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "4", "--num-steps", "100",
            "--num-minibatches", "4", "--total-timesteps", str(3 * 100 * 8), "--norm-obs", "--norm-reward"]
    _check_same_training(monkeypatch, tmp_path, argv, fake=True, min_episodes=100)


@pytest.mark.slow
def test_pipelined_and_strict_rollouts_match_on_ball_chase(monkeypatch, tmp_path, headless_export):
    argv = ["--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "4", "--num-steps", "128",
            "--total-timesteps", str(3 * 128 * 8), "--no-in-engine"]  # (ball_chase's episodes are longer than this;
    # at 4 agents per instance the default would run in the engine, where the trainer does not step the games)
    _check_same_training(monkeypatch, tmp_path, argv)


def _trailing_return(run_dir, n=100):
    with open(run_dir / "episodes.csv") as f:
        rows = [r for r in csv.reader(f)][1:]
    return float(np.mean([float(r[1]) for r in rows[-n:]])), len(rows)


@pytest.mark.slow
def test_ppo_learns_ball_chase(tmp_path, headless_export):
    """A short training (2 instances x 16 agents, 150k steps, ~12 s): random play scores about -0.5. Pipelined, the
    default; strict turns give the same trajectories (the tests above), so they learn the same."""
    argv = ["--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "16",
            "--total-timesteps", "150000", "--eval-episodes", "0", "--checkpoint-every", "0",
            "--run-dir-root", str(tmp_path)]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path)
    trailing, episodes = _trailing_return(run_dir)
    assert episodes > 100
    assert trailing > 3.0, trailing  # well above random play
