"""Evaluation while training (--eval-every: run/evaluation.py) and what the engine's evaluation needs for it: sampled
actions (--policy_sample, the policy file's version 5 with each continuous key's log-std) and randomised starts
(--policy_noop_max)."""

import json
import math
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    REPO, communicate_after_signal, end, godot_ppo_child, processes_mentioning, read_scalars, run_dirs, train_argv,
    train_child, wait_for, wait_gone,
)
from python_trainer.engine import policy_format
from python_trainer.engine.in_engine import PlaybackError, evaluate_in_engine, policy_forward
from python_trainer.engine.policy_file import FORMAT, write_policy

ADDON = REPO / "godot_project" / "addons" / "rl_sync"


def test_the_policy_file_version_and_log_std_key_are_declared_alike_on_both_sides():
    # (the versions are the contract's, which tests/test_contract.py holds both sides to)
    sampling = (ADDON / "policy_sampling.gd").read_text()
    assert f'key.get("{policy_format.LOG_STD}")' in sampling and f'key["{policy_format.LOG_STD}"]' in sampling


def test_eval_every_logs_the_random_yardstick_and_keeps_the_best_snapshot_that_export_policy_takes(tmp_path,
                                                                                                   headless_export):
    result = train_child(tmp_path, "--env-id", "cart_pole", "--total-timesteps", "4096", "--num-steps", "128",
                         "--eval-every", "2048", "--eval-every-episodes", "4", "--eval-episodes", "0", "--eval-sample")
    (run_dir,) = run_dirs(tmp_path)
    scalars = read_scalars(run_dir)
    assert scalars["eval/random/mean_return"][-1][0] == 4096  # once at the end, whatever ran before
    assert scalars["eval_sampled/random/mean_return"][-1][0] == 4096  # --eval-sample: the sampled policy beside it
    assert "eval/random/baseline_return" in scalars
    best = json.loads((run_dir / "best" / "evaluation.json").read_text())
    assert best["score"] == pytest.approx(max(v for _, v in scalars["eval/random/mean_return"]))  # float32 in TensorBoard
    policy = json.loads((run_dir / "best" / "policy.json").read_text())
    assert policy["version"] == 3 and "log_std" not in policy["action_keys"][0]  # discrete: the logits say it all
    assert (run_dir / "best" / "model.pt").is_file() and not (run_dir / "eval").exists()
    last = result.stdout.strip().splitlines()[-1]
    assert re.match(r"evaluations: \d+ in [\d.]+ s beside training, \d+% of the run's", last), last
    said = [line for line in result.stdout.splitlines() if line.startswith("evaluation: global_step=4096 ")]
    assert len(said) == 1, result.stdout[-2000:]  # the line for programs (tune's pruner): every tag of it
    value = float(re.search(r" eval/random/mean_return=(\S+)", said[0]).group(1))
    assert value == pytest.approx(scalars["eval/random/mean_return"][-1][1], rel=1e-5)
    out = tmp_path / "exported.json"
    exported = godot_ppo_child("export-policy", str(run_dir / "best"), "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["source"]["global_step"] == best["global_step"]


def test_eval_every_in_a_two_team_game_gives_win_rates_against_scripted_and_the_pool(tmp_path, headless_export):
    train_child(tmp_path, "--env-id", "pong", "--total-timesteps", "4096", "--num-steps", "128", "--self-play",
                "--self-play-save-steps", "1024", "--eval-every", "4096", "--eval-every-episodes", "8",
                "--eval-episodes", "0")
    (run_dir,) = run_dirs(tmp_path)
    scalars = read_scalars(run_dir)
    for yardstick in ("random", "scripted", "pool_oldest", "pool_newest"):
        (step, decided), = scalars[f"eval/{yardstick}/decided"]
        assert step == 4096 and 0 < decided <= 8, (yardstick, decided)
        assert 0.0 <= scalars[f"eval/{yardstick}/win_rate"][0][1] <= 1.0
    best = json.loads((run_dir / "best" / "evaluation.json").read_text())
    assert best["score"] == best["tags"]["eval/scripted/win_rate"]


def _fixed_policy(path: Path, outputs: list, keys: list) -> Path:
    """A policy whose outputs are ``outputs`` whatever it sees (zero weights, the outputs as biases)."""
    policy = {"format": FORMAT, "version": 5, "env": "ball_chase", "observation_size": 1, "action_keys": keys,
              "action_rule": "per_key", "obs_normalization": None, "lstm": None,
              "layers": [{"weight": [[0.0] for _ in outputs], "bias": outputs, "activation": "linear"}]}
    return write_policy(path, policy)


def test_policy_sample_draws_discrete_actions_by_the_softmax_and_continuous_ones_by_mean_and_log_std(tmp_path,
                                                                                                    headless_export):
    mean, log_std, logits = 0.2, -1.0, [0.0, 1.0, -1.0]
    keys = [{"key": "move", "action_type": "continuous", "size": 1, "log_std": [log_std]},
            {"key": "pick", "action_type": "discrete", "size": 3}]
    path = _fixed_policy(tmp_path / "fixed.json", [mean, *logits], keys)
    n = 3000
    _, actions = policy_forward(path, np.zeros((n, 1)), sample=True)
    counts = np.bincount([a["pick"] for a in actions], minlength=3)
    expected = n * np.exp(logits) / np.exp(logits).sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 13.8, (counts, expected)  # chi-square, 2 degrees of freedom: p = 0.001
    moves = np.array([a["move"][0] for a in actions])
    draws = np.clip(np.random.default_rng(0).normal(mean, math.exp(log_std), 400_000), -1, 1)  # the clipped Gaussian
    assert abs(moves.mean() - draws.mean()) < 0.03 and abs(moves.std() - draws.std()) < 0.03, (moves.mean(), moves.std())
    _, argmax = policy_forward(path, np.zeros((3, 1)))  # without the flag: the file's rule
    assert all(a == {"move": [mean], "pick": 1} for a in argmax), argmax


def test_policy_sample_refuses_a_continuous_key_without_its_log_std_in_one_line(tmp_path, headless_export):
    keys = [{"key": "move", "action_type": "continuous", "size": 1}]
    path = _fixed_policy(tmp_path / "v4.json", [0.5], keys)
    with pytest.raises(PlaybackError, match="--policy_sample needs the log-std of the continuous key \"move\""):
        policy_forward(path, np.zeros((1, 1)), sample=True)


def test_a_version_1_policy_file_still_plays_and_noop_starts_change_its_episodes(headless_export):
    policy = REPO / "exports" / "policies" / "ball_chase.json"
    assert json.loads(policy.read_text())["version"] == 1
    plain = evaluate_in_engine(policy, episodes=4, seed=3, agents=4, env_params={})
    again = evaluate_in_engine(policy, episodes=4, seed=3, agents=4, env_params={})
    started = evaluate_in_engine(policy, episodes=4, seed=3, agents=4, env_params={}, noop_max=60)
    assert plain["episodes"] == started["episodes"] == 4
    assert plain["returns"] == again["returns"]  # the same seed: the same episodes
    assert started["returns"] != plain["returns"]  # up to 60 random decisions first: other episodes


def test_eval_every_on_a_gymnasium_id_is_refused_in_one_line_and_leaves_no_run_folder(tmp_path):
    result = godot_ppo_child("train", "--env-id", "CartPole-v1", "--total-timesteps", "512", "--eval-every", "256",
                             "--run-dir-root", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("godot-ppo train: error: --eval-every plays the policy in")
    assert run_dirs(tmp_path) == []


def test_ctrl_c_while_an_evaluation_plays_ends_its_game_and_keeps_the_checkpoint(tmp_path, headless_export):
    proc = subprocess.Popen(train_argv(tmp_path, "--env-id", "ball_chase", "--total-timesteps", "10000000",
                                       "--num-steps", "128", "--eval-every", "2048", "--eval-every-episodes", "64"),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        evaluation = lambda: [p for p in processes_mentioning("--eval_episodes=") if p in _tree(proc.pid)]  # noqa: E731
        games = wait_for(evaluation, 120, "an evaluation's game", proc)
        proc.send_signal(signal.SIGINT)
        communicate_after_signal(proc)
        assert proc.returncode == 130
        assert wait_gone(games) == []
        (run_dir,) = run_dirs(tmp_path)
        assert (run_dir / "checkpoint.pt").is_file()
    finally:
        end(proc)


def _tree(pid: int) -> list:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []
