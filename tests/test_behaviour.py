"""Behaviour at a glance (run/behaviour.py): each action key's histogram, the truncated share and its jump's warning,
by hand and through a short training on the fake game."""

import csv

import gymnasium as gym
import numpy as np
import pytest

from helpers import event_accumulator, fake_export, quiet, read_scalars, run_dirs
from python_trainer.base import bounds
from python_trainer.envs.spaces import spaces_from_env_info
from python_trainer.run import train
from python_trainer.run.behaviour import Behaviour, ShareJump


def env_info(actions: dict) -> dict:
    return {"n_agents": 1, "observation_space": {"obs": {"size": [4], "space": "box"}}, "action_space": actions}


def shares(jump: ShareJump, draws) -> list:
    """The updates (their index in ``draws``: (truncated, ended) each) at which ``jump`` fired."""
    return [i for i, (t, n) in enumerate(draws) if jump.add(t, n) is not None]


# ---------------------------------------------------------------------------------------------- the jump rule
def test_the_jump_rule_fires_once_when_the_share_jumps_from_3_to_25_percent():
    rng = np.random.default_rng(0)
    draws = [(rng.binomial(60, 0.03), 60) for _ in range(20)] + [(rng.binomial(60, 0.25), 60) for _ in range(30)]
    jump = ShareJump()
    fired = [(i, jump.add(t, n)) for i, (t, n) in enumerate(draws)]
    fired = [(i, result) for i, result in fired if result is not None]
    assert len(fired) == 1  # once per jump: the new level is the baseline from then on
    (i, (before, now)), = fired
    assert 20 <= i <= 22 and before < 0.06 and now > 0.15


@pytest.mark.parametrize("share, episodes", [
    (1.0, 50),   # every episode runs to the limit from the start (no failure in the game)
    (0.95, 50),  # a high share, steady (cart_pole at its cap, now and then a fall)
    (0.1, 40),   # a low share's noise
    (0.3, 2),    # few episodes per update (long episodes): a share of 0, 0.5 or 1 each time
])
def test_the_jump_rule_is_silent_on_a_steady_share_and_its_noise(share, episodes):
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 2 * episodes, 3000) if episodes < 5 else np.full(3000, episodes)
    assert shares(ShareJump(), [(rng.binomial(n, share), n) for n in sizes]) == []


# ---------------------------------------------------------------------------------------------- Behaviour by hand
def test_the_truncated_share_counts_the_episodes_ended_since_the_last_log_and_warns_once():
    said = []
    behaviour = Behaviour(gym.spaces.Discrete(3), None, "runner/", quiet(said))
    none = np.zeros((4, 2), bool)
    assert behaviour.truncated_share(none, none) == {}  # nothing ended: nothing logged, the next log counts on
    terminated, truncated = none.copy(), none.copy()
    terminated[0, 0] = truncated[1, 1] = True
    terminated[3, 1] = truncated[3, 1] = True  # both: the episode failed, the limit did not cut it (gymnasium's rule)
    assert behaviour.truncated_share(terminated, truncated) == {"runner/charts/truncated_share": 1 / 3}

    cut, failed = none.copy(), none.copy()
    failed[0] = True  # 2 episodes an update: none cut by the limit, for the 13 updates of the history ...
    for _ in range(13):
        assert behaviour.truncated_share(failed, none) == {"runner/charts/truncated_share": 0.0}
    cut[:, :] = True  # ... then 8 an update, all cut: the first such update is a jump (8 of the last 3 updates' 12)
    behaviour.truncated_share(none, cut)
    assert said == ["warning: policy 'runner': the time limit ended 67% of the episodes of the last 3 updates, against "
                    "0% before (charts/truncated_share): agents that stopped failing. If they did not learn to last, a "
                    "reset may leave them unable to fail (a deferred call racing it): docs/training.md, \"When it "
                    "does not learn\""]
    for _ in range(20):  # said once: the new level is the baseline from then on
        behaviour.truncated_share(none, cut)
    assert len(said) == 1


def test_each_key_gets_its_histogram_from_the_games_layout():
    hybrid = env_info({"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 2, "action_type": "discrete"}})
    space = spaces_from_env_info(hybrid)[1]
    rows = np.array([[[0.5, -3.0, 1], [0.25, 0.75, 0]]], np.float32)  # (steps, envs, row): move's 2 values, then jump
    out = Behaviour(space, hybrid).histograms(rows)
    assert sorted(out) == ["actions/jump", "actions/move", "actions/move/0", "actions/move/1"]
    np.testing.assert_array_equal(out["actions/jump"][0], [1, 0])
    np.testing.assert_array_equal(out["actions/jump"][1], [-0.5, 0.5, 1.5])  # one bin per choice
    np.testing.assert_array_equal(out["actions/move/1"][0], [-1.0, 0.75])  # as the game got it: clipped
    assert out["actions/move"][0].shape == (2, 2) and len(out["actions/move"][1]) == 21

    two_keys = env_info({"turn": {"size": 1, "action_type": "continuous"}, "aim": {"size": 2, "action_type": "continuous"}})
    space = spaces_from_env_info(two_keys)[1]  # one Box of 3 values: "aim"'s 2, then "turn" (sorted key order)
    out = Behaviour(space, two_keys).histograms(np.array([[0.1, 0.2, 0.3]], np.float32))
    assert sorted(out) == ["actions/aim", "actions/aim/0", "actions/aim/1", "actions/turn"]
    np.testing.assert_allclose(out["actions/turn"][0], [[0.3]])
    buttons = env_info({"fire": {"size": 2, "action_type": "discrete"}, "aim": {"size": 3, "action_type": "discrete"}})
    space = spaces_from_env_info(buttons)[1]  # MultiDiscrete([3, 2]): "aim", then "fire"
    out = Behaviour(space, buttons).histograms(np.array([[2.0, 1.0], [0.0, 1.0]], np.float32))
    np.testing.assert_array_equal(out["actions/aim"][0], [2, 0])
    np.testing.assert_array_equal(out["actions/fire"][1], [-0.5, 0.5, 1.5])
    assert sorted(Behaviour(gym.spaces.Discrete(2), None).histograms(np.array([[1, 0]]))) == ["actions/action"]


def test_a_wide_continuous_key_writes_its_whole_histogram_and_only_its_first_dimensions_up_to_the_bound():
    wide = env_info({"joints": {"size": 5000, "action_type": "continuous"}, "grip": {"size": 1, "action_type": "discrete"}})
    space = spaces_from_env_info(wide)[1]
    rows = np.random.default_rng(0).uniform(-1, 1, (4, 3, 5001)).astype(np.float32)
    rows[..., -1] = 1
    out = Behaviour(space, wide).histograms(rows)
    assert len(out) == bounds.ACTION_HISTOGRAMS.value  # not 5,002 tags an update
    assert list(out)[:3] == ["actions/grip", "actions/joints", "actions/joints/0"]  # every key's whole histogram first
    assert out["actions/joints"][0].shape == (12, 5000)
    np.testing.assert_array_equal(out["actions/joints/29"][0], np.clip(rows[..., 29].reshape(-1), -1, 1))


# ---------------------------------------------------------------------------------------------- through training
def test_a_training_writes_each_action_keys_histogram_and_the_truncated_share(tmp_path):
    """The fake game with a continuous key (a0, 2 values) and a discrete one (a1, 3 choices); its episodes end by
    chance (5% a step) or at its time limit of 20 steps."""
    export = fake_export(tmp_path / "hybrid.x86_64", "--fake_action=continuous:2,discrete:3")
    root = tmp_path / "runs"
    assert train.main(["--env-path", str(export), "--num-instances", "1", "--agents-per-instance", "4",
                       "--num-steps", "32", "--total-timesteps", "256", "--eval-episodes", "0",
                       "--run-dir-root", str(root)]) == 0
    (run_dir,) = run_dirs(root)
    acc = event_accumulator(run_dir)
    assert sorted(acc.Tags()["histograms"]) == ["actions/a0", "actions/a0/0", "actions/a0/1", "actions/a1"]
    for event in acc.Histograms("actions/a1"):  # each update's 32 steps x 4 agents, indices 0-2
        h = event.histogram_value
        assert h.num == 128 and h.min >= 0 and h.max <= 2 and sum(h.bucket) == 128
    assert [e.step for e in acc.Histograms("actions/a0")] == [128, 256] and acc.Histograms("actions/a0")[0].histogram_value.num == 256
    assert all(-1 <= e.histogram_value.min <= e.histogram_value.max <= 1 for e in acc.Histograms("actions/a0/1"))

    shares = dict(read_scalars(run_dir)["charts/truncated_share"])
    with open(run_dir / "episodes.csv") as f:
        episodes = [(int(r["global_step"]), int(r["length"])) for r in csv.DictReader(f)]
    for step, share in shares.items():  # the share of the update's ended episodes that ran to the limit
        mine = [length for s, length in episodes if step - 128 < s <= step]
        cut = round(share * len(mine))
        assert mine and abs(share * len(mine) - cut) < 1e-6
        assert cut <= sum(length == 20 for length in mine)  # a cut episode is 20 steps long (one that failed at 20 too)
    assert sum(round(s * len([1 for e, _ in episodes if k - 128 < e <= k])) for k, s in shares.items()) > 0
