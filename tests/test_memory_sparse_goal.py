"""The two games built to need memory (memory) and exploration (sparse_goal), against real headless instances."""

import numpy as np
import pytest

from python_trainer.envs.vec_env import make_vec_env

# memory's layout (games/memory/memory_agent.gd): observation [cue left, cue right, progress, at junction]
CUE_STEPS, CORRIDOR_CELLS, MEMORY_LIMIT = 2, 21, 64
FORWARD, LEFT, RIGHT = 0, 1, 2
# sparse_goal (games/sparse_goal/room.gd): a 600 px room, observation [x, y, 8 rays, 8 x 8 one-hot cell]
ROOM, GOAL_LIMIT = 600.0, 400
STAY, UP, DOWN, WEST, EAST = 0, 1, 2, 3, 4


@pytest.fixture
def memory_env(headless_export, tmp_path):
    env = make_vec_env("memory", num_instances=1, agents_per_instance=32, run_dir=tmp_path, seed=5)
    yield env
    env.close()


def test_memory_after_the_cue_nothing_observed_depends_on_it(memory_env):
    """All agents take the same actions but see their own random cues: apart from the cue itself, every
    observation, every episode end and every step count is the same for both cues, so no policy without memory
    can tell them apart; the cue is shown for CUE_STEPS observations at the start of each episode only."""
    env = memory_env
    assert env.single_observation_space.shape == (4,) and env.single_action_space.n == 3
    assert env.max_episode_steps == MEMORY_LIMIT
    rng = np.random.default_rng(0)
    obs, _ = env.reset()
    cues_seen, t, episodes = set(), 0, 0
    for _ in range(300):
        cue_shown = obs[:, :2].sum(axis=1)
        if t < CUE_STEPS:
            assert (cue_shown == 1).all()  # one lamp lit
            cues_seen.update(np.argmax(obs[:, :2], axis=1).tolist())
        else:
            assert (cue_shown == 0).all()  # dark for the rest of the episode
        assert (obs[:, 2:] == obs[0, 2:]).all()  # position and junction flag: the same for every cue
        action = rng.integers(3)
        obs, reward, term, trunc, _ = env.step(np.full(env.num_envs, action))
        for flags in (term, trunc):
            assert flags.all() or not flags.any()  # episodes end together, whatever the cue
        t += 1
        if term[0] or trunc[0]:
            t, episodes = 0, episodes + 1
    assert cues_seen == {0, 1} and episodes >= 3


def test_memory_choice_pays_plus_one_on_the_cued_side_and_minus_one_on_the_other(memory_env):
    env = memory_env
    obs, _ = env.reset()
    cue_right = obs[:, 1] == 1.0  # the first observation shows the cue
    # half the agents turn toward their cue, half away, as soon as they can
    honest = np.arange(env.num_envs) % 2 == 0
    steps = 0
    while True:
        wants_right = np.where(honest, cue_right, ~cue_right)
        obs, reward, term, trunc, _ = env.step(np.where(wants_right, RIGHT, LEFT))
        steps += 1
        if term.any() or trunc.any() or steps > MEMORY_LIMIT:
            break
    assert term.all() and not trunc.any()
    assert (reward[honest] == 1.0).all() and (reward[~honest] == -1.0).all()
    # the cue came with the observation after the last step; the earliest choice is CORRIDOR_CELLS steps later
    last_cue_step = CUE_STEPS - 1
    assert steps - 1 - last_cue_step == CORRIDOR_CELLS
    assert 20 <= CORRIDOR_CELLS and MEMORY_LIMIT < 128  # cue-to-choice distance always within [20, 128)


def test_memory_time_limit_ends_an_agent_that_never_turns(memory_env):
    env = memory_env
    env.reset()
    for step in range(1, MEMORY_LIMIT + 1):
        obs, reward, term, trunc, _ = env.step(np.full(env.num_envs, FORWARD))
        assert (reward == 0).all() and not term.any()
        assert trunc.all() == (step == MEMORY_LIMIT)


# ---------------------------------------------------------------------------------------------- sparse_goal
def _position(obs):
    return (obs[:, :2] + 1.0) / 2.0 * ROOM


def _way_round(obs):
    """A scripted agent that knows the room: right along the bottom, up through the gap, left, up to the goal."""
    x, y = _position(obs).T
    return np.select([(y > 270) & (x < 520), y > 250, x > 50], [EAST, UP, WEST], UP)


def test_sparse_goal_pays_only_at_the_goal(headless_export, tmp_path):
    env = make_vec_env("sparse_goal", num_instances=1, agents_per_instance=4, run_dir=tmp_path, seed=2)
    try:
        assert env.single_observation_space.shape == (74,) and env.single_action_space.n == 5
        obs, _ = env.reset()
        assert np.all(np.abs(obs) <= 1.0)
        # the one-hot cell agrees with the position: the start is in the bottom-left cell
        assert (obs[:, 10:].sum(axis=1) == 1).all() and (obs[:, 10 + 7 * 8] == 1).all()
        reached = np.zeros(env.num_envs, dtype=bool)
        for _ in range(GOAL_LIMIT):
            obs, reward, term, trunc, infos = env.step(np.where(reached, STAY, _way_round(obs)))
            assert not trunc[~reached].any()
            # nothing but the goal pays: no shaping, no wall penalty, no step cost
            assert set(reward[~term].tolist()) <= {0.0}
            assert (reward[term] == 1.0).all()
            if term.any():
                final = _position(infos["final_obs"][term])
                assert (np.linalg.norm(final - [50, 50], axis=1) < 31).all()  # ended touching the goal
            x, y = _position(obs).T
            cell = (np.clip(y // 75, 0, 7) * 8 + np.clip(x // 75, 0, 7)).astype(int)
            assert (obs[np.arange(env.num_envs), 10 + cell] == 1).all() and (obs[:, 10:].sum(axis=1) == 1).all()
            reached |= term
            if reached.all():
                break
        assert reached.all()
    finally:
        env.close()


def test_sparse_goal_time_limit_truncates_and_random_play_never_finds_the_goal(headless_export, tmp_path):
    env = make_vec_env("sparse_goal", num_instances=1, agents_per_instance=16, run_dir=tmp_path, seed=3)
    try:
        assert env.max_episode_steps == GOAL_LIMIT
        env.action_space.seed(0)
        env.reset()
        truncations = 0
        for step in range(1, 2 * GOAL_LIMIT + 1):
            _, reward, term, trunc, _ = env.step(env.action_space.sample())
            # the goal is about 130 moves round a wall: a random walk (16 agents, 32 episodes) never gets there
            assert not term.any() and (reward == 0).all()
            assert trunc.all() == (step % GOAL_LIMIT == 0)
            truncations += trunc.sum()
        assert truncations == 2 * env.num_envs
    finally:
        env.close()
