"""GodotVecEnv: spaces, action validation, same-step autoreset, terminal observations, episode statistics.

The fake game (tests/fake_game.py) has known dynamics: observation [t, agent, seed, last action sum],
reward 0.1 + 0.01 * agent, truncation at max_episode_steps. Tests marked real use the headless export."""

import re
import time

import gymnasium as gym
import numpy as np
import pytest

from helpers import FAKE, fake_env, wait_gone
from python_trainer.envs.spaces import spaces_from_env_info
from python_trainer.envs.vec_env import make_vec_env



# ---------------------------------------------------------------------------------------------- spaces
def info_with(action_space, obs_space=None, n=2):
    return {"n_agents": n, "observation_space": [obs_space or {"obs": {"size": [4], "space": "box"}}] * n,
            "action_space": [action_space] * n}


def test_space_flattening():
    obs, act, *_ = spaces_from_env_info(info_with({"move": {"size": 2, "action_type": "continuous"}}))
    assert obs == gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    assert act == gym.spaces.Box(-1, 1, (2,), np.float32)
    _, act, *_ = spaces_from_env_info(info_with({"b": {"size": 1, "action_type": "continuous"},
                                                 "a": {"size": 2, "action_type": "continuous"}}))
    assert act == gym.spaces.Box(-1, 1, (3,), np.float32)
    _, act, *_ = spaces_from_env_info(info_with({"jump": {"size": 3, "action_type": "discrete"}}))
    assert act == gym.spaces.Discrete(3)
    _, act, *_ = spaces_from_env_info(info_with({"b": {"size": 2, "action_type": "discrete"},
                                                 "a": {"size": 5, "action_type": "discrete"}}))
    assert act == gym.spaces.MultiDiscrete([5, 2])  # sorted keys
    _, act, _, kind, layout = spaces_from_env_info(info_with({"move": {"size": 2, "action_type": "continuous"},
                                                             "jump": {"size": 3, "action_type": "discrete"}}))
    assert kind == "hybrid" and layout == [("jump", 3), ("move", 2)]
    assert act == gym.spaces.Dict({"jump": gym.spaces.Discrete(3), "move": gym.spaces.Box(-1, 1, (2,), np.float32)})
    with pytest.raises(ValueError, match="size below 1"):
        spaces_from_env_info(info_with({"move": {"size": 0, "action_type": "continuous"}}))
    obs, *_ = spaces_from_env_info(info_with({"move": {"size": 2, "action_type": "continuous"}},
                                             {"b": {"size": [3], "space": "box"},
                                              "a": {"size": [2, 2], "space": "box"}}))
    assert obs.shape == (7,)


def test_env_basics_and_obs_layout(tmp_path):
    env = fake_env(tmp_path, "--fake_obs=b:2,a:3")
    try:
        assert env.num_envs == 6 and env.metadata["autoreset_mode"] == "same-step"
        assert env.single_observation_space.shape == (5,)
        assert env.observation_space.shape == (6, 5) and env.action_space.shape == (6, 2)
        obs, infos = env.reset(seed=1)
        assert obs.dtype == np.float32 and obs.shape == (6, 5) and infos == {}
        # the game sends b=[t, agent], a=[seed, last, 0]: sorted keys put a first
        assert obs[4].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]  # instance 1 (seed 1), agent 1
        assert env.call("ping") == ["ping"] * 6
    finally:
        env.close()


@pytest.mark.parametrize("spec,space", [
    ("discrete:3", gym.spaces.Discrete(3)),
    ("discrete:3,discrete:2", gym.spaces.MultiDiscrete([3, 2])),
    ("continuous:2,continuous:1", gym.spaces.Box(-1, 1, (3,), np.float32)),
])
def test_action_kinds_reach_the_game(tmp_path, spec, space):
    env = fake_env(tmp_path, f"--fake_action={spec}", instances=1, agents=4)
    try:
        assert env.single_action_space == space
        env.reset()
        actions = env.action_space.sample()
        obs, *_ = env.step(actions)
        # the fake game echoes the sum of each agent's action components in obs[3]
        expected = np.asarray(actions, dtype=np.float64).reshape(4, -1).sum(axis=1)
        np.testing.assert_allclose(obs[:, 3], expected, rtol=1e-6)
    finally:
        env.close()


def test_action_validation(tmp_path):
    env = fake_env(tmp_path, instances=1, agents=2)
    try:
        env.reset()
        with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
            env.step(np.zeros((3, 2)))
        with pytest.raises(ValueError, match="NaN"):
            env.step(np.array([[0.0, np.nan], [0.0, 0.0]]))
        with pytest.raises(ValueError, match="NaN or infinite"):
            env.step(np.array([[0.0, np.inf], [0.0, 0.0]]))
        obs, *_ = env.step(np.array([[5.0, 5.0], [-0.25, 0.0]]))  # clipped to [-1, 1]
        assert obs[:, 3].tolist() == [2.0, -0.25]
        with pytest.raises(RuntimeError, match="closed"):
            env.close()
            env.step(np.zeros((2, 2)))
    finally:
        env.close()
    denv = fake_env(tmp_path, "--fake_action=discrete:3", instances=1, agents=2)
    try:
        denv.reset()
        with pytest.raises(ValueError, match="out of range"):
            denv.step(np.array([0, 3]))
        with pytest.raises(ValueError, match="whole numbers"):
            denv.step(np.array([0.5, 1.0]))
        with pytest.raises(ValueError, match="shape"):
            denv.step(np.array([[0, 1, 2]]))
        denv.step(np.array([2, 1]))
    finally:
        denv.close()


def test_hybrid_actions_reach_the_game(tmp_path):
    # a0: 2 continuous values, a1: a discrete key of 3 choices (godot-rl's SB3/CleanRL wrappers refuse this space)
    env = fake_env(tmp_path, "--fake_action=continuous:2,discrete:3", instances=2, agents=3)
    try:
        assert env.single_action_space == gym.spaces.Dict(
            {"a0": gym.spaces.Box(-1, 1, (2,), np.float32), "a1": gym.spaces.Discrete(3)})
        env.reset()
        for _ in range(5):
            actions = env.action_space.sample()
            obs, *_ = env.step(actions)
            # the fake game echoes the sum of each agent's action values in obs[3]
            expected = actions["a0"].astype(np.float64).sum(axis=1) + actions["a1"]
            np.testing.assert_allclose(obs[:, 3], expected, rtol=1e-6)
        obs, *_ = env.step({"a0": np.full((6, 2), 3.0), "a1": np.array([0, 1, 2, 2, 1, 0])})  # clipped to [-1, 1]
        assert obs[:, 3].tolist() == [2.0, 3.0, 4.0, 4.0, 3.0, 2.0]
    finally:
        env.close()


@pytest.mark.parametrize("actions, message", [
    (np.zeros((4, 3)), r"must be a dict \{key: batched values\} with the keys \['a0', 'a1'\], got ndarray"),
    ({"a0": np.zeros((4, 2))}, r"actions have the keys \['a0'\]; .* needs \['a0', 'a1'\]"),
    ({"a0": np.zeros((4, 2)), "a1": np.zeros(4, int), "a2": np.zeros(4)}, r"keys \['a0', 'a1', 'a2'\]"),
    ({"a0": np.zeros((4, 3)), "a1": np.zeros(4, int)}, r"actions\['a0'\] must have shape \(4, 2\), got \(4, 3\)"),
    ({"a0": np.zeros((4, 2)), "a1": np.zeros((4, 2), int)}, r"actions\['a1'\] must have shape \(4,\)"),
    ({"a0": np.array([[0, np.nan]] * 4), "a1": np.zeros(4, int)}, r"actions\['a0'\] contains NaN"),
    ({"a0": np.zeros((4, 2)), "a1": np.array([0, 1, 3, 0])}, r"actions\['a1'\] out of range: must be in \[0, 3\), got 3"),
    ({"a0": np.zeros((4, 2)), "a1": np.array([0, -1, 0, 0])}, r"out of range"),
    ({"a0": np.zeros((4, 2)), "a1": np.array([0, np.nan, 0, 0])}, r"actions\['a1'\] contains NaN"),
    ({"a0": np.zeros((4, 2)), "a1": np.array([0, 0.5, 0, 0])}, r"whole numbers"),
    ({"a0": np.array([["a", "b"]] * 4), "a1": np.zeros(4, int)}, r"must be numbers"),
    ({"a0": np.zeros((4, 2)), "a1": np.array(["x"] * 4)}, r"must be integers"),
    ({"a0": np.zeros((4, 2)), "a1": np.zeros(4, int), 1: np.zeros(4)}, r"keys \['a0', 'a1', 1\].*the key 1 is not a string"),
    ({"a0": [[0, 0], [0], [0, 0], [0, 0]], "a1": np.zeros(4, int)}, r"actions\['a0'\] must be a rectangular array.*ragged"),
])
def test_hybrid_action_validation(tmp_path, actions, message):
    env = fake_env(tmp_path, "--fake_action=continuous:2,discrete:3", instances=1, agents=4)
    try:
        env.reset()
        with pytest.raises(ValueError, match=message):
            env.step(actions)
        env.step({"a0": np.zeros((4, 2)), "a1": np.array([0, 1, 2, 1])})  # nothing was sent: the game still steps
    finally:
        env.close()


def test_bad_actions_of_any_kind_are_a_value_error_naming_the_problem(tmp_path):
    """A ragged list, a non-string key, a group that does not exist: the same ValueError as every other bad action,
    and nothing is sent (the game still steps)."""
    env = fake_env(tmp_path, instances=2, agents=2)
    try:
        env.reset()
        with pytest.raises(ValueError, match=r"actions must be a rectangular array.*ragged"):
            env.step([[0.0, 0.0], [0.0], [0.0, 0.0], [0.0, 0.0]])
        for group in (5, -1, "0", None):
            with pytest.raises(ValueError, match=rf"group {re.escape(repr(group))} does not exist; .* \[0, 1\]"):
                env.step_async(np.zeros((2, 2)), group)
        with pytest.raises(ValueError, match="ragged"):
            env.step_async([[0.0], [0.0, 0.0]], 0)
        for group in range(len(env.groups)):
            env.step_async(np.zeros((2, 2)), group)
        for group in range(len(env.groups)):
            env.step_wait(group)
        env.step(np.zeros((4, 2)))
    finally:
        env.close()
    denv = fake_env(tmp_path, "--fake_action=discrete:3,discrete:2", instances=1, agents=2)
    try:
        denv.reset()
        with pytest.raises(ValueError, match="ragged"):
            denv.step([[0, 1], [2]])
        denv.step(np.array([[2, 1], [0, 0]]))
    finally:
        denv.close()


def test_instances_simulate_in_parallel(tmp_path):
    """Actions go to every instance before any reply is read: 4 instances that each take 50 ms per step
    step in about 50 ms, not 200 ms (sleeping, so this holds whatever the number of cores)."""
    env = fake_env(tmp_path, "--fake_step_delay=0.05", instances=4, agents=1)
    try:
        env.reset()
        env.step(env.action_space.sample())
        t0 = time.perf_counter()
        for _ in range(10):
            env.step(env.action_space.sample())
        elapsed = time.perf_counter() - t0
        assert 0.45 < elapsed < 1.4, f"10 steps took {elapsed:.2f}s (serial would be 2.0s)"
    finally:
        env.close()


def test_step_before_reset_is_an_error(tmp_path):
    env = fake_env(tmp_path, instances=1, agents=1)
    try:
        with pytest.raises(RuntimeError, match="reset"):
            env.step(np.zeros((1, 2)))
    finally:
        env.close()


def test_autoreset_final_obs_and_episode_stats_fake(tmp_path):
    env = fake_env(tmp_path, "--max_episode_steps=7", instances=2, agents=3)
    try:
        obs, _ = env.reset()
        returns = np.zeros(env.num_envs)
        lengths = np.zeros(env.num_envs, dtype=int)
        n_term = n_trunc = 0
        for _ in range(300):
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            returns += rew
            lengths += 1
            done = term | trunc
            assert not (term & trunc).any()
            if done.any():
                assert (infos["_final_obs"] == done).all() and (infos["_episode"] == done).all()
                fo = infos["final_obs"]
                assert fo.dtype == np.float32 and fo.shape == (6, 4)
                # terminal observation carries t = episode length; the returned obs is the next episode's first
                np.testing.assert_array_equal(fo[done, 0], lengths[done])
                assert (obs[done, 0] == 0).all()
                assert (lengths[trunc] == 7).all() and (lengths[term] <= 7).all()
                np.testing.assert_allclose(infos["episode"]["r"][done], returns[done], rtol=1e-9)
                np.testing.assert_array_equal(infos["episode"]["l"][done], lengths[done])
                assert (infos["episode"]["t"][done] >= 0).all()
                n_term += term.sum()
                n_trunc += trunc.sum()
                returns[done] = 0
                lengths[done] = 0
            else:
                assert "final_obs" not in infos and "episode" not in infos
            np.testing.assert_array_equal(obs[:, 0], lengths)
        assert n_term > 10 and n_trunc > 10
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- make_vec_env
def test_make_vec_env_errors(tmp_path):
    with pytest.raises(ValueError, match="must equal num_instances x agents_per_instance"):
        make_vec_env("ball_chase", num_envs=10, num_instances=2, agents_per_instance=4)
    with pytest.raises(ValueError, match="not a multiple"):
        make_vec_env("ball_chase", num_envs=9, num_instances=2)
    with pytest.raises(ValueError, match="ball_chase"):
        make_vec_env("NoSuchEnv-v9")


def test_make_vec_env_agents_default(tmp_path):
    env = make_vec_env("ball_chase", num_envs=4, num_instances=2, binary=FAKE, run_dir=tmp_path)
    try:
        assert env.agents_per_instance == 2 and env.num_envs == 4
    finally:
        env.close()
    env = make_vec_env("ball_chase", num_instances=1, binary=FAKE, run_dir=tmp_path)
    try:
        assert env.agents_per_instance == 16
    finally:
        env.close()


def test_make_vec_env_gymnasium_id():
    env = make_vec_env("CartPole-v1", num_envs=3, seed=1)
    try:
        assert env.num_envs == 3 and env.metadata["autoreset_mode"] == "same-step"
        env.reset()
        env.step(env.action_space.sample())
    finally:
        env.close()


def test_init_failure_leaves_nothing(tmp_path):
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(Exception, match="exited before connecting"):
        fake_env(tmp_path, "--fake_mode=exit_at_start", instances=3)
    left = [p for p in psutil.Process().children(recursive=True)
            if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    assert left == []


# ---------------------------------------------------------------------------------------------- real game
@pytest.mark.slow
def test_real_many_steps_stats_match(headless_export, tmp_path):
    env = make_vec_env("ball_chase", num_instances=2, agents_per_instance=16, run_dir=tmp_path, seed=3)
    try:
        assert env.num_envs == 32
        obs, _ = env.reset()
        assert obs.shape == (32,) + env.single_observation_space.shape and np.isfinite(obs).all()
        returns = np.zeros(32)
        lengths = np.zeros(32, dtype=int)
        episodes = 0
        t0 = time.perf_counter()
        steps = 3000
        for _ in range(steps):
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            assert np.isfinite(obs).all() and np.isfinite(rew).all()
            returns += rew
            lengths += 1
            done = term | trunc
            if done.any():
                np.testing.assert_allclose(infos["episode"]["r"][done], returns[done], rtol=1e-6, atol=1e-6)
                np.testing.assert_array_equal(infos["episode"]["l"][done], lengths[done])
                episodes += done.sum()
                returns[done] = 0
                lengths[done] = 0
        rate = steps * 32 / (time.perf_counter() - t0)
        print(f"real 2x16: {rate:,.0f} agent-steps/s, {episodes} episodes")
        assert episodes > 0
        assert env.launcher.restarts == [0, 0]
    finally:
        pids = env.launcher.pids()
        env.close()
    assert wait_gone(pids, 10) == []


def test_real_truncation_and_terminal_obs(headless_export, tmp_path):
    max_steps = 15
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=16, run_dir=tmp_path,
                       max_episode_steps=max_steps)
    try:
        assert env.max_episode_steps == max_steps
        obs, _ = env.reset()
        lengths = np.zeros(16, dtype=int)
        n_trunc = 0
        for _ in range(4 * max_steps):
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            lengths += 1
            assert not (term & trunc).any()
            assert (lengths <= max_steps).all()
            assert ((lengths == max_steps) <= (term | trunc)).all()  # every agent ends by the limit
            if trunc.any():
                assert (lengths[trunc] == max_steps).all()
                n_trunc += trunc.sum()
            done = term | trunc
            if done.any():
                fo = infos["final_obs"]
                assert (infos["_final_obs"] == done).all()
                assert np.isfinite(fo[done]).all() and fo.dtype == np.float32
                # the terminal observation is not the new episode's first one
                assert not np.array_equal(fo[done], obs[done])
                assert not (fo[~done] != 0).any()
                lengths[done] = 0
        assert n_trunc > 0
    finally:
        env.close()


def test_real_two_vector_envs_at_once(headless_export, tmp_path):
    a = make_vec_env("ball_chase", num_instances=1, agents_per_instance=8, run_dir=tmp_path / "a", seed=0)
    try:
        b = make_vec_env("ball_chase", num_instances=2, agents_per_instance=4, run_dir=tmp_path / "b", seed=0)
        try:
            assert set(a.launcher.pids()).isdisjoint(b.launcher.pids())
            a.reset()
            b.reset()
            for _ in range(200):
                oa, *_ = a.step(a.action_space.sample())
                ob, *_ = b.step(b.action_space.sample())
                assert oa.shape == ob.shape == (8, a.obs_dim)
        finally:
            pb = b.launcher.pids()
            b.close()
        assert wait_gone(pb, 10) == []
        assert all(inst.proc.poll() is None for inst in a.launcher.instances)  # a still runs
        a.step(a.action_space.sample())
    finally:
        pa = a.launcher.pids()
        a.close()
    assert wait_gone(pa, 10) == []


def test_real_non_ascii_framing_and_determinism(headless_export, tmp_path):
    """The game frames by UTF-8 byte length too (a non-ASCII method name must not desynchronise the stream),
    and two envs with the same seed and actions produce the same trajectories."""
    envs = [make_vec_env("ball_chase", num_instances=1, agents_per_instance=4, run_dir=tmp_path / str(k), seed=7)
            for k in range(2)]
    try:
        assert envs[0].call("héllo_☃_日本") == [None] * 4
        obs = [e.reset()[0] for e in envs]
        np.testing.assert_array_equal(obs[0], obs[1])
        rng = np.random.default_rng(0)
        for _ in range(100):
            a = rng.uniform(-1, 1, (4, 2)).astype(np.float32)
            out = [e.step(a) for e in envs]
            np.testing.assert_array_equal(out[0][0], out[1][0])
            np.testing.assert_array_equal(out[0][1], out[1][1])
            np.testing.assert_array_equal(out[0][2] | out[0][3], out[1][2] | out[1][3])
        assert envs[0].call("ping") == [None] * 4  # still in sync after the non-ASCII call
        assert envs[0].launcher.instances[0].conn.stats()["physics_frames"] > 100  # our "stats" extension
    finally:
        for e in envs:
            e.close()
