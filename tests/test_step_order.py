"""Resets that cannot race the game's deferred calls (the addon's step_order.gd, "The order of a decision step" in
its README).

tests/fixtures/deferred_hits/ is a game written the usual Godot way: on a hit its player's collision shape is
disabled with set_deferred(), the mob is freed with queue_free() and a CONNECT_DEFERRED signal counts the hit. By
its rules every game ends with a hit within HIT_WITHIN frames, whatever the player does. A reset in the frame that
sees the hit, before the deferred calls run, left the player unhittable for its next episode, which then ran to the
time limit (every other episode did, at 100 steps). Here the game is played in the engine (random actions) and
trained through the trainer, and each episode must end by the rules.
"""

import csv
import json
import shutil
import subprocess

import pytest

from helpers import REPO, processes_mentioning, train_run
from python_trainer.tools.export import export

GAME = REPO / "tests" / "fixtures" / "deferred_hits"
HIT_WITHIN = 25  # hits.gd's HIT_WITHIN: the mob gains at least 6 px a frame on 100 px
TIME_LIMIT = 100  # hits_agent.gd's max_episode_steps


@pytest.fixture(scope="module")
def hits_export(tmp_path_factory):
    """The game's headless export, with this repository's addon copied in."""
    root = tmp_path_factory.mktemp("deferred_hits")
    project = root / "hits"
    shutil.copytree(GAME, project)
    shutil.copytree(REPO / "godot_project" / "addons" / "rl_sync", project / "addons" / "rl_sync")
    return export(project, root / "out", kinds=("headless",), quiet=True)["headless"]


@pytest.mark.slow
def test_random_play_in_the_engine_ends_each_episode_by_the_rules(hits_export):
    proc = subprocess.run([str(hits_export), "--", "--policy=random", "--eval_episodes=30", "--env_seed=3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith('{"eval"')))["eval"]
    assert len(report["lengths"]) == 30 and max(report["lengths"]) <= HIT_WITHIN, report["lengths"]
    # Every episode ended with a hit, and the deferred counter saw each one.
    assert all(r < 0 for r in report["returns"]) and report["info_means"]["hits"] > 0


@pytest.mark.slow
def test_training_sees_the_episodes_end_by_the_rules(hits_export, tmp_path):
    run_dir = train_run(tmp_path, "--env-path", str(hits_export), "--num-instances", "1", "--total-timesteps", "1024",
                        "--num-steps", "256", "--exp-name", "hits")
    with open(run_dir / "episodes.csv") as f:
        lengths = [int(row["length"]) for row in csv.DictReader(f)]
    assert len(lengths) >= 1024 // HIT_WITHIN and max(lengths) <= HIT_WITHIN, lengths
    assert not processes_mentioning(str(hits_export))
