"""Matches in the engine (issue 24): --policy with --opponent=FILE|random|scripted|human plays team 0 against team 1
of a two-sided game (pong), each side for half of the matches, and prints {"eval": {"wins", "losses", "draws", ...}};
pong's scripted opponent beats random; bad input gets one line; a person plays the policy with the keyboard."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import REPO
from python_trainer.engine import in_engine
from python_trainer.envs.xvfb import Xvfb
from python_trainer.engine.policy_file import policy_bundle, policy_dict, policy_json
from python_trainer.base.processes import end_process_tree

PONG_KEYS = [{"key": "move", "action_type": "discrete", "size": 3}]
SOURCE = {"global_step": 1000}


def pong_policy(observations: int = 6, seed: int = 1) -> dict:
    """A pong policy of random weights: 6 observations -> the 3 logits of "move"."""
    torch.manual_seed(seed)
    actor = nn.Sequential(nn.Linear(observations, 8), nn.Tanh(), nn.Linear(8, 3))
    return policy_dict(actor, None, PONG_KEYS, env="pong", source=SOURCE, where="test", policy_name="pong")


def check_counts(report: dict, episodes: int) -> None:
    """The match JSON adds up, overall and per team, and the policy played each team in half of the matches."""
    assert report["episodes"] == episodes == len(report["returns"]) == len(report["lengths"])
    assert report["wins"] + report["losses"] + report["draws"] == episodes
    assert report["wins"] == sum(r > 0 for r in report["returns"])
    assert report["losses"] == sum(r < 0 for r in report["returns"])
    decided = report["wins"] + report["losses"]
    assert report["win_rate"] == (pytest.approx(report["wins"] / decided) if decided else None)
    assert report["mean_return"] == pytest.approx(np.mean(report["returns"]), abs=1e-4)
    sides = report["by_team"]
    assert sorted(sides) == ["0", "1"] and sides["0"]["episodes"] == sides["1"]["episodes"] == episodes // 2
    for key in ("wins", "losses", "draws", "episodes"):
        assert sides["0"][key] + sides["1"][key] == report[key], key


def test_scripted_opponent_beats_random(headless_export):
    # the scripted paddle as the policy, from its side: 200 matches on 8 courts take about 2 s
    report = in_engine.play_matches("scripted", "random", episodes=200, env_id="pong", agents=16, seed=0)
    check_counts(report, 200)
    assert report["policy"] == "scripted" and report["opponent"] == "random" and report["env"] == "pong"
    assert report["win_rate"] >= 0.95, report
    # and from the other side: random loses to it
    assert in_engine.play_matches("random", "scripted", episodes=40, env_id="pong", agents=8)["win_rate"] <= 0.05


@pytest.mark.parametrize("flag, frames", [(None, 3), ("--action_repeat=2", 6)])
def test_pong_decides_every_3_frames_whoever_drives_it(headless_export, flag, frames):
    # its RLSync node's frames_per_decision (docs/games.md): no flag needed, and --action_repeat multiplies it
    result = subprocess.run([str(headless_export), "--env=pong", "--agents=2", "--benchmark_steps=10",
                             *([flag] if flag else []), "--fixed-fps", "60"],
                            capture_output=True, text=True, timeout=30)
    report = next(json.loads(line)["benchmark"] for line in result.stdout.splitlines() if line.startswith('{"bench'))
    assert report["decision_frames"] == frames and report["decision_steps"] == 10, report


def test_a_policy_file_plays_a_policy_file_or_a_bundle(headless_export, tmp_path):
    policy = tmp_path / "pong.json"
    policy.write_text(policy_json(pong_policy(seed=1)))
    bundle = tmp_path / "bundle.json"  # RUN_DIR/policy.json of a run of several policies: any policy file will do
    bundle.write_text(policy_json(policy_bundle([pong_policy(seed=2)], env="pong", source=SOURCE)))
    report = in_engine.play_matches(policy, bundle, episodes=12, agents=4, max_episode_steps=300)
    check_counts(report, 12)
    assert report["policy"] == str(policy.resolve()) and report["opponent"] == str(bundle.resolve())
    # a network against itself, each side half of the time: a point is +1 on one side and -1 on the other
    mirror = in_engine.play_matches(policy, policy, episodes=8, agents=4, max_episode_steps=300)
    check_counts(mirror, 8)


def _engine_error(export, *args) -> str:
    result = subprocess.run([str(export), *args, "--eval_episodes=4", "--fixed-fps", "60"], capture_output=True,
                            text=True, timeout=30)
    errors = [line for line in result.stderr.splitlines() if line.startswith("rl_sync: error: ")]
    assert result.returncode == 1 and len(errors) == 1, result.stdout + result.stderr
    assert '"eval"' not in result.stdout and "SCRIPT ERROR" not in result.stderr
    return errors[0]


@pytest.mark.parametrize("case", ["no teams", "unknown", "spaces", "human headless", "no policy", "scripted alone"])
def test_bad_matches_get_one_line(headless_export, tmp_path, case):
    small = tmp_path / "five.json"  # 5 observations: pong's paddles give 6
    small.write_text(policy_json(pong_policy(observations=5)))
    args, expected = {
        "no teams": (["--env=tag", "--policy=random", "--opponent=random"],
                     ["but tag's agent Field/Chaser has team -1", "give each agent of a two-sided game its side"]),
        "unknown": (["--env=pong", "--policy=random", "--opponent=randon"],
                    ["--opponent=randon is neither a policy file nor one of random, scripted, human"]),
        "spaces": (["--env=pong", "--policy=scripted", f"--opponent={small}"],
                   [f"--opponent: policy file {small}", "it expects 5 observations, the agent gives 6",
                    "give a policy file of pong's agents"]),
        "human headless": (["--env=pong", "--policy=random", "--opponent=human"], ["run the windowed export"]),
        "no policy": (["--env=pong", "--opponent=scripted"], ["add --policy=FILE"]),
        "scripted alone": (["--env=pong", "--policy=scripted"], ["add --opponent=FILE, random or scripted"]),
    }[case]
    error = _engine_error(headless_export, *args)
    assert all(part in error for part in expected), error


def test_play_matches_raises_the_games_line(headless_export, tmp_path):
    with pytest.raises(in_engine.PlaybackError, match="give each agent of a two-sided game its side"):
        in_engine.play_matches("random", "scripted", episodes=2, env_id="tag", agents=2)
    with pytest.raises(in_engine.PlaybackError, match="policy file .*missing.json: the file does not exist"):
        in_engine.play_matches("scripted", tmp_path / "missing.json", episodes=2, env_id="pong")
    with pytest.raises(in_engine.PlaybackError, match="in a window: godot-ppo play RUN --opponent human"):
        in_engine.play_matches("scripted", "human", episodes=2, env_id="pong")


def _right_paddle_rows(frame_path) -> float:
    """Mean row of pong's right paddle (drawn orange) in a recorded frame."""
    from PIL import Image

    with Image.open(frame_path) as im:
        rgb = np.asarray(im.convert("RGB")).astype(np.int32)
    orange = (np.abs(rgb - np.array([255, 153, 76])) < 30).all(axis=2)
    rows = np.nonzero(orange)[0]
    assert rows.size > 0, f"{frame_path}: no right paddle drawn"
    return float(rows.mean())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xdotool") is None, reason="needs xdotool to press a key")
def test_a_person_plays_the_policy_with_the_keyboard(windowed_export, tmp_path):
    """--opponent=human in a window: the person's paddle (court 0: the right one, the arrow keys) moves when Up is
    held, and stays at the centre otherwise (nobody else drives it). --fixed-fps 60: each of the 240 frames is one
    physics step, so the paddle has the same game time to climb however fast the window draws."""
    xvfb = Xvfb(tmp_path / "xvfb.log")
    env = dict(os.environ, DISPLAY=xvfb.start())
    proc = None
    try:
        proc = subprocess.Popen([str(windowed_export), "--env=pong", "--agents=1", "--policy=scripted",
                                 "--opponent=human", f"--record_dir={tmp_path}", "--record_every=4",
                                 "--quit_after_frames=240", "--resolution", "640x360", "--fixed-fps", "60"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        window = subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--name", "."], env=env,
                                capture_output=True, text=True, timeout=30).stdout.split()[0]
        subprocess.run(["xdotool", "mousemove", "--window", window, "100", "100", "windowfocus", "--sync", window,
                        "keydown", "Up"], env=env, check=True, timeout=10)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc is not None and proc.poll() is None:
            end_process_tree([proc.pid])
            proc.wait()
        xvfb.stop()
    assert proc.returncode == 0 and "SCRIPT ERROR" not in err, out + err
    assert '"mode":"policy: scripted vs human"' in out, out
    rows = [_right_paddle_rows(frame) for frame in sorted(tmp_path.glob("frame_*.png"))]
    assert len(rows) >= 30
    # holding Up takes it from the centre to the top, and a point puts it back at the centre; the first recorded
    # frame may come after the key went down (once it showed the paddle half-way up already)
    assert min(rows) < max(rows) - 60, rows


@pytest.mark.slow
def test_play_opens_a_match_against_a_person(windowed_export, tmp_path, monkeypatch):
    """On a person's display (here an Xvfb of the test's, as $DISPLAY): without one, `play` refuses, as `record`
    does (tests/test_reliability_files.py)."""
    xvfb = Xvfb(tmp_path / "xvfb.log")
    monkeypatch.setenv("DISPLAY", xvfb.start())
    policy = tmp_path / "pong.json"
    policy.write_text(policy_json(pong_policy()))
    cmd = [sys.executable, "-m", "python_trainer", "play", str(policy), "--opponent", "human", "--seconds", "1"]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=90)
    finally:
        xvfb.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    # the game's own count: --agents 1 asks for one paddle, and a court seats two
    assert f"playing {policy} against human in pong with 2 agents" in result.stdout, result.stdout
    # your side and keys, from the game's Input Map (not text of ours)
    assert "you play team 1 in arena 0; keys: pong_right_up: Up, pong_right_down: Down" in result.stdout, result.stdout
    assert "SCRIPT ERROR" not in result.stderr and "rl_sync: error" not in result.stderr, result.stderr
