"""Commands that remember what a run used, and what a game's players are (issue 56): `envs` lists a two-team game's
teams, policy names, agents per arena and decision rate, takes --env-param and saves what the cameras see; `play RUN`
gives the game the run's --env-param again; `play --opponent scripted --record` writes a GIF; a recording waits on
the game's frames, not a fixed total; a person's side and keys come from the game's Input Map; and the wire facts
these add are the same on both sides."""

import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import REPO
from python_trainer.base.processes import end_process_tree
from python_trainer.engine import recording
from python_trainer.engine.in_engine import PlaybackError
from python_trainer.engine.policy_file import policy_dict, policy_json
from python_trainer.envs.xvfb import Xvfb
from test_matches import pong_policy

ADDON = REPO / "godot_project" / "addons" / "rl_sync"


def godot_ppo(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "python_trainer", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def test_the_wire_facts_of_arenas_decision_rate_and_a_persons_keys_agree_with_the_addon():
    # (env_info's keys are the contract's: tests/test_contract.py holds both sides to it)
    assert "const PERSON_LINE := Contract.PERSON_LINE" in (ADDON / "match_mode.gd").read_text()  # (contract.py's)


def test_envs_lists_pongs_two_teams_policy_name_arenas_and_decision_rate_below_its_old_lines(headless_export):
    result = godot_ppo("envs", "--env-path", str(headless_export), "--env-id", "pong")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # the lines users and tests parse stay as they were, first
    assert lines[2].startswith("  agents per instance: 16 (") and "  observation space:   Box(" in lines[3], lines
    assert "  teams:               team 0 (8 agents), team 1 (8 agents)" in lines
    assert "  policy names:        'pong' (16 agents)" in lines
    assert any(line.startswith("  agents per arena:    2 (8 arenas") for line in lines), lines
    assert any(line.startswith("  decision rate:       every 3 physics frames (20 decisions per second") for line in lines), lines


def test_envs_and_launch_take_env_param_by_trains_rule(headless_export):
    vector = godot_ppo("envs", "--env-path", str(headless_export), "--env-id", "forager", "--env-param", "vision=0")
    assert vector.returncode == 0, vector.stdout + vector.stderr
    assert "  observation space:   Box(-inf, inf, (11,), float32)" in vector.stdout, vector.stdout
    refused = godot_ppo("launch", "--env-path", str(headless_export), "--env-id", "forager", "--env-param",
                        "sight=1", "--seconds", "1")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "forager has no environment parameter 'sight'" in refused.stderr, refused.stderr


def test_envs_show_camera_saves_what_foragers_cameras_see(headless_export, tmp_path):
    from PIL import Image

    out = tmp_path / "cams.png"
    result = godot_ppo("envs", "--env-path", str(headless_export), "--env-id", "forager", "--show-camera", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"36x36x3 images (camera_2d) -> {out}" in result.stdout, result.stdout
    with Image.open(out) as im:
        pixels = np.asarray(im.convert("RGB"))
    drawn = pixels[(pixels != 40).any(axis=2)]  # not the grid's gaps (40, 40, 40)
    # the room's walls, floor, sky and targets: most of the image, in several colours, not one blank fill
    assert len(drawn) > 0.9 * pixels.shape[0] * pixels.shape[1] and len(np.unique(drawn, axis=0)) >= 4


def test_play_opponent_scripted_records_pongs_matches_to_a_gif(windowed_export, tmp_path):
    policy, out = tmp_path / "pong.json", tmp_path / "x.gif"
    policy.write_text(policy_json(pong_policy()))
    result = godot_ppo("play", str(policy), "--env-path", str(windowed_export), "--opponent", "scripted",
                       "--record", str(out), "--record-seconds", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote {out}: 30 frames" in result.stdout and out.stat().st_size > 1000, result.stdout


def forager_vector_policy() -> dict:
    """A forager policy of random weights on the vector baseline's 11 observations (vision=0)."""
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(11, 8), nn.Tanh(), nn.Linear(8, 3))
    keys = [{"key": "move", "action_type": "discrete", "size": 3}]
    return policy_dict(actor, None, keys, env="forager", source={"global_step": 1}, where="test")


def test_play_of_a_run_gives_the_game_the_runs_env_param_again(windowed_export, tmp_path):
    run = tmp_path / "forager__ppo__1__1"
    run.mkdir()
    (run / "policy.json").write_text(policy_json(forager_vector_policy()))
    (run / "args.json").write_text('{"env_id": "forager", "env_param": ["vision=0", "target_ahead=uniform(0,1)"]}')
    result = godot_ppo("play", str(run / "policy.json"), "--env-path", str(windowed_export), "--agents", "1",
                       "--record", str(tmp_path / "f.gif"), "--record-seconds", "0.5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the run's environment parameters: --env-param vision=0\n" in result.stdout, result.stdout
    alone = tmp_path / "alone.json"  # the same file outside its run: the game's default, the camera, does not fit
    alone.write_bytes((run / "policy.json").read_bytes())
    refused = godot_ppo("play", str(alone), "--env-path", str(windowed_export), "--agents", "1",
                        "--record", str(tmp_path / "g.gif"), "--record-seconds", "0.5")
    assert refused.returncode != 0 and "camera" in refused.stderr, refused.stdout + refused.stderr


def test_the_in_engine_evaluation_of_a_runs_policy_gives_the_game_the_runs_env_param(headless_export, tmp_path):
    from python_trainer.engine.in_engine import evaluate_in_engine

    run = tmp_path / "forager__ppo__1__1"
    run.mkdir()
    (run / "policy.json").write_text(policy_json(forager_vector_policy()))
    (run / "args.json").write_text('{"env_param": ["vision=0"]}')
    report = evaluate_in_engine(run / "policy.json", env_path=headless_export, episodes=2, agents=2,
                                max_episode_steps=10)
    assert report["episodes"] == 2 and report["env_params"]["vision"] == 0, report


def test_a_recording_waits_while_frames_come_and_gives_up_on_silence(tmp_path):
    slow = tmp_path / "slow"
    slow.mkdir()
    # a game that writes a frame every 0.3 s for 2.4 s: longer than the silence allowed, never silent that long
    writer = f"for i in 1 2 3 4 5 6 7 8; do sleep 0.3; : > {slow}/frame_0000$i.png; done; echo done"
    result = recording.run_recording(["sh", "-c", writer], {}, slow, connect_timeout=0.0, silence=1.0)
    assert result.returncode == 0 and result.stdout == "done\n" and len(list(slow.glob("frame_*"))) == 8
    silent = tmp_path / "silent"
    silent.mkdir()
    start = time.monotonic()
    with pytest.raises(PlaybackError, match=r"wrote no frame within 1\.5 s of its start"):
        recording.run_recording(["sleep", "60"], {}, silent, connect_timeout=0.5, silence=1.0)
    assert time.monotonic() - start < 10


def test_play_help_says_how_long_a_recording_waits():
    result = godot_ppo("play", "--help")
    text = " ".join(result.stdout.replace("│", " ").split())
    assert f"gives up after {recording.SILENCE_S:g} s without a new one" in text, text


def test_a_persons_side_and_keys_come_from_the_games_input_map(windowed_export, tmp_path):
    xvfb = Xvfb(tmp_path / "xvfb.log")
    env = {"DISPLAY": xvfb.start(), "PATH": "/usr/bin:/bin"}
    proc = None
    try:
        proc = subprocess.Popen([str(windowed_export), "--env=pong", "--agents=1", "--policy=scripted",
                                 "--opponent=human", "--quit_after_frames=20", "--fixed-fps", "60"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc is not None and proc.poll() is None:
            end_process_tree([proc.pid])
            proc.wait()
        xvfb.stop()
    assert proc.returncode == 0 and "SCRIPT ERROR" not in err, out + err
    # court 0's right paddle (team 1) reads pong_right_up / pong_right_down, which pong binds to the arrows
    assert "rl_sync: you play: team 1 in arena 0; keys: pong_right_up: Up, pong_right_down: Down" in err, err
