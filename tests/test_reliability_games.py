"""Reliability, round 3, the engine and the games: a policy file's sizes are checked before anything is allocated from
them (in the game and in Python); a game's deterministic bugs (observations of the wrong size or kind, rewards that
are not numbers, empty action spaces) are named in one line and not restarted; a game that raises script errors is
reported, and a training run on it stops. The --watch window's reloader keeps its policy through a file claiming huge
sizes: godot_project/tests/test_policy_reloader.gd."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from helpers import REPO, plain_export
from test_ppo import _NanAfterThree
from python_trainer import cli
from python_trainer.envs.game import GameBugError, GameExport, list_games
from python_trainer.envs.launcher import SCRIPT_ERRORS_TO_STOP
from python_trainer.base.paths import godot_server
from python_trainer.engine.policy_file import MAX_SIZE, PolicyFileError, policy_dict, read_policy
from python_trainer.variants.recurrent import RecurrentAgent
from python_trainer.envs.vec_env import make_vec_env

OBS = 6
KEYS = [{"key": "move", "action_type": "continuous", "size": 2}]


def lstm_policy(hidden: int = 4) -> dict:
    """A small recurrent policy file's content, as the trainer writes it."""
    agent = RecurrentAgent(OBS, gym.spaces.Box(-1, 1, (2,)), hidden_size=hidden)
    parts = agent.policy_parts()
    return policy_dict(parts.pop("actor"), None, KEYS, env="memory", source={}, where="test", **parts)


def lying(case: str) -> dict:
    """The small recurrent policy with one size that lies (the arrays stay small)."""
    policy = lstm_policy()
    if case.startswith("hidden_size="):
        policy["lstm"]["hidden_size"] = int(case.split("=")[1])
    elif case == "observation_size":
        policy["observation_size"] = 2**40
    elif case == "action_size":
        policy["action_keys"] = [dict(KEYS[0], size=100_000_000)]
    elif case == "after_layer":
        policy["lstm"]["after_layer"] = 2**31
    return policy


HUGE = {
    "hidden_size=100000000": "hidden_size must be a whole number from 1 to 65536, got 100000000",
    f"hidden_size={2**31}": "hidden_size must be a whole number from 1 to 65536, got 2147483648",
    "hidden_size=3000000": "hidden_size must be a whole number from 1 to 65536, got 3000000",
    "observation_size": "observation_size must be a whole number from 1 to 65536",
    "action_size": "from 1 to 65536",
}


def test_python_reads_policy_files_checking_every_size(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(lstm_policy()))
    assert read_policy(good)["lstm"]["hidden_size"] == 4
    for case, expected in {**HUGE, "after_layer": '"after_layer" (the index of a layer)'}.items():
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(lying(case)))
        with pytest.raises(PolicyFileError) as e:
            read_policy(path)
        assert str(e.value).startswith(f"policy file {path}: ") and expected in str(e.value), (case, str(e.value))
        assert "\n" not in str(e.value)
    assert MAX_SIZE == 65536  # the game's bound (block_compiler.gd) is the same; the GDScript suite checks it there


# Runs argv[1:] and prints its peak RSS (KiB) on stderr's last line: a child forked from a small interpreter, so its
# peak is the game's own (a child forked from pytest would count pytest's pages until its exec).
_PEAK_RSS = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")


def run_with_peak_rss(cmd, timeout: float):
    """(exit code, stdout, stderr, seconds, peak RSS in MB) of a process run to its end; the test fails (and the
    process group is killed) at ``timeout``."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-S", "-c", _PEAK_RSS, *cmd], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{cmd[0]} did not end within {timeout} s")
    err, peak_kib = err.rstrip("\n").rsplit("\n", 1) if "\n" in err.rstrip("\n") else ("", err)
    return proc.returncode, out, err, time.monotonic() - t0, int(peak_kib) / 1024


@pytest.mark.parametrize("case", list(HUGE) + ["after_layer"])
def test_the_game_refuses_a_policy_claiming_huge_sizes_at_once_in_little_memory(tmp_path, headless_export, case):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(lying(case)))
    cmd = [str(headless_export), "--env=memory", "--agents=2", f"--policy={path}", "--eval_episodes=1",
           "--fixed-fps", "60"]
    code, out, err, seconds, peak_mb = run_with_peak_rss(cmd, timeout=30)
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("rl_sync: error: policy file")]
    assert len(errors) == 1, err[-3000:]
    expected = HUGE.get(case, "the LSTM comes after layer 2147483648 of 3")
    assert expected in errors[0], errors[0]
    assert seconds < 10, f"refused after {seconds:.1f} s"
    assert peak_mb < 300, f"the game's peak RSS was {peak_mb:.0f} MB"
    assert '"eval"' not in out


# ---------------------------------------------------------------------------------------------- broken games
AGENT = '''extends "res://addons/rl_sync/agent_controller.gd"
# A controller with one bug, or none: {case}

var t := 0


func get_obs() -> Array:
	{obs}


func get_action_space() -> Dictionary:
	{actions}


func set_action(_action: Dictionary) -> void:
	pass


func reset_episode() -> void:
	pass


func _physics_process(_delta: float) -> void:
	t += 1
	{reward}
'''
HEALTHY = {"obs": "return [float(t % 7), 1.0, 0.5, -0.5]",
           "actions": 'return {"move": {"size": 2, "action_type": "continuous"}}', "reward": "reward += 0.1"}
BUGS = {
    "obs_grows": {"obs": "return [0.0, 1.0, 0.5, -0.5] if t < 40 else [0.0, 1.0, 0.5, -0.5, 2.0, 3.0]"},
    "obs_empty": {"obs": "return [0.0, 1.0, 0.5, -0.5] if t < 40 else []"},
    "action_size_0": {"actions": 'return {"move": {"size": 0, "action_type": "continuous"}}'},
    "actions_empty": {"actions": "return {}"},
    "obs_string": {"obs": 'var text = "abc"\n\treturn text'},  # a constant would not parse
    "obs_vector2": {"obs": "return [Vector2(1, 2), 1.0, 0.5, -0.5]"},
    "reward_dict": {"reward": 'var points = {"points": t}\n\treward = points'},  # a constant would not parse
}
PROJECT = '''config_version=4

[application]

config/name="broken"
run/main_scene="res://broken.tscn"

[logging]

file_logging/enable_file_logging.pc=false
'''
SCENE = '''[gd_scene load_steps=3 format=2]

[ext_resource path="res://addons/rl_sync/sync.gd" type="Script" id=1]
[ext_resource path="res://broken_agent.gd" type="Script" id=2]

[node name="Broken" type="Node"]

[node name="RLSync" type="Node" parent="."]
script = ExtResource( 1 )
env_name = "broken"

[node name="Agent0" type="Node" parent="."]
script = ExtResource( 2 )

[node name="Agent1" type="Node" parent="."]
script = ExtResource( 2 )
'''


def godot_game_with(tmp_path: Path, case: str) -> Path:
    """A user's game of two agents with the bug ``case`` (BUGS; "healthy": none), as an executable that runs the Godot
    project in place (it answers --list_envs like an export)."""
    project = tmp_path / "broken_project"
    (project / "addons").mkdir(parents=True)
    (project / "addons" / "rl_sync").symlink_to(REPO / "godot_project" / "addons" / "rl_sync")
    (project / "project.godot").write_text(PROJECT)
    (project / "broken.tscn").write_text(SCENE)
    (project / "broken_agent.gd").write_text(AGENT.format(case=case, **{**HEALTHY, **BUGS.get(case, {})}))
    path = tmp_path / "broken.x86_64"
    path.write_text(f'#!/bin/sh\nexec "{godot_server()}" --path "{project}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def train_broken(tmp_path: Path, env_path: Path, capsys, *extra: str):
    """`godot-ppo train` on a broken game: (exit code, stderr, the run folders made)."""
    runs = tmp_path / "runs"
    code = cli.main(["train", "--env-path", str(env_path), "--num-steps", "16", "--total-timesteps", "2048",
                       "--eval-episodes", "0", "--run-dir-root", str(runs), "--no-in-engine", *extra])
    # (step by step: the trainer's own checks of each step; tests/test_engine_actors.py has the games' in the engine)
    return code, capsys.readouterr().err, sorted(runs.glob("*")) if runs.is_dir() else []


def assert_named_once(code: int, err: str, expected: str) -> str:
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert len(errors) == 1 and expected in errors[0], err[-3000:]
    assert "Traceback" not in err and "restart" not in err, err[-3000:]
    return errors[0]


START_BUGS = {"actions_empty:0": "declare the action space {}", 
              "action_size_0:0": "the action key 'move' with a size below 1"}
# From step 40 on: in the third rollout of 16 steps, after two updates (at step 3, before the first: nothing was trained)
STEP_BUGS = {"obs_size:40": "agent 1's observation 'obs' has 6 values, but the game declared {'obs': 4}",
             "obs_empty:40": "agent 1's observation 'obs' has 0 values, but the game declared {'obs': 4}",
             "obs_string:40": "agent 1's observation 'obs' is 'abc', not a list of numbers",
             "reward_string:40": "agent 1's reward is 'ten', not a number",
             "obs_size:3": "agent 1's observation 'obs' has 6 values, but the game declared {'obs': 4}"}


@pytest.mark.parametrize("bug", list(START_BUGS) + list(STEP_BUGS))
def test_a_plugin_games_bug_is_one_line_never_restarted(tmp_path, capsys, bug):
    """Checked in Python, so games made with godot_rl_agents' plugin are covered too (JSON steps)."""
    code, err, runs = train_broken(tmp_path, plain_export(tmp_path, f"--fake_bug={bug}", name="plain"), capsys)
    assert_named_once(code, err, {**START_BUGS, **STEP_BUGS}[bug])
    if bug in START_BUGS or bug.endswith(":3"):  # before anything was trained: no stub run folder (logs/, train.lock)
        assert runs == [], [list(r.rglob("*")) for r in runs]
        assert "checkpoint" not in err and "--resume" not in err
    else:  # mid-run: stopped with a checkpoint, as on a crash
        (run,) = runs
        assert "checkpoint at global step" in err and (run / "checkpoint.pt").is_file()
        assert (run / "logs" / "instance_0.log").read_text().count("getting command line arguments") == 1


@pytest.mark.parametrize("bug", ["obs_grows", "obs_empty", "obs_string", "obs_vector2", "action_size_0",
                                 "actions_empty"])
def test_an_addon_games_bug_is_one_line_never_restarted(tmp_path, capsys, bug):
    """Our addon checks the packed step's observations against what each agent declared (the trainer cannot tell
    whose they were) and tells the trainer, which restarts nothing."""
    expected = {"obs_grows": "agent 0 (/root/Broken/Agent0): get_obs() returned 6 values, but it declared 4",
                "obs_empty": "agent 0 (/root/Broken/Agent0): get_obs() returned 0 values, but it declared 4",
                "obs_string": 'agent 0 (/root/Broken/Agent0): get_obs() returned "abc", not an Array of numbers',
                "obs_vector2": "agent 0 (/root/Broken/Agent0): get_obs() holds (1, 2) at index 0, not a number",
                **{b: START_BUGS[f"{b}:0"] for b in ("action_size_0", "actions_empty")}}[bug]
    code, err, runs = train_broken(tmp_path, godot_game_with(tmp_path, bug), capsys)
    assert_named_once(code, err, expected)
    if bug in ("obs_string", "obs_vector2", "action_size_0", "actions_empty"):  # found at the start: no run folder
        assert runs == [], [list(r.rglob("*")) for r in runs]
    else:
        (run,) = runs
        assert "checkpoint at global step" in err
        assert (run / "logs" / "instance_0.log").read_text().count("# godot-ppo: starting instance 0") == 1


# ---------------------------------------------------------------------------------------------- script errors
def test_a_game_that_keeps_raising_script_errors_is_reported_once_then_stopped(fake_binary, tmp_path):
    said = []
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, binary=fake_binary, run_dir=tmp_path,
                       extra_args=["--fake_flood"], report=said.append)
    try:
        env.reset()
        deadline = time.monotonic() + 30
        with pytest.raises(GameBugError) as e:
            while time.monotonic() < deadline:
                env.step(np.zeros((2, 2)))
        firsts = [m for m in said if "raised a script error" in m]
        assert len(firsts) == 1, said
        log = tmp_path / "logs" / "instance_0.log"
        assert "SCRIPT ERROR: fake_game: Invalid get index 'position'" in firsts[0] and f"(log: {log})" in firsts[0]
        message = str(e.value)
        assert "\n" not in message and "keeps raising script errors" in message and str(log) in message
        assert "SCRIPT ERROR: fake_game: Invalid get index 'position'" in message and "--allow-script-errors" in message
    finally:
        env.close()


def test_allow_script_errors_trains_on_after_showing_the_first(fake_binary, tmp_path):
    said = []
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, binary=fake_binary, run_dir=tmp_path,
                       extra_args=["--fake_flood"], report=said.append, allow_script_errors=True)
    try:
        env.reset()
        watch = env.launcher.instances[0].log.watch
        deadline = time.monotonic() + 30
        while watch.count < 100 * SCRIPT_ERRORS_TO_STOP:
            assert time.monotonic() < deadline, f"only {watch.count} script errors seen"
            env.step(np.zeros((2, 2)))
        assert len([m for m in said if "raised a script error" in m]) == 1
    finally:
        env.close()


def test_an_engine_run_whose_game_raises_a_script_error_fails_with_the_errors_line(tmp_path):
    """Godot goes on after a script error and exits 0: the in-engine evaluation's numbers would be a broken game's."""
    from python_trainer.engine.in_engine import PlaybackError, run_game

    game = tmp_path / "game.sh"
    game.write_text("#!/bin/sh\necho 'SCRIPT ERROR: Invalid call. Nonexistent function \"get_owner\"' >&2\n"
                    "echo '   At: res://src/Music.gd:7.' >&2\necho '{\"eval\": {\"episodes\": 2}}'\n")
    game.chmod(0o755)
    with pytest.raises(PlaybackError) as e:
        run_game([str(game), "--policy=p.json", "--eval_episodes=2"], 30)
    said = str(e.value)
    assert "\n" not in said and said.startswith("--eval_episodes: the game raised a script error")
    assert 'Nonexistent function "get_owner"; At: res://src/Music.gd:7.' in said
    game.write_text("#!/bin/sh\necho '{\"eval\": {\"episodes\": 2}}'\n")
    assert run_game([str(game), "--eval_episodes=2"], 30).returncode == 0  # a healthy run is left alone


@pytest.mark.parametrize("mode", ["--eval_episodes=3", "--benchmark_steps=40"])
def test_the_binary_run_by_a_person_fails_on_a_script_error_of_its_game_naming_it(tmp_path, mode):
    """README's walker, as a person runs its evaluation (the game itself, no godot-ppo), with a bug in its reset: the
    run (its own child, error_watch.gd) exits 1 with the error's line; the same game without the bug exits 0."""
    import shutil

    from python_trainer.base import paths
    from python_trainer.base.processes import run_to_end
    from test_own_game import tutorial

    files, _ = tutorial()
    project = tmp_path / "my_game"
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    shutil.copytree(REPO / "godot_project" / "addons" / "rl_sync", project / "addons" / "rl_sync")
    agent = project / "walker_agent.gd"
    healthy = agent.read_text()
    policy = ["--policy=random"] if mode.startswith("--eval") else []  # --benchmark_steps plays random actions
    command = [paths.godot_server(), "--path", str(project), *policy, mode, "--fixed-fps", "60"]
    done = run_to_end(command, 60)  # on a timeout, the run's child ends too (its process tree)
    assert done.returncode == 0 and "SCRIPT ERROR" not in done.stdout + done.stderr, done.stderr
    agent.write_text(healthy.replace("func reset_episode() -> void:",
                                     "func reset_episode() -> void:\n\tvar broken = null\n\tbroken.position = Vector2()"))
    done = run_to_end(command, 60)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout + done.stderr
    assert last.startswith(f"rl_sync: error: the game raised a script error during {mode.split('=')[0]}, so its "
                           "numbers are not the policy's: SCRIPT ERROR: reset_episode: Invalid set index 'position'")
    assert "At: res://walker_agent.gd:" in last


def test_godot_ppo_tells_the_game_it_reads_the_output_itself_by_the_flag_the_game_knows():
    from python_trainer.engine.in_engine import WATCHED_FLAG

    watch = (REPO / "godot_project" / "addons" / "rl_sync" / "error_watch.gd").read_text()
    assert f'const WATCHED_FLAG := "{WATCHED_FLAG[2:]}"' in watch


@pytest.mark.slow
def test_healthy_games_raise_no_script_error_so_the_watch_never_fires(headless_export, tmp_path, fake_binary):
    """Each of our games, and the godot_rl_agents-plugin test game, in a short default run: not one script error."""
    said = []
    ours = list(list_games(GameExport.open(headless_export), 30).envs)  # every game the export registers
    assert {"ball_chase", "cart_pole", "jumper", "memory", "sparse_goal", "pong"} <= set(ours)
    games = [(game, {}) for game in ours]
    games.append(("plain", {"binary": fake_binary, "extra_args": ["--fake_dialect=godot_rl"]}))
    for game, options in games:
        env = make_vec_env(game, run_dir=tmp_path / game, report=said.append, **options)
        try:
            env.reset(seed=1)
            for _ in range(500):
                env.step(env.action_space.sample())
            watch = env.launcher.instances[0].log.watch
            assert watch.armed and watch.count == 0 and watch.first is None, (game, watch.first)
        finally:
            env.close()
        assert "SCRIPT ERROR" not in (tmp_path / game / "logs" / "instance_0.log").read_text(), game
    assert not [m for m in said if "script error" in m], said


def test_training_a_game_that_assigns_a_dictionary_to_reward_stops_naming_its_first_error(tmp_path, capsys):
    code, err, runs = train_broken(tmp_path, godot_game_with(tmp_path, "reward_dict"), capsys)
    first = [line for line in err.splitlines() if "raised a script error" in line]
    assert len(first) == 1 and "logs/instance_0.log)" in first[0], err[-3000:]
    assert "Trying to assign value of type 'Dictionary'" in first[0] and "broken_agent.gd" in first[0], first[0]
    stop = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
    assert len(stop) == 1 and "keeps raising script errors" in stop[0] and "Trying to assign value of type" in stop[0]
    # in the first rollout: nothing was trained, so no run folder and no checkpoint (the stop's line says the error)
    assert code == 1 and runs == [] and "checkpoint" not in err
    assert "Traceback" not in err and "restart" not in err


@pytest.mark.slow
def test_allow_script_errors_lets_a_user_train_on_deliberately(tmp_path, capsys):
    code, err, runs = train_broken(tmp_path, godot_game_with(tmp_path, "reward_dict"), capsys, "--total-timesteps",
                                   "256", "--allow-script-errors")
    assert code == 0, err[-3000:]
    assert len([line for line in err.splitlines() if "raised a script error" in line]) == 1
    assert "error:" not in err.replace("raised a script error: SCRIPT ERROR:", "")


class _NanAtTheTimeLimit(_NanAfterThree):
    """Finite observations, but the last one of each episode (cut by the time limit) is NaN."""

    def step(self, action):
        self.t += 1
        truncated = self.t >= 4
        return np.full(2, np.nan if truncated else 0.0, np.float32), 0.0, False, truncated, {}


def test_a_nan_final_observation_is_named_not_blamed_on_the_learning_rate(tmp_path, capsys):
    gym.register("TestNanFinalObs-v0", entry_point=_NanAtTheTimeLimit)
    try:
        assert cli.main(["train", "--env-id", "TestNanFinalObs-v0", "--run-dir-root", str(tmp_path), "--num-envs", "2",
                           "--num-steps", "8", "--total-timesteps", "64"]) == 2
    finally:
        gym.registry.pop("TestNanFinalObs-v0")
    err = capsys.readouterr().err
    assert "returned NaN/inf final observations (the last of an ended episode) at global step" in err, err[-2000:]
    assert "learning-rate" not in err
