"""Training with no export: `godot-ppo train --project DIR` runs the game from its folder (its assets imported once),
and `godot-ppo train --editor` trains the game that a person starts with Play in the Godot editor.

Both train README's walker (the outside-game tutorial, built in a temporary folder from README.md as
tests/test_own_game.py builds it, with an icon for the import to do). The editor's Play runs the editor binary; here
`godot3-runner --path DIR` under Xvfb stands in for it, on a free port given in $RL_SYNC_EDITOR_PORT. The fake game
(tests/fake_game.py) plays the editor's game where the protocol is the point: a game closed mid-run, Ctrl-C, a stray
client. A fake `godot3-server` stands in for Godot's editor where only the import's bookkeeping is.
"""

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers import (FAKE, REPO, end, free_port, processes_mentioning, read_line, run_dirs, train_argv, wait_for,
                     wait_gone)
from python_trainer import cli
from python_trainer.envs import project_import
from python_trainer.envs.game import GameError, resolve_env
from test_own_game import tutorial, write_script

# A 1x1 PNG: the project's icon, so that the import has something to do.
ICON = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5Erk"
                        "Jggg==")
BUDGET = ["--total-timesteps", "1024", "--num-steps", "64", "--eval-episodes", "2"]


def walker_project(root: Path, icon: bool = True) -> Path:
    """README's walker in ROOT/my_game, with the addon copied in (and an icon in project.godot)."""
    files, _ = tutorial()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    project = root / "my_game"
    shutil.copytree(REPO / "godot_project" / "addons" / "rl_sync", project / "addons" / "rl_sync")
    if icon:
        (project / "icon.png").write_bytes(ICON)
        settings = (project / "project.godot").read_text().replace("[application]\n", "[application]\n\n"
                                                                    'config/icon="res://icon.png"\n')
        (project / "project.godot").write_text(settings)
    return project


def the_error(code: int, err: str) -> str:
    """The command's one error line (and nothing else said as an error)."""
    errors = [line for line in err.splitlines() if ": error:" in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err[-3000:]
    return errors[0]


# ---------------------------------------------------------------------------------------------- --project
@pytest.mark.slow
def test_train_project_trains_the_walker_from_its_folder_with_no_export(tmp_path, capsys):
    project = walker_project(tmp_path)
    runs = project / "runs"  # as when training from the project's folder: Godot's editor must not import it
    result = subprocess.run(train_argv(runs, "--project", str(project), "--num-instances", "2", *BUDGET), cwd=REPO,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert "importing" in result.stderr and list(project.glob(".import/icon.png-*.stex"))
    (run_dir,) = run_dirs(runs)
    assert run_dir.name.startswith("walker__ppo__1__") and (run_dir / "model.pt").is_file()
    args = json.loads((run_dir / "args.json").read_text())
    assert args["env_path"] == str(project.resolve()) and args["num_envs_resolved"] == 8
    log = (run_dir / "logs" / "instance_0.log").read_text()
    assert f"godot3-server --path {project.resolve()} --env=walker" in log
    assert not list(project.rglob("*.pck")) and not (project / "exports").exists()
    assert processes_mentioning(str(tmp_path)) == []
    # The import is kept, and the run's episodes.csv and learning curve are no assets: the next start of the game from
    # its folder runs no editor.
    assert (runs / ".gdignore").is_file() and (run_dir / "episodes.csv").is_file()
    capsys.readouterr()
    assert resolve_env(None, project).env == "walker"
    assert "importing" not in capsys.readouterr().err


def fake_editor(tmp_path: Path, body: str = "") -> Path:
    """A folder holding a `godot3-server` that notes each call in CALLS, then runs ``body`` (default: an import that
    went well, saying what Godot's editor says when it finds no such preset)."""
    bin_dir = tmp_path / "fake_bin"
    bin_dir.mkdir()
    write_script(bin_dir / "godot3-server", f'echo "$@" >> {tmp_path / "calls"}\n' + (
        body or 'echo "ERROR: _fs_changed: Invalid export preset name: $4."\nexit 1\n'))
    return bin_dir


def calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_import_runs_once_and_again_only_for_what_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_editor(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    project = walker_project(tmp_path, icon=False)
    events = []
    assert not project_import.ensure_imported(project, report=events.append) and calls(tmp_path) == 0, \
        "a project with no assets and no class names needs no import"
    (project / "icon.png").write_bytes(ICON)
    assert project_import.ensure_imported(project, report=events.append) and calls(tmp_path) == 1
    assert f"--path {project} --export" in (tmp_path / "calls").read_text() and "importing" in events[0]
    assert not project_import.ensure_imported(project) and calls(tmp_path) == 1, "up to date: no second import"
    os.utime(project / "icon.png", ns=(1, 1))  # an asset changed
    assert project_import.ensure_imported(project) and calls(tmp_path) == 2
    (project / "icon.png.import").write_text("[params]\n")  # its import settings changed
    assert project_import.ensure_imported(project) and calls(tmp_path) == 3
    (project / "helper.gd").write_text("extends Node\nclass_name Helper\n")  # a class for project.godot's list
    assert project_import.ensure_imported(project) and calls(tmp_path) == 4
    # (this fake editor never registers it: the stamp says so, and the same missing class asks for no new import)
    assert not project_import.ensure_imported(project) and calls(tmp_path) == 4
    shutil.rmtree(project / ".import")
    assert project_import.ensure_imported(project) and calls(tmp_path) == 5
    # A run folder in the project (training from its folder) holds a CSV and a PNG, which Godot's editor would import
    # (and fail on the CSV): its root is kept out of the project.
    (project / "runs" / "walker__ppo__1__1").mkdir(parents=True)
    (project / "runs" / "walker__ppo__1__1" / "episodes.csv").write_text("global_step,return,length\n")
    project_import.keep_out_of_projects(project / "runs")
    assert (project / "runs" / ".gdignore").is_file()
    assert not project_import.ensure_imported(project) and calls(tmp_path) == 5
    project_import.keep_out_of_projects(tmp_path / "elsewhere")  # not in a project: left alone
    assert not (tmp_path / "elsewhere").exists()


def test_an_import_that_does_not_finish_is_ended_and_named_in_one_line(tmp_path, monkeypatch):
    pid_file = tmp_path / "editor.pid"
    bin_dir = fake_editor(tmp_path, f"echo $$ > {pid_file}\nexec sleep 600\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(project_import, "IMPORT_TIMEOUT_S", 1)
    project = walker_project(tmp_path)
    with pytest.raises(GameError, match=r"did not finish within 1 s \(ended it\): open .*my_game once in the Godot 3 "
                                        "editor") as ei:
        resolve_env(None, project)
    assert "\n" not in str(ei.value)
    assert wait_gone([int(pid_file.read_text())], timeout=5) == []
    assert not (project / project_import.STAMP).exists()


def test_train_project_names_a_folder_that_is_no_project_or_has_no_addon(tmp_path, capsys):
    def train(folder):
        code = cli.main(["train", "--project", str(folder), "--run-dir-root", str(tmp_path / "runs")])
        return the_error(code, capsys.readouterr().err)

    assert "a folder with no project.godot in it" in train(tmp_path)
    project = walker_project(tmp_path, icon=False)
    shutil.rmtree(project / "addons")
    line = train(project)
    assert "a Godot project without addons/rl_sync/sync.gd: copy this repository's godot_project/addons/rl_sync" in line
    assert not (tmp_path / "runs").exists()


def test_an_asset_godot_cannot_import_is_named(tmp_path, capsys):
    project = walker_project(tmp_path, icon=False)
    (project / "broken.png").write_text("not a PNG")
    code = cli.main(["train", "--project", str(project), "--run-dir-root", str(tmp_path / "runs")])
    line = the_error(code, capsys.readouterr().err)
    assert "Godot could not import res://broken.png" in line and "fix or remove the file" in line
    assert not (project / project_import.STAMP).exists() and processes_mentioning(str(project)) == []


# ---------------------------------------------------------------------------------------------- --editor
def editor_trainer(runs: Path, port: int, *flags: str) -> subprocess.Popen:
    """`godot-ppo train --editor --port PORT FLAGS`, its stderr in its stdout, once it says to press Play."""
    proc = subprocess.Popen(train_argv(runs, "--editor", "--port", str(port), *flags), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    line = read_line(proc, b"press Play in the Godot editor", timeout=60)
    assert f"127.0.0.1:{port}".encode() in line
    return proc


@pytest.mark.slow
def test_train_editor_trains_the_walker_that_play_starts(tmp_path):
    from python_trainer.envs.xvfb import Xvfb

    project = walker_project(tmp_path)
    project_import.ensure_imported(project)  # the editor imports a project when it opens it
    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, *BUDGET)
    game = None
    try:
        # A client that connects first and says nothing cannot hold up the game's one look (0.5 s) at the port.
        with Xvfb(tmp_path / "xvfb.log") as xvfb, socket.create_connection(("127.0.0.1", port)):
            env = dict(os.environ, DISPLAY=xvfb.start(), RL_SYNC_EDITOR_PORT=str(port))
            game = subprocess.Popen(["godot3-runner", "--path", str(project)], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            out, _ = trainer.communicate(timeout=120)
            game_out, _ = game.communicate(timeout=30)  # the trainer's "close" ends the game
    finally:
        end(trainer)
        if game is not None:
            end(game)
    out = out.decode()
    assert trainer.returncode == 0, out[-3000:]
    assert "game walker: run by the Godot editor, 4 agents" in out and "global_step=1024" in out
    assert game.returncode == 0, game_out[-3000:]
    assert f"rl_sync: training with the trainer on 127.0.0.1:{port}" in game_out
    assert "rl_sync: the trainer closed the session" in game_out
    (run_dir,) = run_dirs(runs)
    assert run_dir.name.startswith("walker__ppo__1__") and (run_dir / "model.pt").is_file()
    assert json.loads((run_dir / "args.json").read_text())["editor"] is True
    assert processes_mentioning(str(tmp_path)) == []


def test_closing_the_editors_game_stops_training_with_a_checkpoint(tmp_path):
    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, "--total-timesteps", "100000", "--num-steps", "16")
    game = None
    try:
        with socket.create_connection(("127.0.0.1", port)):  # a stray client that says nothing: refused
            pass
        game = subprocess.Popen([*FAKE, f"--port={port}", "--env=ball_chase", "--fake_mode=crash_after=100",
                                 "--agents=2"])
        out, _ = trainer.communicate(timeout=60)
        assert game.wait(timeout=10) != 0  # it crashed, as a closed window ends the game
    finally:
        end(trainer)
        if game is not None:
            end(game)
    out = out.decode()
    assert trainer.returncode == 0, out[-3000:]
    assert "refused a connection on 127.0.0.1" in out and "still waiting for Play" in out
    (run_dir,) = run_dirs(runs)
    assert "the editor's game ball_chase" in out and "stopped (its window closed, or Stop pressed" in out
    saved = re.search(r"checkpoint at global step (\d+) \(the last completed update\) in (\S+);", out)
    assert saved and int(saved.group(1)) > 0 and Path(saved.group(2)) == run_dir / "checkpoint.pt", out
    assert f"continue with: godot-ppo train --resume {run_dir}" in out and "error" not in out.lower()
    assert (run_dir / "checkpoint.pt").is_file()


@pytest.mark.slow
def test_ctrl_c_stops_editor_training_with_a_checkpoint_and_the_game_quits(tmp_path):
    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, "--total-timesteps", "100000", "--num-steps", "16", "--checkpoint-every", "1")
    game = None
    try:
        game = subprocess.Popen([*FAKE, f"--port={port}", "--env=ball_chase", "--agents=2"])
        wait_for(lambda: list(runs.glob("*/checkpoint.pt")), 60, "the first update's checkpoint", proc=trainer)
        trainer.send_signal(signal.SIGINT)
        out, _ = trainer.communicate(timeout=60)
        assert game.wait(timeout=10) == 0  # it was sent "close"
    finally:
        end(trainer)
        if game is not None:
            end(game)
    assert trainer.returncode == 130, out[-3000:]
    out = out.decode()
    (run_dir,) = run_dirs(runs)
    assert "interrupted by SIGINT: checkpoint at global step" in out and (run_dir / "checkpoint.pt").is_file()


def test_editor_flags_that_would_start_games_are_refused_before_any_port_opens(tmp_path, capsys):
    def train(*flags):
        code = cli.main(["train", *flags, "--run-dir-root", str(tmp_path / "runs")])
        return the_error(code, capsys.readouterr().err)

    line = train("--editor", "--num-instances", "2")
    assert "--editor trains the one game that Play starts in the Godot editor" in line and "drop --num-instances" in line
    assert "drop --env-path" in train("--editor", "--project", str(tmp_path))
    assert "drop --watch" in train("--editor", "--watch")
    assert "--port is for training from the Godot editor: add --editor" in train("--port", "12345")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        line = train("--editor", "--port", str(taken.getsockname()[1]))
    assert "is taken on 127.0.0.1" in line and "rl_sync/editor_port" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_godot_rls_own_env_drives_the_game_run_from_its_folder(tmp_path):
    """godot-rl's GodotEnv with no env_path waits for the editor's Play, as godot-rl's own editor training does: the
    game run from its folder with no flag connects there with no token, and is stepped and closed by it."""
    from godot_rl.core.godot_env import GodotEnv

    project = walker_project(tmp_path, icon=False)
    port = free_port()
    made = {}
    waiting = threading.Thread(target=lambda: made.update(env=GodotEnv(env_path=None, port=port)), daemon=True)
    waiting.start()
    wait_for(lambda: any(c.laddr.port == port and c.status == psutil.CONN_LISTEN
                         for c in psutil.net_connections("tcp4")), 30, f"godot-rl's GodotEnv listening on {port}")
    game = subprocess.Popen(["godot3-server", "--path", str(project)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, RL_SYNC_EDITOR_PORT=str(port)))
    try:
        waiting.join(30)
        env = made["env"]
        obs, _ = env.reset()
        assert len(obs) == 4 and len(obs[0]["obs"]) == 2
        rng, ended = np.random.default_rng(0), 0
        for _ in range(40):  # godot-rl's actions: one array per action key, one value per agent
            obs, reward, done, truncated, info = env.step([rng.integers(0, 3, size=4)])
            ended += sum(done)
        assert len(reward) == 4 and ended >= 4, "every walker's first episode ends within its 30-step limit"
        env.close()
        game_out, _ = game.communicate(timeout=15)
    finally:
        end(game)
    assert game.returncode == 0 and "rl_sync: training with the trainer on 127.0.0.1" in game_out, game_out[-2000:]


def test_an_editor_game_closed_before_the_first_update_is_a_fault_and_leaves_no_run_folder(tmp_path):
    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, "--total-timesteps", "100000", "--num-steps", "16")
    game = None
    try:  # it dies at its first action, as a game killed at once
        game = subprocess.Popen([*FAKE, f"--port={port}", "--env=ball_chase", "--fake_mode=crash_after=0", "--agents=2"])
        out, _ = trainer.communicate(timeout=60)
        assert game.wait(timeout=10) != 0
    finally:
        end(trainer)
        if game is not None:
            end(game)
    out = out.decode()
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert trainer.returncode == 1 and len(errors) == 1, out[-3000:]
    assert "the editor's game closed before the first update" in errors[0] and "press Play" in errors[0]
    assert "nothing to save" not in out and "checkpoint" not in out and run_dirs(runs) == []


def test_a_second_game_pressing_play_is_told_the_trainer_is_busy(tmp_path):
    project = walker_project(tmp_path, icon=False)
    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, "--total-timesteps", "100000", "--num-steps", "16")
    first = second = None
    try:
        first = subprocess.Popen([*FAKE, f"--port={port}", "--env=ball_chase", "--agents=2"])
        read_line(trainer, b"game ball_chase: run by the Godot editor", timeout=60)
        second = subprocess.Popen(["godot3-server", "--path", str(project)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=dict(os.environ, RL_SYNC_EDITOR_PORT=str(port)))
        line = read_line(second, b"rl_sync: human play", timeout=30).decode()
        read_line(trainer, b"global_step=", timeout=90)  # it trains on: an update done, so a checkpoint to keep
        trainer.send_signal(signal.SIGINT)
        out, _ = trainer.communicate(timeout=60)
        assert first.wait(timeout=10) == 0  # the game it trained was sent "close"
    finally:
        for proc in (trainer, first, second):
            if proc is not None:
                end(proc)
    assert f"the trainer on 127.0.0.1:{port} is training another game; stop that training first" in line, line
    assert trainer.returncode == 130 and b"interrupted by SIGINT: checkpoint at global step" in out, out[-3000:]


def test_strangers_on_the_editor_port_are_held_within_its_bounds_and_the_game_still_trains(tmp_path):
    """40 connections that each announce the largest greeting and send 60 MB: at most EDITOR_CONNECTIONS are held
    at once (a new one closes the oldest), each buffering at most HANDSHAKE_BYTES; then the game connects and trains."""
    from python_trainer.base.bounds import EDITOR_CONNECTIONS, HANDSHAKE_BYTES

    port, runs = free_port(), tmp_path / "runs"
    trainer = editor_trainer(runs, port, "--total-timesteps", "64", "--num-steps", "16", "--eval-episodes", "0")
    me, game = psutil.Process(trainer.pid), None

    def stranger():
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(HANDSHAKE_BYTES.value.to_bytes(4, "little"))
                for _ in range(60):
                    sock.sendall(bytes(2**20))
        except OSError:  # closed by the trainer: refused
            pass

    try:
        base = me.memory_info().rss
        senders = [threading.Thread(target=stranger, daemon=True) for _ in range(40)]
        for t in senders:
            t.start()
        peak_rss = peak_held = 0
        while any(t.is_alive() for t in senders):
            held = [c for c in me.net_connections("tcp4") if c.laddr.port == port and c.status != psutil.CONN_LISTEN]
            peak_rss, peak_held = max(peak_rss, me.memory_info().rss), max(peak_held, len(held))
        game = subprocess.Popen([*FAKE, f"--port={port}", "--env=ball_chase", "--agents=2"])
        out, _ = trainer.communicate(timeout=60)
    finally:
        end(trainer)
        if game is not None:
            end(game)
    assert trainer.returncode == 0, out[-3000:]
    # A new connection is accepted before the oldest is closed: a snapshot between the two sees one more.
    assert 0 < peak_held <= EDITOR_CONNECTIONS.value + 1
    grown = (peak_rss - base) / 2**20
    assert grown < EDITOR_CONNECTIONS.value * HANDSHAKE_BYTES.value / 2**20 + 64, f"the trainer grew {grown:.0f} MiB"
    print(f"40 strangers: the trainer held at most {peak_held} connections and grew {grown:.0f} MiB")
