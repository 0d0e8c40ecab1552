"""Environment parameters and curricula (docs/env_params.md): flags and curriculum files read or refused in one line,
the schedule's lessons, and, in the real headless export, jumper's course parameters set by the binary's flag and
by the trainer's message (from each agent's next episode), a training whose lesson advances and survives --resume,
and `godot-ppo envs` listing them."""

import io
import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import REPO, read_scalars, run_dirs
from python_trainer import cli
from python_trainer.run import curriculum, train
from python_trainer.tools import game_commands
from python_trainer import make_vec_env
from python_trainer.envs.env_params import EnvParamError, Value, check_params, parse_flag
from python_trainer.envs.game import GameExport, GodotGame
from python_trainer.envs.protocol import GodotConnectionError

JUMPER_POLICY = REPO / "exports" / "policies" / "jumper.json"


def _lessons(*values, measure="reached_goal", threshold=0.5, length=2):
    return [curriculum.Lesson(f"l{k}", Value("constant", (v,)), None if k == len(values) - 1 else
                              curriculum.Criterion(measure, threshold, length, False)) for k, v in enumerate(values)]


def _ended(returns, infos):
    """gymnasium's infos of a step at which len(returns) episodes ended."""
    n = len(returns)
    return {"_episode": np.ones(n, bool), "episode": {"r": np.array(returns), "l": np.ones(n)},
            "_final_info": np.ones(n, bool), "final_info": np.array(infos, dtype=object)}


def test_flags_and_files_are_read_or_refused_in_one_line(tmp_path):
    assert parse_flag("gap_max=3") == ("gap_max", Value("constant", (3.0,)))
    assert str(parse_flag("gap_max=uniform(2.6, 3.4)")[1]) == "uniform(2.6,3.4)"
    assert parse_flag("g=gaussian(3,0.2)")[1].wire() == {"gaussian": [3.0, 0.2]}
    for bad, said in [("gap_max", "give NAME=NUMBER"), ("gap_max=abc", "'abc' is not a number"),
                      ("gap_max=uniform(3,2)", "has its low above its high"), ("g=gaussian(1,-1)", "negative")]:
        with pytest.raises(EnvParamError, match=said):
            parse_flag(bad)
    good = tmp_path / "good.toml"
    good.write_text('[environment_parameters]\nrise_max = 0.5\n'
                    'size_min = { sampler_type = "uniform", sampler_parameters = { min_value = 2.0, max_value = 2.5 } }\n'
                    '[[environment_parameters.gap_max.curriculum]]\nvalue = 2.2\n'
                    'completion_criteria = { measure = "reward", threshold = 1.0, min_lesson_length = 10 }\n'
                    '[[environment_parameters.gap_max.curriculum]]\nname = "hard"\nvalue = 3.4\n')
    params, where = curriculum.read(["rise_min=-0.5"], good)
    assert [str(lesson.value) for lesson in params["gap_max"]] == ["2.2", "3.4"]
    assert params["gap_max"][0].criterion == curriculum.Criterion("reward", 1.0, 10, True)
    assert str(params["size_min"][0].value) == "uniform(2,2.5)" and where["gap_max"] == f"{good}:4"
    with pytest.raises(EnvParamError, match=r"rise_max=1: rise_max is set by --curriculum .* too \(.*good.toml:2\)"):
        curriculum.read(["rise_max=1"], good)
    refusals = {
        '[[environment_parameters.g.curriculum]]\nvalue = 1\n[[environment_parameters.g.curriculum]]\nvalue = 2\n':
            r"bad.toml:1: parameter g, lesson 0: a lesson without a completion criterion",
        '[environment_parameters]\ng = = 1\n': r"not valid TOML: .*\(at line 2, column 5\)",
        '[environment_parameters]\ng = "x"\n': r"bad.toml:2: parameter g: 'x' is not a number",
        '[environment_parameters]\n': r"no \[environment_parameters\] table",
        '\n[[environment_parameters.g.curriculum]]\nvalue = 1\ncompletion_criteria = { threshold = 1 }\n'
        '[[environment_parameters.g.curriculum]]\nvalue = 2\n': r"bad.toml:2: .*needs measure and threshold",
    }
    for text, said in refusals.items():
        (tmp_path / "bad.toml").write_text(text)
        with pytest.raises(EnvParamError, match=said):
            curriculum.read((), tmp_path / "bad.toml")


def test_the_schedule_moves_on_counts_stale_episodes_and_restores_its_state():
    lines = []
    schedule = curriculum.Schedule({"a": _lessons(1.0, 2.0), "b": _lessons(5.0, 6.0), "c": _lessons(0.5)},
                                   num_envs=2, total_timesteps=1000, say=lines.append)
    assert schedule.message() == {"a": 1.0, "b": 5.0, "c": 0.5} and schedule.columns() == ["lesson", "a", "b", "c"]
    assert schedule.episodes(_ended([0.0], [{"reached_goal": 1}])) == [[0, "1", "5", "0.5"]]
    assert schedule.advance(100) == []  # one episode, fewer than min_lesson_length (2)
    schedule.episodes(_ended([0.0, 0.0], [{"reached_goal": 0}, {"reached_goal": 1}]))
    assert schedule.advance(200) == ["curriculum: lesson 1 'l1' (reached_goal 0.5 >= 0.5) at global step 200: a 1 -> 2, "
                                     "b 5 -> 6"]  # the mean of the last 2 episodes
    assert schedule.message() == {"a": 2.0, "b": 6.0, "c": 0.5}
    assert schedule.scalars() == {"curriculum/a": 2.0, "curriculum/b": 6.0, "curriculum/c": 0.5, "curriculum/lesson": 1,
                                  "curriculum/lesson/a": 1, "curriculum/lesson/b": 1}
    # the next num_envs (2) episodes began under lesson 0: logged as such
    rows = schedule.episodes(_ended([0.0] * 3, [{}] * 3))
    assert rows == [[0, "1", "5", "0.5"], [0, "1", "5", "0.5"], [1, "2", "6", "0.5"]]
    state = schedule.state_dict()
    buf = io.BytesIO()
    torch.save(state, buf)  # the checkpoint holds it (loaded with weights_only)
    buf.seek(0)
    restored = curriculum.Schedule({"a": _lessons(1.0, 2.0), "b": _lessons(5.0, 6.0), "c": _lessons(0.5)}, 2, 1000)
    restored.load_state_dict(torch.load(buf, weights_only=True), "--resume R")
    assert restored.message() == {"a": 2.0, "b": 6.0, "c": 0.5} and restored.state_dict() == state
    with pytest.raises(EnvParamError, match="--resume R: the checkpoint's curriculum has"):
        curriculum.Schedule({"a": _lessons(1.0, 2.0, 3.0)}, 2, 1000).load_state_dict(state, "--resume R")
    # a criterion on a key no episode reports: said once, never advances
    schedule = curriculum.Schedule({"a": _lessons(1.0, 2.0, measure="success")}, 2, 1000, lines.append)
    for _ in range(2):
        schedule.episodes(_ended([1.0] * 100, [{}] * 100))
        assert schedule.advance(5) == []
    assert len([line for line in lines if "without a numeric get_info() key 'success'" in line]) == 1


def test_the_binary_takes_env_params_and_reports_info_means(headless_export):
    """--env_param on the binary: the defaults given explicitly play exactly as no flag (they draw nothing); the
    report gains the mean of each numeric get_info() key; bad values end the run with one line and exit 1."""
    base = [str(headless_export), "--fixed-fps", "60", "--env=jumper", "--agents=4", "--max_episode_steps=150",
            f"--policy={JUMPER_POLICY}", "--eval_episodes=8"]
    defaults = [f"--env_param={name}={value}" for name, value in
                {"gap_min": 0.6, "gap_max": 2.2, "rise_min": -0.6, "rise_max": 0.5, "size_min": 2.5, "size_max": 4.0}.items()]

    def report(*extra):
        result = subprocess.run(base + list(extra), capture_output=True, text=True, timeout=120)
        return result, next((json.loads(line)["eval"] for line in result.stdout.splitlines()
                             if line.startswith('{"eval"')), None)

    plain, with_defaults, hard = report()[1], report(*defaults)[1], report("--env_param=gap_min=3.2", "--env_param=gap_max=3.4")[1]
    assert plain["returns"] == with_defaults["returns"] and plain["lengths"] == with_defaults["lengths"]
    assert set(plain["info_means"]) == {"goals", "reached_goal"} and plain["env_params"] == {}
    assert 0 <= plain["info_means"]["reached_goal"] <= min(1, plain["info_means"]["goals"])
    assert hard["env_params"] == {"gap_min": 3.2, "gap_max": 3.4} and hard["returns"] != plain["returns"]
    for flag, said in [("--env_param=gapx=1", "unknown environment parameter 'gapx': this game declares gap_max, "),
                       ("--env_param=gap_max=9", "environment parameter gap_max=9 is out of its range [0.2, 4]"),
                       ("--env_param=gap_max=far", "--env_param=gap_max=far is not valid: give --env_param=NAME=NUMBER")]:
        result, _ = report(flag)
        assert result.returncode == 1 and f"rl_sync: error: {said}" in result.stderr, result.stderr[-500:]


def test_the_trainer_message_sets_values_from_each_agents_next_episode(headless_export):
    env = make_vec_env("jumper", num_instances=1, agents_per_instance=4, seed=5, max_episode_steps=20)
    try:
        env.reset(seed=5)
        assert env.env_info["env_params"]["gap_max"] == {"default": 2.2, "min": 0.2, "max": 4.0}
        assert env.call("env_param", "gap_max") == [2.2] * 4
        env.set_env_params({"gap_max": 3.0, "gap_min": {"uniform": [2.0, 2.9]}})
        assert env.call("env_param", "gap_max") == [2.2] * 4  # the episodes under way keep their course
        drawn = []
        for _ in range(3):  # three episodes of 20 steps: each agent draws a new gap_min for each
            for _ in range(20):
                env.step(env.action_space.sample())
            assert env.call("env_param", "gap_max") == [3.0] * 4
            drawn += env.call("env_param", "gap_min")
        assert len(set(drawn)) == 12 and all(2.0 <= g <= 2.9 for g in drawn), drawn
        os.kill(env.launcher.instances[0].pid, signal.SIGKILL)  # a crash: the new process gets the values again
        _, _, _, _, infos = env.step(env.action_space.sample())
        assert infos["instance_restarted"].all() and env.call("env_param", "gap_max") == [3.0] * 4
        env.set_env_params(agent_values=[{"gap_max": 2.5}, {}, {}, {"gap_max": 3.5}])  # per agent
        for _ in range(20):
            env.step(env.action_space.sample())
        assert env.call("env_param", "gap_max") == [2.5, 3.0, 3.0, 3.5]
        inst = env.launcher.instances[0]
        with pytest.raises(GodotConnectionError):  # a value out of range ends the game with one line
            inst.conn.request("env_params", timeout=10, values={"gap_max": 9.0})
        assert "rl_sync: error: environment parameter gap_max=9 is out of its range [0.2, 4]" in inst.log_tail(20)
    finally:
        env.close()


@pytest.mark.slow
def test_a_curriculum_advances_is_logged_and_resumed(headless_export, tmp_path, capsys):
    lessons = tmp_path / "lessons.toml"
    lessons.write_text('[[environment_parameters.gap_max.curriculum]]\nvalue = 2.2\n'
                       'completion_criteria = { measure = "progress", threshold = 0.4 }\n'
                       '[[environment_parameters.gap_max.curriculum]]\nvalue = 3.0\n')
    argv = ["--env-id", "jumper", "--agents-per-instance", "8", "--num-steps", "64", "--total-timesteps", "2560",
            "--eval-episodes", "0", "--checkpoint-every", "1", "--run-dir-root", str(tmp_path / "runs"),
            "--curriculum", str(lessons), "--env-param", "rise_max=uniform(0.2,0.5)"]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert "curriculum: lesson 1 'lesson 1' (progress 0.4 >= 0.4) at global step 1024: gap_max 2.2 -> 3" in capsys.readouterr().out
    rows = (run_dir / "episodes.csv").read_text().splitlines()
    assert rows[0] == "global_step,return,length,lesson,gap_max,rise_max"
    assert rows[1].endswith(',0,2.2,"uniform(0.2,0.5)"')
    # (an episode that ends after the change began under lesson 0; the first num_envs of them are logged as such)
    assert all(row.endswith((',0,2.2,"uniform(0.2,0.5)"', ',1,3,"uniform(0.2,0.5)"')) for row in rows[1:])
    scalars = read_scalars(run_dir)
    assert scalars["curriculum/gap_max"][:2] == [(512, pytest.approx(2.2)), (1024, 3.0)]  # logged after the change
    assert scalars["curriculum/lesson"][-1][1] == 1 and scalars["curriculum/rise_max"][-1][1] == pytest.approx(0.35)
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["curriculum"]["lesson"] == {"gap_max": 1, "rise_max": 0}
    args = json.loads((run_dir / "args.json").read_text())
    assert args["curriculum"] == str(lessons) and "--env-param 'rise_max=uniform(0.2,0.5)'" in args["command"]
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "3584"]) == 0  # the same lesson goes on
    out = capsys.readouterr().out
    assert "resuming" in out and "curriculum:" not in out
    assert (run_dir / "episodes.csv").read_text().splitlines()[: len(rows)] == rows  # kept, with their columns
    assert read_scalars(run_dir)["curriculum/lesson"][-1] == (3584, 1)


def test_refusals_before_training_and_envs_lists_parameters(headless_export, tmp_path, capsys):
    runs = tmp_path / "runs"
    base = ["--env-id", "jumper", "--total-timesteps", "2048", "--run-dir-root", str(runs)]
    for flags, said in [(["--env-param", "gap_max=uniform(1,9)"], "--env-param gap_max=uniform(1,9): "
                         "gap_max=uniform(1,9) is outside its declared range [0.2, 4]"),
                        (["--env-param", "speed=1"], "jumper has no environment parameter 'speed' (it declares: "
                         "gap_max, gap_min, rise_max, rise_min, size_max, size_min; `godot-ppo envs` lists them)")]:
        assert cli.main(["train", *base, *flags]) == 2
        assert said in capsys.readouterr().err
    assert not runs.exists()
    assert cli.main(["play", str(JUMPER_POLICY), "--env-param", "gap_max=0.1", "--seconds", "1"]) == 2
    assert "godot-ppo play: error: --env-param gap_max=0.1: gap_max=0.1 is outside its declared range" in capsys.readouterr().err
    plugin_game = GodotGame(GameExport(headless_export), "my_game", rl_sync=False)
    with pytest.raises(EnvParamError, match="--env-param g=1: .* is a game made with godot_rl_agents' plugin, which "
                                            "has no environment parameters"):
        check_params(plugin_game, {"g": [Value("constant", (1.0,))]}, {"g": "--env-param g=1"})
    page = (REPO / "docs" / "env_params.md").read_text()  # the page shows the curriculum file as it is
    assert "```toml\n" + (REPO / "docs" / "jumper_hard_curriculum.toml").read_text() + "```" in page
    assert game_commands.envs_main(["--env-id", "jumper"]) == 0
    out = capsys.readouterr().out
    assert "  environment parameters:\n    gap_max: default 2.2, range [0.2, 4]\n" in out
    assert "  agents per instance: 16 (the game's own choice; --agents may change it)\n" in out  # arenas from --agents


# The default runs recorded with the export of d385ddb, the commit before environment parameters (refresh with
# `python -c "import test_env_params as t; t.record_default_runs(BINARY)"` from tests/, BINARY an export of it);
# pong's run was recorded again when pong came to decide every 3 physics frames (issue 24, docs/games.md).
DEFAULT_RUNS = REPO / "tests" / "fixtures" / "env_params_default_runs.json"


def _listed_games(binary) -> list:
    listing = json.loads(next(line for line in subprocess.run(
        [str(binary), "--list_envs", "--quit"], capture_output=True, text=True, timeout=60).stdout.splitlines()
        if line.startswith('{"envs"')))
    return listing["envs"]


def _default_runs(binary, games) -> dict:
    """Each game's random play (--policy=random, seeded) and the pretrained jumper policy: returns and lengths."""
    runs = {}
    for name, policy in [*((env, "random") for env in games), ("jumper", str(JUMPER_POLICY))]:
        result = subprocess.run([str(binary), "--fixed-fps", "60", f"--env={name}", "--agents=4", "--env_seed=3",
                                 "--max_episode_steps=200", f"--policy={policy}", "--eval_episodes=8"],
                                capture_output=True, text=True, timeout=120)
        report = next(json.loads(line)["eval"] for line in result.stdout.splitlines() if line.startswith('{"eval"'))
        runs[f"{name} {Path(policy).name}"] = {"returns": report["returns"], "lengths": report["lengths"]}
    return runs


def record_default_runs(binary) -> None:
    DEFAULT_RUNS.write_text(json.dumps(_default_runs(binary, _listed_games(binary)), indent=1) + "\n")


def test_every_game_plays_its_defaults_as_before(headless_export):
    """Reading the parameters draws nothing: with their defaults every game plays as it did before it had them."""
    recorded = json.loads(DEFAULT_RUNS.read_text())
    # every game the fixture's export had (tag came later, with issue 23; forager, a camera game, needs a window
    # and came with issue 35), as it played then
    games = [game for game in _listed_games(headless_export) if f"{game} random" in recorded]
    assert "ball_chase" in games and "forager" not in games
    runs = _default_runs(headless_export, games)
    assert {name: runs.get(name) for name in recorded} == recorded


# ---------------------------------------------------------------------------------------------- fixed at start
def test_a_curriculum_whose_first_lesson_sets_vision_to_0_trains_forager_on_the_vector_observation(
        headless_export, tmp_path, monkeypatch, capsys):
    """The values in force at start (a curriculum's first lesson, as --env-param's constants) go on the binary's
    command line, so forager decides its observation with them: 11 vector values, no camera, headless. Before, the
    env_params message came after the game had chosen its camera (3 + 36 x 36 x 3 values, run windowed)."""
    monkeypatch.delenv("DISPLAY", raising=False)  # a camera would need a window: the vector baseline needs none
    lessons = tmp_path / "vision.toml"
    lessons.write_text('[[environment_parameters.vision.curriculum]]\nvalue = 0\n'
                       'completion_criteria = { measure = "progress", threshold = 0.5 }\n'
                       '[[environment_parameters.vision.curriculum]]\nvalue = 0\n'
                       '[[environment_parameters.target_ahead.curriculum]]\nvalue = 1\n'
                       'completion_criteria = { measure = "progress", threshold = 0.5 }\n'
                       '[[environment_parameters.target_ahead.curriculum]]\nvalue = 0.5\n')
    root = tmp_path / "runs"
    assert train.main(["--env-id", "forager", "--curriculum", str(lessons), "--num-instances", "1",
                       "--agents-per-instance", "2", "--num-steps", "16", "--total-timesteps", "64",
                       "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    assert "lesson 1" in capsys.readouterr().out  # target_ahead's lesson moved on; vision's value stayed 0
    (run_dir,) = run_dirs(root)
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    assert ckpt["observation_space"]["shape"] == [11], ckpt["observation_space"]
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy.get("image") is None and policy["observation_size"] == 11
    log = (run_dir / "logs" / "instance_0.log").read_text()
    assert "--env_param=vision=0.0" in log and "--env_param=target_ahead=1.0" in log and "windowed" not in log


@pytest.mark.parametrize("flags, said", [
    (["--env-param", "vision=uniform(0,1)"], "--env-param vision=uniform(0,1): vision=uniform(0,1) is a sampler, but "
     "forager fixes vision when its agents start (it shapes what they observe), so it cannot vary by episode: give it "
     "one value, e.g. --env-param vision=0"),
    (["--env-param", "vision=gaussian(0.5,0.2)"], "vision=gaussian(0.5,0.2) is a sampler, but forager fixes vision"),
    ("later", "vision.toml:1: vision goes from 1 in lesson 0 to 0 in lesson 1, but forager fixes vision when its agents "
     "start (it shapes what they observe), so no later lesson can change it: give it one value in every lesson, or use "
     "--env-param vision=1 and drop it from the curriculum"),
])
def test_a_sampler_or_a_later_lesson_on_a_parameter_fixed_at_start_is_refused_in_one_line(
        headless_export, tmp_path, capsys, flags, said):
    if flags == "later":
        lessons = tmp_path / "vision.toml"
        lessons.write_text('[[environment_parameters.vision.curriculum]]\nvalue = 1\n'
                           'completion_criteria = { measure = "progress", threshold = 0.5 }\n'
                           '[[environment_parameters.vision.curriculum]]\nvalue = 0\n')
        flags = ["--curriculum", str(lessons)]
    root = tmp_path / "runs"
    assert cli.main(["train", "--env-id", "forager", *flags, "--run-dir-root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err, err
    assert not root.exists()  # refused before any game started or folder was made


def test_the_game_refuses_a_message_that_changes_a_parameter_fixed_at_start(headless_export, capsys):
    """The game's side (env_params.gd): a message may repeat a fixed parameter's value in force, never change it;
    `godot-ppo envs` says which parameters are fixed."""
    env = make_vec_env("forager", num_instances=1, agents_per_instance=2, extra_args=["--env_param=vision=0"])
    try:
        assert env.env_info["env_params"]["vision"] == {"default": 1.0, "min": 0.0, "max": 1.0, "fixed": True}
        assert env.single_observation_space.shape == (11,)
        env.set_env_params({"vision": 0.0, "target_ahead": 0.5})  # the value in force: taken
        inst = env.launcher.instances[0]
        with pytest.raises(GodotConnectionError):  # another value ends the game with one line
            inst.conn.request("env_params", timeout=10, values={"vision": {"uniform": [0.0, 1.0]}})
        assert ("rl_sync: error: environment parameter vision is fixed when the game starts (it shapes what the agents "
                "observe), at 0: set it with --env_param=vision=VALUE") in inst.log_tail(20)
    finally:
        env.close()
    assert game_commands.envs_main(["--env-id", "forager"]) == 0
    assert "    vision: default 1, range [0, 1], fixed at start (--env-param only)\n" in capsys.readouterr().out
