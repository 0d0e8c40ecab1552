"""Copies of a game's scene in one process (--copies, the addon's scene_copies.gd): N independent agents over one
connection, copy k of an instance seeded s playing the episodes of a run of one seeded s + k; and the check of a
game's scripts for what copies would share (copies_check.gd), which names each finding as file:line and refuses an
agent that acts through the Input singleton; and what that reading cannot see, a press through Input while the copies
run (input_watch.gd), which ends the run in one line."""

import subprocess
import textwrap

import numpy as np
import pytest

from python_trainer.base.paths import godot_server
from python_trainer.envs.game import GameInstance, godot_game
from python_trainer.envs.vec_env import make_vec_env


def _play(envs, steps, seed=0):
    """(observations (steps + 1, envs, 12), rewards and episode ends (steps, envs)) of ``steps`` random steps (the
    same actions for the same number of envs)."""
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=0)
    seen, rewards, ends = [obs], [], []
    for _ in range(steps):
        actions = rng.uniform(-1, 1, (envs.num_envs, 2)).astype(np.float32)
        obs, reward, terminated, truncated, _ = envs.step(actions)
        seen.append(obs)
        rewards.append(reward)
        ends.append(terminated | truncated)
    return np.stack(seen), np.stack(rewards), np.stack(ends)


def test_the_command_line_asks_for_copies_only_when_there_are_some(headless_export):
    game = godot_game("ball_chase")
    assert "--copies=16" in GameInstance(game, copies=16).command()
    assert not any(a.startswith("--copies") for a in GameInstance(game).command())


@pytest.mark.slow
def test_each_copy_plays_the_episodes_of_a_run_of_one_with_its_seed(tmp_path, headless_export):
    """2 instances x 2 copies (seeds 5 and 7: copies 5, 6, 7, 8) and 4 instances of one copy (seeds 5..8), the same
    actions: the same observations, rewards and episode ends, agent for agent, bit for bit (the binary exchange is
    float32-exact), episodes of 60 steps at most ending along the way: each copy's physics and random generator are
    its own."""
    game = godot_game("ball_chase")
    copies = make_vec_env(game, num_instances=2, agents_per_instance=1, copies=2, seed=5, run_dir=tmp_path / "c",
                          max_episode_steps=60)
    try:
        assert copies.num_envs == 4 and copies.copies == 2 and copies.game_settings["env_seed"] == [5, 7]
        assert "(2 copies of its scene each)" in copies.startup_line()
        with_copies = _play(copies, 400)
    finally:
        copies.close()
    singles = make_vec_env(game, num_instances=4, agents_per_instance=1, seed=5, run_dir=tmp_path / "s",
                          max_episode_steps=60)
    try:
        assert singles.copies == 1
        alone = _play(singles, 400)
    finally:
        singles.close()
    obs, rewards, ends = with_copies
    assert ends.sum(axis=0).min() >= 1, ends.sum(axis=0)  # every agent saw an episode end and the next begin
    assert len({obs[:50, k].tobytes() for k in range(4)}) == 4  # four different games
    for ours, theirs in zip(with_copies, alone):
        np.testing.assert_array_equal(ours, theirs)


def _project(root, scripts: dict):
    """A one-scene project (RLSync, one agent) whose scene's root runs ``scripts["main.gd"]``, with the addon."""
    import shutil

    from python_trainer.base.paths import GODOT_PROJECT

    (root / "addons").mkdir(parents=True)
    shutil.copytree(GODOT_PROJECT / "addons" / "rl_sync", root / "addons" / "rl_sync")
    (root / "project.godot").write_text('config_version=4\n\n[application]\n\nrun/main_scene="res://main.tscn"\n')
    for name, text in scripts.items():
        (root / name).write_text(textwrap.dedent(text))
    (root / "main.tscn").write_text(textwrap.dedent("""\
        [gd_scene load_steps=4 format=2]

        [ext_resource path="res://addons/rl_sync/sync.gd" type="Script" id=1]
        [ext_resource path="res://agent.gd" type="Script" id=2]
        [ext_resource path="res://main.gd" type="Script" id=3]

        [node name="Main" type="Node2D"]
        script = ExtResource( 3 )

        [node name="RLSync" type="Node" parent="."]
        script = ExtResource( 1 )

        [node name="Agent" type="Node" parent="."]
        script = ExtResource( 2 )
        """))
    return root


AGENT = """\
    extends "res://addons/rl_sync/agent_controller.gd"
    func get_obs() -> Array:
        return [0.0]
    func get_action_space() -> Dictionary:
        return {"move": {"size": 2, "action_type": "discrete"}}
    func set_action(action: Dictionary) -> void:
        if action["move"] == 1:
            Input.action_press("ui_left")  # the agent acts through the game's input
"""
MAIN = """\
    extends Node2D
    const Helper = preload("res://helper.gd")
    func _ready() -> void:
        randomize()  # the game seeds the global generator
        var text := "get_tree().paused is only text here"  # and a comment: call_group(
        get_tree().call_group("mobs", "queue_free")
"""
HELPER = """\
    extends Reference
    static func spot(rng: RandomNumberGenerator) -> float:
        return rng.randf() + randf()
"""


def _run(project, *flags):
    return subprocess.run([godot_server(), "--path", str(project), "--benchmark_steps=5", *flags],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_script_check_names_each_finding_and_refuses_an_agent_that_presses_input(tmp_path):
    project = _project(tmp_path / "game", {"main.gd": MAIN, "agent.gd": AGENT, "helper.gd": HELPER})
    refused = _run(project, "--copies=2")
    lines = [ln for ln in refused.stdout.splitlines() if ln.startswith("rl_sync: copies: ")]
    assert [ln.split(": ")[2] for ln in lines] == ["res://main.gd:4", "res://main.gd:6", "res://helper.gd:3",
                                                   "res://agent.gd:8"], lines
    assert "global random generator is shared" in lines[0] and "tree-wide group call" in lines[1]
    assert "REFUSED" in lines[3] and "Input singleton" in lines[3]
    assert refused.returncode == 1
    # (a --benchmark_steps run that a person starts shows its game's output on stdout: error_watch.gd)
    assert "rl_sync: error: --copies=2 cannot run this game: res://agent.gd:8: REFUSED" in refused.stdout + refused.stderr
    # without the agent's input, the game runs as copies with its findings said; without --copies nothing is checked
    (project / "agent.gd").write_text(textwrap.dedent(AGENT).replace('Input.action_press("ui_left")', "pass"))
    ran = _run(project, "--copies=3")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert '"agents":3' in ran.stdout and ran.stdout.count("rl_sync: copies: ") == 3
    alone = _run(project)
    assert alone.returncode == 0 and '"agents":1' in alone.stdout and "rl_sync: copies" not in alone.stdout


def test_a_game_that_runs_no_copies_is_refused_when_copies_are_asked_for(tmp_path):
    """An export whose addon predates copies (here the fake game) ignores --copies: said in one line, not trained on
    with a sixteenth of the agents."""
    from helpers import FAKE

    from python_trainer.envs.game import GameError

    with pytest.raises(GameError, match=r"runs 1 copy of its scene, not the 4 asked for \(--copies\): export it again"):
        make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, binary=FAKE, copies=4, run_dir=tmp_path)


PRESSING_AGENT = """\
    extends "res://addons/rl_sync/agent_controller.gd"
    const Keys = preload('res://keys.gd')  # single quotes
    func get_obs() -> Array:
        return [0.0]
    func get_action_space() -> Dictionary:
        return {"move": {"size": 2, "action_type": "discrete"}}
    func set_action(action: Dictionary) -> void:
        Keys.press(action["move"] == 1)
"""
SPACED_KEYS = """\
    extends Reference
    static func press(left: bool) -> void:
        if left:
            Input . action_press\t("ui_left")  # spaces and a tab
"""
BUILT_KEYS = """\
    extends Reference
    static func press(left: bool) -> void:
        if left:
            Input.call("action_" + "press", "ui_left")  # a call no reading of the source can find
"""


def _train_copies(tmp_path, keys: str):
    """`godot-ppo train --project` on a game of 2 copies whose agent presses ``ui_left`` through the helper ``keys``
    (preloaded with single quotes): the finished process and the run folders it left."""
    from helpers import godot_ppo_child, run_dirs

    project = _project(tmp_path / "game", {"main.gd": "extends Node2D\n", "agent.gd": PRESSING_AGENT, "keys.gd": keys})
    result = godot_ppo_child("train", "--project", str(project), "--copies", "2", "--total-timesteps", "64",
                             "--num-steps", "16", "--run-dir-root", str(tmp_path / "runs"), timeout=90)
    return result, run_dirs(tmp_path / "runs")


def test_the_trainer_refuses_in_one_line_a_helper_that_presses_input_with_a_spaced_call(tmp_path):
    result, left = _train_copies(tmp_path, SPACED_KEYS)
    first = result.stderr.splitlines()[0]
    assert result.returncode != 0 and left == [], result.stderr[-2000:]
    assert first.startswith("godot-ppo train: error: ") and "exited before connecting (exit code 1): --copies=2 " \
        "cannot run this game: res://keys.gd:4: REFUSED: copies share one Input singleton" in first, first
    assert "controller's set_action, or run with --copies 1" in first


def test_a_press_that_no_reading_finds_is_caught_while_the_copies_run(tmp_path):
    result, left = _train_copies(tmp_path, BUILT_KEYS)
    assert result.returncode == 1 and left == [], result.stderr[-2000:]
    assert "(2 copies of its scene each)" in result.stdout  # the scan found nothing: the run started
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("godot-ppo train: error: instance 0 (") and line.endswith(
        '): --copies=2: the game\'s code pressed the action "ui_left" through the Input singleton (Input.action_press, '
        "action_release or parse_input_event), which every copy of the scene shares, so each copy's agents press the "
        "others' keys: give each agent its actions through its controller's set_action, or run with --copies 1"), line
