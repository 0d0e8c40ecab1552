"""train --max-seconds (python_trainer/run/clock.py): a wall-clock budget that anneals the learning rate, ends the run
with its final checkpoint, model and evaluation, and goes on counting across --resume."""

import re
import subprocess
import time

import pytest
import torch

from helpers import REPO, read_scalars, run_dirs, train_argv
from python_trainer.base.errors import UserError
from python_trainer.run import train
from python_trainer.run.clock import Clock

BUDGET, LR = 3.0, 2.5e-4
# a batch of 128 samples: an update takes a few hundredths of a second, so the last one starts close to the budget
FLAGS = ("--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "1000000000")
SPENT = re.compile(r"--max-seconds (\S+): the time budget is spent \(([0-9.]+) s of training\) at global step (\d+)")


def _train(root, *flags):
    begun = time.monotonic()
    done = subprocess.run(train_argv(root, *flags), cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done, time.monotonic() - begun


def _update_seconds(scalars, step):
    """The wall-clock seconds of the update that ended at ``step``: its perf/* tags."""
    return sum(dict(scalars[tag])[step] for tag in ("perf/rollout_s", "perf/update_s", "perf/other_s"))


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("max_seconds")
    done, wall = _train(root, *FLAGS, "--max-seconds", str(BUDGET))
    (run_dir,) = run_dirs(root)
    return root, run_dir, done, wall


def test_a_run_of_3_seconds_and_a_huge_step_budget_ends_in_time_with_its_checkpoint_model_and_evaluation(budget_run):
    root, run_dir, done, wall = budget_run
    (match,) = SPENT.findall(done.stdout)
    seconds, step = float(match[1]), int(match[2])
    assert 2.0 <= seconds <= BUDGET + 0.5, done.stdout  # the last update ended within the budget (or just past it)
    assert wall < BUDGET + 30, f"the whole command took {wall:.1f} s"  # Python's start-up and the evaluation besides
    assert "eval: deterministic policy, 10 episodes" in done.stdout
    for name in ("checkpoint.pt", "model.pt"):
        saved = torch.load(run_dir / name, map_location="cpu", weights_only=True)
        assert saved["global_step"] == step and saved["clock"]["seconds"] == pytest.approx(seconds, abs=0.05)
    assert (run_dir / "learning_curve.png").is_file()


def test_the_learning_rate_anneals_over_the_budget_to_about_0(budget_run):
    root, run_dir, done, wall = budget_run
    scalars = read_scalars(run_dir)
    lrs = [v for _, v in scalars["charts/learning_rate"]]
    assert lrs[0] == pytest.approx(LR, rel=0.05) and all(b < a for a, b in zip(lrs, lrs[1:]))
    # the last update starts with at most two updates' time left (the one before it left more than one)
    last_step = scalars["charts/learning_rate"][-1][0]
    assert lrs[-1] / LR <= 2 * _update_seconds(scalars, last_step) / BUDGET + 0.01, lrs[-5:]
    assert lrs[-1] / LR < 0.2


def test_a_resume_goes_on_counting_the_seconds_its_checkpoint_kept(budget_run):
    root, run_dir, done, wall = budget_run
    before = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)
    # the budget of args.json is spent: straight to the end, no update
    again, _ = _train(root, "--resume", str(run_dir))
    assert f"at global step {before['global_step']} " in again.stdout and "time budget is spent" in again.stdout
    assert torch.load(run_dir / "model.pt", weights_only=True)["global_step"] == before["global_step"]
    # a larger budget trains on, the learning rate from the share of it spent
    more, _ = _train(root, "--resume", str(run_dir), "--max-seconds", "5")
    (match,) = SPENT.findall(more.stdout)
    after = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert after["global_step"] > before["global_step"] and 4.0 <= after["clock"]["seconds"] <= 5.5
    resumed = [v for s, v in read_scalars(run_dir)["charts/learning_rate"] if s > before["global_step"]]
    expected = (1 - before["clock"]["seconds"] / 5) * LR
    assert expected - 0.05 * LR <= resumed[0] <= expected + 1e-9, (resumed[0], expected)
    assert resumed[-1] / LR < 0.2


def test_a_budget_of_0_seconds_is_refused_in_one_line_before_anything_starts(tmp_path):
    with pytest.raises(UserError) as refused:
        train.main([*FLAGS, "--max-seconds", "0", "--run-dir-root", str(tmp_path)])
    assert refused.value.status == 2 and "\n" not in str(refused.value)
    assert "--max-seconds 0 is not valid: give a number of seconds > 0" in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_the_clock_counts_the_seconds_before_and_stops_when_an_update_would_not_fit():
    now = [100.0]
    clock = Clock(10.0, {"seconds": 4.0, "update_seconds": 1.0}, now=lambda: now[0])
    assert clock.share() == pytest.approx(0.4) and not clock.spent()
    now[0] += 2.0  # an update of 2 s: 6 s done, 4 left, room for another
    assert not clock.update_done() and clock.done == pytest.approx(6.0)
    now[0] += 2.5  # 8.5 s done, 1.5 left: less than the 2.5 s that update took
    assert clock.update_done() and clock.run_share(3, 100) == pytest.approx(0.85)
    assert clock.state_dict() == {"seconds": 8.5, "update_seconds": 2.5}
    assert Clock(10.0, clock.state_dict()).spent()  # resumed: by the same rule, no room for another update
    assert not Clock(10.0, {"seconds": 6.0, "update_seconds": 2.0}).spent()
    assert Clock(None).share() == 0.0 and not Clock(None).update_done()
