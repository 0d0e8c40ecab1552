"""When it does not learn, the trainer says so (python_trainer/run/diagnosis.py): each rule by hand on made-up
histories (firing where it should, silent on a run that learns), each warning said once, the docs' table held to the
code's thresholds, and one short training whose warning reaches the run's output."""

import subprocess

import numpy as np
import pytest

from helpers import REPO, quiet, train_argv
from python_trainer.run import diagnosis as d
from python_trainer.run.diagnosis import (
    Diagnosis, critic_blind, entropy_collapse, entropy_rebound, evaluation_stalled, off_scale, stuck_argmax,
)


def noisy(levels, rng, noise=0.02):
    """A history through ``levels`` (one value per update), with Gaussian noise."""
    return list(np.asarray(levels, np.float64) + rng.normal(0, noise, len(levels)))


# ---------------------------------------------------------------------------------------------- the critic
def test_a_critic_whose_explained_variance_stays_at_or_below_0_for_50_updates_is_blind():
    rng = np.random.default_rng(0)
    swings = list(rng.uniform(-3, 0.4, 60))  # the 2D Platformer's: between -3 and 0.6, mostly below 0
    assert critic_blind(swings[:49]) is None  # not for long yet
    assert critic_blind(swings) < 0


def test_a_critic_that_learned_and_then_sees_returns_that_hardly_vary_is_not_blind():
    rng = np.random.default_rng(1)
    learned = noisy(np.linspace(0.0, 0.7, 300), rng, 0.1) + noisy(np.zeros(100), rng, 0.05)  # cart_pole at its cap
    assert critic_blind(learned) is None


def test_rollouts_without_varying_returns_say_nothing_of_the_critic():
    assert critic_blind([np.nan] * 30 + [-0.5] * 20) is None  # a sparse game: most rollouts' returns all 0
    assert critic_blind([np.nan] * 20 + [-0.5] * 30) == -0.5


# ---------------------------------------------------------------------------------------------- the entropy
def test_updates_that_hardly_move_the_policy_early_in_the_run_are_timid_as_dodge_the_creeps():
    rng = np.random.default_rng(0)
    kl, clipfrac = rng.uniform(0.0008, 0.0022, 50), np.zeros(50)  # Dodge the Creeps at train's defaults
    assert d.timid_updates(kl, clipfrac, run_share=0.2) == pytest.approx((np.median(kl), 0.0))
    assert d.timid_updates(kl[:49], clipfrac[:49], run_share=0.2) is None  # too few updates to judge
    assert d.timid_updates(kl, clipfrac, run_share=0.6) is None  # late: the annealed learning rate makes them small
    assert d.timid_updates(kl * 10, clipfrac, run_share=0.2) is None  # learning rate 1e-3, 10 epochs: about 0.01
    assert d.timid_updates(kl, clipfrac + 0.05, run_share=0.2) is None  # the clip acts


def test_an_entropy_that_falls_below_a_tenth_of_its_start_in_the_first_quarter_has_collapsed():
    rng = np.random.default_rng(2)
    history = noisy([1.1] * 10 + list(np.geomspace(1.1, 0.05, 20)) + [0.05] * 10, rng, 0.005)
    assert entropy_collapse(history, run_share=0.2) is not None
    assert entropy_collapse(history, run_share=0.6) is None  # late in the run: a policy that committed
    assert entropy_collapse(history[:20], run_share=0.1) is None  # not below a tenth yet
    assert entropy_collapse([-1.0] * 10 + [-3.0] * 10, run_share=0.1) is None  # a start <= 0: no share to judge by


def test_an_entropy_that_climbs_back_after_falling_is_said_as_dodge_the_creeps():
    rng = np.random.default_rng(3)
    dodge = noisy(list(np.linspace(2.2, 1.34, 150)) + list(np.linspace(1.34, 1.8, 150)), rng)
    start, low, now = entropy_rebound(dodge)
    assert start > 2.1 and low < 1.4 and now > 1.7


@pytest.mark.parametrize("seed", range(5))
def test_an_entropy_that_falls_and_settles_is_no_rebound(seed):
    rng = np.random.default_rng(seed)
    settles = noisy(list(np.linspace(0.69, 0.49, 200)) + [0.49] * 400, rng, 0.03)  # cart_pole's, noisier
    assert entropy_rebound(settles) is None
    assert entropy_rebound(noisy([2.8] * 600, rng, 0.05)) is None  # no fall at all


# ---------------------------------------------------------------------------------------------- the evaluation
def test_an_evaluation_that_did_not_improve_over_the_last_third_has_stalled():
    plateau = [(step, score) for step, score in zip(range(10, 110, 10), [1, 3, 4, 5, 5.4, 5.1, 5.3, 4.9, 5.2, 5.0])]
    assert evaluation_stalled(plateau) == (5.4, 5.3)  # steps 70 to 100 against 10 to 60
    rising = [(step, step / 10) for step in range(10, 110, 10)]
    assert evaluation_stalled(rising) is None
    at_ceiling = [(step, min(500, step * 10)) for step in range(10, 110, 10)]  # cart_pole's 500 from step 50 on
    assert evaluation_stalled(at_ceiling) is None
    assert evaluation_stalled(plateau[:5]) is None  # too few evaluations to say


# ---------------------------------------------------------------------------------------------- the argmax
def test_a_deterministic_policy_far_below_its_training_episodes_is_a_stuck_argmax():
    rng = np.random.default_rng(4)
    coins = list(rng.normal(5.7, 2.0, 100))  # the 2D Platformer's training episodes
    assert stuck_argmax(1.0, coins) == pytest.approx(np.mean(coins))
    assert stuck_argmax(5.0, coins) is None
    assert stuck_argmax(1.0, coins[:19]) is None  # too few episodes to say
    assert stuck_argmax(-100.0, [-20.0] * 50) == -20.0  # returns below 0 too
    assert stuck_argmax(0.0, [0.0] * 50) is None  # self-play's returns of 0: nothing to judge by
    assert stuck_argmax(1.0, [], sampled=5.7) == 5.7 and stuck_argmax(5.0, [], sampled=5.7) is None


# ---------------------------------------------------------------------------------------------- the reward scale
def test_returns_far_outside_the_reward_scale_are_said():
    assert off_scale([-1500.0] * 20) == 1500.0  # gymnasium's Pendulum, about -1200 an episode at random
    assert off_scale([0.001] * 20) == pytest.approx(0.001)
    assert off_scale([500.0] * 20) is None  # cart_pole's
    assert off_scale([0.0] * 20) is None  # no reward yet: not a scale
    assert off_scale([5000.0] * 19) is None  # too few episodes to say


# ---------------------------------------------------------------------------------------------- Diagnosis
def test_each_warning_is_said_once_with_its_cause_and_the_flag_to_try():
    said, returns = [], [-1500.0] * 30
    diagnosis = Diagnosis("runner/", quiet(said), ent_coef=0.01, returns=returns)
    entropy = [1.0] * 10 + [0.01] * 200
    for i, h in enumerate(entropy):
        diagnosis.update({"losses/entropy": h, "losses/explained_variance": -1.0}, run_share=i / 1000)
    assert [line.split(": ")[2].split(" ")[:3] for line in said] == [
        ["the", "episodes'", "returns"], ["the", "policy's", "entropy"], ["the", "explained", "variance"]]
    assert all(line.startswith("warning: policy 'runner': ") for line in said)
    assert "--norm-reward" in said[0] and "--ent-coef (now 0.01)" in said[1] and "--lstm" in said[2]
    assert all(line.endswith('docs/training.md, "When it does not learn"') for line in said)
    diagnosis.evaluated(-4000.0)
    diagnosis.evaluated(-4000.0)
    assert len(said) == 4 and "stuck argmax" in said[3] and "--eval-sample" in said[3]


def test_timid_updates_are_said_once_with_the_runs_learning_rate_and_epochs():
    said = []
    diagnosis = Diagnosis("", quiet(said), learning_rate=2.5e-4, update_epochs=4)
    for i in range(120):
        diagnosis.update({"losses/entropy": 1.5, "losses/approx_kl": 0.0015, "losses/clipfrac": 0.0}, i / 1000)
    assert len(said) == 1 and said[0].startswith("warning: the updates hardly move the policy: losses/approx_kl has "
                                                 "a median of 0.0015 and losses/clipfrac 0.000 over the last 50")
    assert "--learning-rate (now 0.00025) or --update-epochs (now 4)" in said[0]


def test_scaled_rewards_say_nothing_of_the_returns_size():
    said = []
    diagnosis = Diagnosis("", quiet(said), norm_reward=True, returns=[-1500.0] * 30)
    diagnosis.update({"losses/entropy": 1.0, "losses/explained_variance": 0.5}, run_share=0.5)
    assert said == []


def test_the_periodic_evaluations_history_is_read_once_each():
    said, returns = [], list(np.full(50, 5.7))
    diagnosis = Diagnosis("", quiet(said), returns=returns)
    score = lambda tags: tags.get("eval/random/mean_return")  # noqa: E731  (evaluation.py's, for a game of one team)
    history = []
    for step, value in zip(range(10, 110, 10), [1, 3, 4, 5, 5.4, 5.1, 5.3, 4.9, 5.2, 5.0]):
        history.append((step, {"eval/random/mean_return": value, "eval/random/baseline_return": 0.5}))
        diagnosis.evaluations_so_far(history, score)
    assert len(said) == 2  # the first one's 1 against 5.7 in training, then the plateau
    assert "stuck argmax" in said[0] and "eval/random/mean_return" in said[0]
    assert "has not improved over the last third of the run: its best there is 5.3, against 5.4" in said[1]


# ---------------------------------------------------------------------------------------------- the docs
def _docs_row(start: str) -> str:
    page = (REPO / "docs" / "training.md").read_text()
    section = page.split("## When it does not learn", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in section.splitlines() if line.startswith(f"| {start} |")]
    return row


WORDS = {1 / 3: "a third", 0.5: "half"}


@pytest.mark.parametrize("row, phrases", [
    ("the critic predicts nothing", [f"over the last {d.EV_UPDATES} updates is ≤ 0", "half of the"]),
    ("the updates hardly move the policy", [f"within the first {d.TIMID_BEFORE:.0%} of the run",
                                            f"over the last {d.KL_UPDATES} updates is below {d.KL_TINY:g}",
                                            f"below {d.CLIPFRAC_TINY:g}"]),
    ("the entropy collapsed", [f"windows of {d.ENTROPY_WINDOW} updates", f"below {d.COLLAPSE_SHARE:.0%} of",
                               f"within the first {d.COLLAPSE_BEFORE:.0%} of the run"]),
    ("the entropy climbed back", [f"at least {d.REBOUND_FALL:g} nats", f"at least {WORDS[d.REBOUND_SHARE]} of"]),
    ("the evaluation stopped improving", [f"at least {d.EVAL_MIN} evaluations",
                                          f"the last {WORDS[d.STALL_SHARE][2:]} of the run"]),
    ("a stuck argmax", [f"(at least {d.MIN_EPISODES})", f"by more than {d.ARGMAX_GAP:.0%} of that mean's size",
                        f"by more than {d.ARGMAX_GAP:.0%} of its size"]),
    ("returns far outside the reward scale", [f"(at least {d.MIN_EPISODES})", f"above {d.RETURN_HIGH:g}",
                                              f"below {d.RETURN_LOW:g}"]),
])
def test_the_docs_state_each_warnings_thresholds_as_the_code_has_them(row, phrases):
    text = _docs_row(row)
    for phrase in phrases:
        assert phrase in text, f"docs/training.md's row {row!r} does not say {phrase!r}"


# ---------------------------------------------------------------------------------------------- a run
def test_a_run_whose_returns_are_far_outside_the_reward_scale_says_so_once(tmp_path):
    """Pendulum's returns are about -1200 an episode at first: without --norm-reward the trainer says so."""
    done = subprocess.run(train_argv(tmp_path, "--env-id", "Pendulum-v1", "--no-norm-reward", "--num-envs", "4",
                                     "--num-steps", "200", "--total-timesteps", "8000", "--eval-episodes", "0"),
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "far outside the scale" in line]
    assert len(lines) == 1 and "--norm-reward" in lines[0], done.stderr[-3000:]
