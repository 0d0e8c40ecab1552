"""The input-action bridge (godot_project/addons/rl_sync/input_actions.gd) against a person's keyboard: a sequence
typed with xdotool into the windowed runtime under Xvfb, then the same sequence pressed by the bridge in the headless
one, read by a game that reads its actions as games written for people do (godot_project/tests/input_probe.gd: each
physics and idle frame, is_action_pressed, is_action_just_pressed, is_action_just_released, get_action_strength, and
the events its _input() got). The bridge's stamping across decisions and --action_repeat frames, and analogue
strengths, are the GDScript tests' (godot_project/tests/test_input_actions.gd, run by test_gdscript.py)."""

import json
import os
import shutil
import subprocess

import pytest

from helpers import read_line, wait_for
from python_trainer.base.paths import GODOT_PROJECT, godot_server

PROBE = "res://tests/input_probe.tscn"
ACTIONS = {"j": "probe_left", "k": "probe_jump", "l": "probe_right"}  # input_probe.gd's KEYS
# A left held through a jump, a right pressed while left is still held, two quick jumps, a right tapped twice: every
# hold and gap at least 0.1 s, so that each is a frame of its own even on a loaded machine.
TYPED = ["keydown", "j", "sleep", "0.15", "keydown", "k", "sleep", "0.12", "keyup", "k", "sleep", "0.1",
         "keydown", "l", "sleep", "0.1", "keyup", "j", "sleep", "0.12", "keyup", "l", "sleep", "0.1",
         "keydown", "k", "sleep", "0.1", "keyup", "k", "sleep", "0.1", "keydown", "k", "sleep", "0.1", "keyup", "k",
         "sleep", "0.1", "keydown", "l", "sleep", "0.1", "keyup", "l", "sleep", "0.1", "keydown", "l", "sleep", "0.15",
         "keyup", "l", "sleep", "0.1"]
PRESSES = {"probe_left": 1, "probe_jump": 3, "probe_right": 3}


def counts(records: list, field: int) -> dict:
    return {name: sum(record[name][field] for record in records) for name in ACTIONS.values()}


@pytest.mark.skipif(shutil.which("xdotool") is None or shutil.which("godot3-runner") is None,
                    reason="needs xdotool and godot3-runner (make deps installs them)")
def test_the_bridge_gives_a_game_what_the_same_keys_typed_on_a_keyboard_give_it_frame_for_frame(tmp_path):
    from python_trainer.envs.xvfb import Xvfb

    keys_log, bridge_log = tmp_path / "keys.json", tmp_path / "bridge.json"
    with Xvfb(tmp_path / "xvfb.log") as xvfb:
        env = {**os.environ, "DISPLAY": xvfb.start()}
        wait_for(lambda: subprocess.run(["xdotool", "getdisplaygeometry"], env=env, capture_output=True,
                                        timeout=10).returncode == 0, 10, "Xvfb answering xdotool")
        # --fixed-fps: one physics frame per idle frame, so a key's event comes before a physics frame, as the
        # bridge's press does (the sync node presses first in the decision's physics frame)
        game = subprocess.Popen(["godot3-runner", "--path", str(GODOT_PROJECT), "--fixed-fps", "60", PROBE,
                                 f"--probe_out={keys_log}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            read_line(game, b"input_probe: ready", timeout=30)
            window = subprocess.run(["xdotool", "search", "--sync", "--name", "rl_sync input probe"], env=env,
                                    capture_output=True, text=True, timeout=20, check=True).stdout.split()[0]
            subprocess.run(["xdotool", "windowfocus", "--sync", window, *TYPED, "key", "Escape"], env=env,
                           timeout=30, check=True)
            err = game.communicate(timeout=30)[0]
        finally:
            if game.poll() is None:
                game.kill()
                game.communicate()
    assert game.returncode == 0 and b"SCRIPT ERROR" not in err, err.decode(errors="replace")[-3000:]
    keys = json.loads(keys_log.read_text())
    # the keyboard reached the game: every press typed, and its release, seen once in each kind of frame
    for records in (keys["physics"], keys["idle"]):
        assert counts(records, 1) == PRESSES and counts(records, 2) == PRESSES
    assert counts(keys["physics"], 4) == PRESSES and counts(keys["physics"], 5) == PRESSES  # _input()'s events

    replay = subprocess.run([godot_server(), "--path", str(GODOT_PROJECT), "--fixed-fps", "60", PROBE,
                             f"--probe_replay={keys_log}", f"--probe_out={bridge_log}"],
                            capture_output=True, text=True, timeout=60)
    assert replay.returncode == 0 and "SCRIPT ERROR" not in replay.stderr, replay.stderr[-3000:]
    bridge = json.loads(bridge_log.read_text())
    for kind in ("physics", "idle"):
        assert len(bridge[kind]) == len(keys[kind]) > 0
        for frame, (typed, pressed) in enumerate(zip(keys[kind], bridge[kind])):
            assert pressed == typed, f"{kind} frame {frame}: the keyboard gave {typed}, the bridge {pressed}"
