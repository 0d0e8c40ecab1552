"""A policy file's playback (--policy=FILE --eval_episodes=N) starts on a controller whose sensors join the tree late:
one added with call_deferred in _ready() is counted, as a trainer's env_info counts it; one added later still makes
the start's first get_obs() raise a script error, and the run then ends at once with one line instead of idling
forever (Godot goes on after a script error, and nothing was left to quit)."""

from pathlib import Path

import pytest

from helpers import REPO
from python_trainer.base.paths import godot_server
from python_trainer.base.processes import run_to_end
from python_trainer.engine.in_engine import PlaybackError, json_line, run_game
from python_trainer.engine.policy_file import FORMAT, write_policy

TIMEOUT = 30  # a healthy run takes about a second; the hang this guards against never ended
PROJECT = '''config_version=4

[application]

config/name="late_sensor"
run/main_scene="res://arena.tscn"

[logging]

file_logging/enable_file_logging.pc=false
'''
SCENE = '''[gd_scene load_steps=3 format=2]

[ext_resource path="res://addons/rl_sync/sync.gd" type="Script" id=1]
[ext_resource path="res://agent.gd" type="Script" id=2]

[node name="Arena" type="Node2D"]

[node name="RLSync" type="Node" parent="."]
script = ExtResource( 1 )
env_name = "late_sensor"

[node name="Target" type="Node2D" parent="." groups=[ "targets", ]]
position = Vector2( 30, 40 )

[node name="Body" type="Node2D" parent="."]

[node name="Agent" type="Node" parent="."]
script = ExtResource( 2 )
'''
# One clock value and a NearestNodes2D of one slot (5 values) on the agent's body: 6 observations, once the sensor is in the tree.
AGENT = '''extends "res://addons/rl_sync/agent_controller.gd"

const NearestNodes2D = preload("res://addons/rl_sync/nearest_nodes_2d.gd")

var t := 0
var _near = NearestNodes2D.new()


func _ready() -> void:
	_near.group = "targets"
	_near.count = 1
	{add}


func get_obs() -> Array:
	return [float(t % 7) / 7.0] + _near.get_observation()


func get_action_space() -> Dictionary:
	return {{"move": {{"size": 1, "action_type": "continuous"}}}}


func set_action(_action: Dictionary) -> void:
	pass


func reset_episode() -> void:
	_near.reset()


func _physics_process(_delta: float) -> void:
	t += 1
	reward += 0.1
	done = t % 20 == 0
'''
ADD = {"now": '$"../Body".add_child(_near)',
       "deferred": '$"../Body".call_deferred("add_child", _near)',
       "a frame later": 'yield(get_tree(), "idle_frame")\n\t$"../Body".add_child(_near)'}


def late_sensor_game(tmp_path: Path, add: str) -> tuple:
    """The game's project (the addon linked in, run in place) with its sensor added `add` (ADD), and a policy file of
    its 6 observations: (the command that evaluates the policy over 4 episodes, without the flag of a watched run)."""
    project = tmp_path / "late_sensor"
    (project / "addons").mkdir(parents=True)
    (project / "addons" / "rl_sync").symlink_to(REPO / "godot_project" / "addons" / "rl_sync")
    (project / "project.godot").write_text(PROJECT)
    (project / "arena.tscn").write_text(SCENE)
    (project / "agent.gd").write_text(AGENT.format(add=ADD[add]))
    policy = {"format": FORMAT, "version": 5, "env": "late_sensor", "observation_size": 6,
              "action_keys": [{"key": "move", "action_type": "continuous", "size": 1}], "action_rule": "per_key",
              "obs_normalization": None, "lstm": None,
              "layers": [{"weight": [[0.0] * 6], "bias": [0.5], "activation": "linear"}]}
    path = write_policy(tmp_path / "policy.json", policy)
    return [godot_server(), "--path", str(project), f"--policy={path}", "--eval_episodes=4", "--fixed-fps", "60"]


def test_a_policy_plays_a_controller_that_adds_its_sensor_with_call_deferred_as_one_that_adds_it_at_once(tmp_path):
    reports = {}
    for add in ("now", "deferred"):
        done = run_to_end(late_sensor_game(tmp_path / add, add), TIMEOUT)
        assert done.returncode == 0, f"{add}: returncode {done.returncode}; stderr: {done.stderr[-2000:]}"
        assert "SCRIPT ERROR" not in done.stdout + done.stderr, done.stderr[-2000:]
        reports[add] = {k: v for k, v in json_line(done.stdout, "eval").items() if k != "policy"}
    assert reports["now"]["episodes"] == 4 and reports["now"]["lengths"][1:] == [20, 20, 20], reports["now"]
    assert reports["deferred"] == reports["now"]


def test_a_script_error_that_stops_the_start_ends_the_run_at_once_with_one_line(tmp_path):
    """The sensor joins a frame after _ready(): the start's get_obs() raises a script error (the sensor is not in the
    tree), which stops the start. The game (as godot-ppo runs it) exits 1 with one line; godot-ppo's evaluation names
    the script error instead of waiting out its timeout; a person's run of the game exits 1 too."""
    command = late_sensor_game(tmp_path, "a frame later")
    done = run_to_end([*command, "--rl_sync_watched"], TIMEOUT)
    assert done.returncode == 1, f"returncode {done.returncode}; stderr: {done.stderr[-2000:]}"
    errors = [line for line in done.stderr.splitlines() if line.startswith("rl_sync: error:")]
    assert errors == ["rl_sync: error: a script error stopped the run's start (the first SCRIPT ERROR above): fix "
                      "the script and line it names"], done.stderr[-2000:]
    assert "SCRIPT ERROR: get_obs:" in done.stderr and "At: res://agent.gd:" in done.stderr
    with pytest.raises(PlaybackError) as e:
        run_game(command, TIMEOUT)
    assert str(e.value).startswith("--eval_episodes: the game raised a script error") and "\n" not in str(e.value)
    person = run_to_end(command, TIMEOUT)  # error_watch.gd: the game runs as its own child
    assert person.returncode == 1 and "a script error stopped the run's start" in person.stderr, person.stderr[-2000:]
