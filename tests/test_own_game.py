"""Bring your own game: README's "Train your own game" run as written, and the bad inputs an outside game can give.

The tutorial lives in README.md, in its shortest working form (docs/own_game.md says more about each step; its
commands are checked by tests/test_docs.py). The tutorial test builds the README's game in a temporary folder (not in
godot_project/), with the addon copied in, then runs the README's commands in order: export it with
`godot-ppo export --project`, train it with `godot-ppo train --env-path`, evaluate the run's policy.json inside the
game's own export, and watch it with `godot-ppo play`. It checks that the trained policy scores at least halfway from
random play to the best possible return, and that no process is left.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers import FAKE_GAME, REPO, godot_ppo_child, processes_mentioning, read_scalars
from python_trainer.tools.export import ExportError, export
from python_trainer.envs.game import GameError, resolve_env
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.failures import InstanceStartError

BEST_RETURN = 1.0  # every walker reaches its goal (it always can within the time limit)


def tutorial() -> tuple[dict, list[str]]:
    """({path: text} of the tutorial's files, [bash commands]) from README.md's "Train your own game" section."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Train your own game"):]
    section = section[:section.index("\n## ", 3)]
    files = {m.group(1): m.group(2) + "\n" for m in
             re.finditer(r"\*\*`([^`]+)`\*\*\n\n```\w*\n(.*?)\n```", section, re.S)}
    commands = []
    for block in re.findall(r"```bash\n(.*?)\n```", section, re.S):
        commands += [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    return files, commands


@pytest.mark.slow
def test_readme_tutorial_trains_and_plays_an_outside_game(tmp_path, headless_export):
    files, commands = tutorial()
    assert set(files) == {"my_game/project.godot", "my_game/walker.tscn", "my_game/walker_agent.gd"}
    assert [c.split()[0] for c in commands][:2] == ["mkdir", "godot-ppo"]
    (tmp_path / "godot_project").symlink_to(REPO / "godot_project")  # the README copies the addon from here
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("DISPLAY", None)  # play starts its own Xvfb
    outputs = []
    for command in commands:
        if command.startswith("godot-ppo export"):  # the files of step 2 exist before the export
            for rel, text in files.items():
                (tmp_path / rel).write_text(text)
        t0 = time.monotonic()
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=240)
        outputs.append(proc.stdout)
        assert proc.returncode == 0, f"`{command}` failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        print(f"{time.monotonic() - t0:6.1f} s  {command}")
    assert not (tmp_path / "godot_project" / "my_game").exists()

    # The export says the games it holds; the game's name and agent count came from the binary, which says that the
    # scene's four walkers are its own (--agents does not change them).
    export_out = outputs[[c.split()[:2] for c in commands].index(["godot-ppo", "export"])]
    assert f"exported headless: {tmp_path / 'my_game/exports/headless/walker.x86_64'} (games: walker)" in export_out
    envs_out = outputs[[c.split()[:2] for c in commands].index(["godot-ppo", "envs"])]
    assert "walker (default)" in envs_out
    assert "agents per instance: 4 (fixed by the game: --agents does not change it)" in envs_out
    (run_dir,) = (tmp_path / "runs").glob("walker__tutorial__*")
    args = json.loads((run_dir / "args.json").read_text())
    assert args["num_envs_resolved"] == 8  # 2 instances x the scene's 4 walkers
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy["env"] == "walker" and policy["action_keys"] == [{"key": "move", "action_type": "discrete", "size": 3}]
    # The controller's get_info() of ended episodes reached TensorBoard: a success rate that rose with training.
    scalars = read_scalars(run_dir)
    success = [v for _, v in scalars["episode_info/reached_goal"]]
    assert set(success) <= {0.0, 1.0} and np.mean(success[-200:]) > np.mean(success[:200])

    # Random play, measured on the same export through the vector env.
    from python_trainer import make_vec_env

    exported = tmp_path / "my_game" / "exports" / "headless" / "walker.x86_64"
    envs = make_vec_env(env_path=exported, num_instances=1, seed=5, run_dir=tmp_path / "random")
    try:
        assert envs.env_id == "walker" and envs.num_envs == 4
        envs.reset(seed=5)
        returns = []
        while len(returns) < 200:
            _, _, _, _, infos = envs.step(envs.action_space.sample())
            if "_episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
    finally:
        envs.close()
    random_return = float(np.mean(returns))

    eval_line = next(line for out in outputs for line in out.splitlines() if line.startswith('{"eval"'))
    trained = json.loads(eval_line)["eval"]
    assert trained["episodes"] == 100
    halfway = (random_return + BEST_RETURN) / 2
    print(f"random {random_return:.3f}, trained {trained['mean_return']:.3f}, halfway {halfway:.3f}")
    assert trained["mean_return"] >= halfway

    play_out = outputs[-1]
    assert "playing" in play_out and "walker" in play_out
    assert processes_mentioning(str(tmp_path)) == []  # no game, export or trainer started there


# ---------------------------------------------------------------------------------------------- bad input
def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("case", ["missing", "folder", "not_executable", "exits", "silent"])
def test_a_path_that_is_not_a_game_gets_a_one_line_error(tmp_path, case):
    path = {
        "missing": tmp_path / "nope.x86_64",
        "folder": tmp_path,
        "not_executable": tmp_path / "game.x86_64",
        "exits": write_script(tmp_path / "exits.sh", "echo hello\nexit 0\n"),
        "silent": write_script(tmp_path / "silent.sh", "exec sleep 600\n"),
    }[case]
    if case == "not_executable":
        path.write_text("not a program")
    t0 = time.monotonic()
    with pytest.raises(GameError) as ei:
        resolve_env(None, path, timeout=2)
    assert time.monotonic() - t0 < 10
    message = str(ei.value)
    assert "\n" not in message and str(path) in message
    expected = {"missing": "no such file", "folder": "a folder", "not_executable": "chmod +x",
                "exits": "does not list its games", "silent": "did not answer --list_envs"}[case]
    assert expected in message
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(path) in " ".join(p.info["cmdline"] or [])]


def test_train_names_a_bad_env_path_in_one_line_and_creates_no_run(tmp_path):
    result = godot_ppo_child("train", "--env-path", str(tmp_path / "nope.x86_64"), "--run-dir-root",
                             str(tmp_path / "runs"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "godot-ppo train: error:" in result.stderr
    assert "no such file" in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_program_that_lists_games_but_never_connects_times_out_and_is_ended(tmp_path):
    script = write_script(tmp_path / "mute.sh", 'case "$*" in *--list_envs*) echo \'{"envs": ["mute"], "default": "mute"}\';'
                                                 ' exit 0;; esac\nexec sleep 600\n')
    game = resolve_env(None, script)
    assert game.env == "mute"
    launcher = InstanceLauncher(game, LaunchOptions(run_dir=tmp_path, connect_timeout=2))
    t0 = time.monotonic()
    with pytest.raises(InstanceStartError, match="timed out after 2s waiting for instance 0"):
        launcher.start()
    assert time.monotonic() - t0 < 10
    assert launcher.instances[0].proc.poll() is not None


def test_envs_names_a_game_that_does_not_start_in_one_line_at_the_end(tmp_path):
    script = write_script(tmp_path / "mute.sh", 'case "$*" in *--list_envs*) echo \'{"envs": ["mute"], "default": "mute"}\';'
                                                 ' exit 0;; esac\nexec sleep 600\n')
    result = godot_ppo_child("envs", "--env-path", str(script), "--connect-timeout", "2")
    assert result.returncode == 1 and result.stdout.startswith(f"{script}: 1 game(s), default mute")
    assert result.stderr.startswith("godot-ppo envs: error: cannot start mute: timed out after 2s waiting for "
                                    "instance 0") and result.stderr.count("\n") == 1, result.stderr


def test_unknown_env_id_names_the_games_of_the_binary(headless_export):
    with pytest.raises(GameError, match=r"unknown env id 'volleyball': neither a game in --env-path .* \(its games: ball_chase, cart_pole, .*jumper.*sparse_goal.*\)"):
        resolve_env("volleyball", headless_export)
    result = godot_ppo_child("envs", "--env-path", str(headless_export), "--env-id", "volleyball")
    assert result.returncode == 2 and re.search("its games: ball_chase, .*jumper, .*sparse_goal", result.stderr)


def test_spaces_that_differ_between_instances_are_refused(tmp_path):
    from python_trainer.envs.vec_env import make_vec_env

    with pytest.raises(GameError, match="every instance of a game must have the same policies, observation and action spaces"):
        make_vec_env("ball_chase", num_instances=2, agents_per_instance=2, binary=[sys.executable, str(FAKE_GAME)],
                     extra_args=["--fake_obs=by_seed"], run_dir=tmp_path)


def test_a_game_that_ignores_agents_sets_num_envs(tmp_path):
    from python_trainer.envs.vec_env import make_vec_env

    fake = [sys.executable, str(FAKE_GAME)]
    env = make_vec_env("ball_chase", num_instances=2, agents_per_instance=3, binary=fake,
                       extra_args=["--fake_fixed_agents=5"], run_dir=tmp_path)
    try:
        assert env.num_envs == 10 and env.agent_counts == [5, 5]
        obs, _ = env.reset()
        assert obs.shape[0] == 10
        env.step(env.action_space.sample())
    finally:
        env.close()
    with pytest.raises(GameError, match="simulates 5 agents per instance"):
        make_vec_env("ball_chase", num_envs=6, num_instances=2, binary=fake, extra_args=["--fake_fixed_agents=5"],
                     run_dir=tmp_path / "b")


def test_envs_says_whether_agents_changes_a_games_count(tmp_path, capsys):
    """A scene with its own set of agents (env_info's agents_from_flag false) is said to keep it."""
    from python_trainer.tools.game_commands import envs_main

    for i, (flag, said) in enumerate([("", "16 (the game's own choice; --agents may change it)"),
                                      ("--fake_fixed_agents=1", "1 (fixed by the game: --agents does not change it)")]):
        game = write_script(tmp_path / f"game{i}.sh", f'exec {sys.executable} {FAKE_GAME} {flag} "$@"\n')
        assert envs_main(["--env-path", str(game)]) == 0
        assert f"  agents per instance: {said}\n" in capsys.readouterr().out


def test_export_of_a_folder_without_project_godot(tmp_path):
    with pytest.raises(ExportError, match="has no project.godot: give the folder of a Godot 3 project"):
        export(tmp_path, tmp_path / "out", quiet=True)
    result = godot_ppo_child("export", "--project", str(tmp_path))
    assert result.returncode == 1 and result.stderr.count("\n") == 1


@pytest.mark.slow
def test_export_failure_shows_godots_error_and_user_presets_are_left_alone(tmp_path):
    files, _ = tutorial()
    project = tmp_path / "my_game"
    project.mkdir()
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    shutil.copytree(REPO / "godot_project" / "addons" / "rl_sync", project / "addons" / "rl_sync")
    # A user's own presets without ours: named, not rewritten.
    theirs = '[preset.0]\n\nname="Windows"\nplatform="Windows Desktop"\n\n[preset.0.options]\n\n'
    (project / "export_presets.cfg").write_text(theirs)
    with pytest.raises(ExportError, match="no Linux/X11 preset whose custom template is /usr/bin/godot3-server"):
        export(project, tmp_path / "out", quiet=True)
    assert (project / "export_presets.cfg").read_text() == theirs
    # Presets whose template is missing: Godot's own error is shown.
    from python_trainer.tools.export import presets_cfg

    (project / "export_presets.cfg").write_text(presets_cfg().replace("/usr/bin/godot3-server", "/nowhere/godot3-server"))
    kept = tmp_path / "out" / "headless" / "walker.x86_64"  # the last good export, which a failed one leaves alone
    kept.parent.mkdir(parents=True)
    kept.write_text("the last good export")
    kept.with_suffix(".pck").write_text("its pack")
    with pytest.raises(ExportError, match=r"failed, exit code \d+; Godot said:\n.*") as ei:
        export(project, tmp_path / "out", kinds=("headless",), quiet=True)
    assert "/nowhere/godot3-server" in str(ei.value) or "template" in str(ei.value).lower()
    assert kept.read_text() == "the last good export" and kept.with_suffix(".pck").read_text() == "its pack"
    assert sorted(p.name for p in kept.parent.iterdir()) == ["walker.pck", "walker.x86_64"]  # no scratch left


def test_our_presets_file_is_the_one_export_writes():
    from python_trainer.tools.export import presets_cfg

    assert (REPO / "godot_project" / "export_presets.cfg").read_text() == presets_cfg("tests/*")


def test_a_damaged_pck_is_named_at_once(tmp_path, headless_export):
    """A truncated .pck makes Godot fall back to its project manager, which never exits: the listing must not wait
    out the timeout, and the error quotes Godot's own complaint."""
    binary = tmp_path / headless_export.name
    shutil.copy2(headless_export, binary)
    binary.with_suffix(".pck").write_bytes(headless_export.with_suffix(".pck").read_bytes()[:20000])
    t0 = time.monotonic()
    with pytest.raises(GameError, match="does not list its games.*Corrupted header"):
        resolve_env(None, binary)
    assert time.monotonic() - t0 < 10


@pytest.mark.slow
def test_a_projects_export_without_out_goes_to_its_own_exports_folder(tmp_path):
    """`godot-ppo export --project DIR` alone writes DIR/exports/, never this repository's exports/."""
    files, _ = tutorial()
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    shutil.copytree(REPO / "godot_project" / "addons" / "rl_sync", tmp_path / "my_game" / "addons" / "rl_sync")
    before = sorted(p.name for p in (REPO / "exports").rglob("*"))
    written = export(tmp_path / "my_game", kinds=("headless",), quiet=True)
    assert written["headless"] == tmp_path / "my_game" / "exports" / "headless" / "walker.x86_64"
    assert written["headless"].is_file() and sorted(p.name for p in (REPO / "exports").rglob("*")) == before
    assert sorted(p.name for p in written["headless"].parent.iterdir()) == ["walker.pck", "walker.x86_64"]


def test_a_copy_of_this_multi_game_project_exports_and_lists_its_games(tmp_path, capsys):
    """A project with a game registry (a Dictionary over several lines in project.godot) exports under its name."""
    project = tmp_path / "copy"
    shutil.copytree(REPO / "godot_project", project, ignore=shutil.ignore_patterns(".import"))
    written = export(project, tmp_path / "out", kinds=("headless",))
    assert written["headless"].name == "rl_games.x86_64"
    assert (f"exported headless: {written['headless']} (games: ball_chase, cart_pole, forager, jumper, memory, "
            "pong, sparse_goal, tag)\n") in capsys.readouterr().out  # the file keeps the project's name; the games, listed
    game = resolve_env(None, written["headless"])
    assert game.env == "ball_chase"
