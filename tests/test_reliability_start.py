"""Starting up, tried as a new user would: a camera game with no display (no Xvfb on PATH, a $DISPLAY that answers
nothing, the trainer's Xvfb killed mid-run), read-only places (a project to import, the folder the runs go to), and
what a failed start leaves (no run folder). Each ends in one line naming the problem and the fix, with a non-zero exit
and nothing left running; a run stopped after it began keeps its folder and checkpoint. Real processes throughout:
forager (our camera game, run windowed) and README's walker project.

A read-only place is a bind mount made read-only in a mount namespace of the command's own (`unshare -m`): we run as
root, whom chmod does not stop, and the mount is gone with the command."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (REPO, communicate_after_signal, end, fake_export, no_display_env, processes_mentioning, run_dirs,
                     train_argv, wait_for, xvfb_pid)
from python_trainer.envs.xvfb import display_answers
from python_trainer.base.errors import UserError
from python_trainer.run.run_folder import discard_new_run, gone_from

FORAGER = ["--env-id", "forager", "--num-steps", "16", "--eval-episodes", "0"]


def error_lines(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]


def run(argv, env=None, cwd=REPO, timeout=90) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_line_and_nothing_left(result, root: Path, status: int, *said: str) -> str:
    """The command failed with ``status`` in one error line holding each of ``said``, left no run folder under
    ``root`` and no process running; the line."""
    lines = error_lines(result.stderr)
    assert result.returncode == status and len(lines) == 1, f"{result.returncode}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr and all(s in lines[0] for s in said), lines[0]
    assert run_dirs(root) == [], [list(r.rglob("*")) for r in run_dirs(root)]
    assert processes_mentioning(str(root)) == []
    return lines[0]


# ---------------------------------------------------------------------------------------------- displays
def test_a_camera_game_without_display_or_xvfb_on_path_names_the_install_in_one_line(tmp_path, windowed_export):
    env = dict(no_display_env(), PATH=str(tmp_path))  # no Xvfb to be found (the command is started by its path)
    result = run(train_argv(tmp_path / "runs", *FORAGER), env=env)
    line = assert_one_line_and_nothing_left(result, tmp_path / "runs", 1, "forager observes a camera image",
                                            "Xvfb is not installed", "sudo apt-get install xvfb")
    assert "run headless" not in line, "a camera game cannot run headless"


def test_a_display_that_answers_nothing_is_named_before_any_window_opens(tmp_path, windowed_export):
    number = next(n for n in range(99, 199) if not display_answers(f":{n}"))
    result = run(train_argv(tmp_path / "runs", *FORAGER), env=dict(os.environ, DISPLAY=f":{number}"))
    assert_one_line_and_nothing_left(result, tmp_path / "runs", 1, f"$DISPLAY is :{number}, but no X server answers",
                                     "unset DISPLAY")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # the first line says it


def test_killing_the_trainers_xvfb_stops_training_in_one_line_with_its_checkpoint(tmp_path, windowed_export):
    runs, err_path = tmp_path / "runs", tmp_path / "stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(train_argv(runs, *FORAGER, "--total-timesteps", "100000", "--checkpoint-every", "1"),
                                cwd=REPO, env=no_display_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: list(runs.glob("*/checkpoint.pt")), 90, "the first checkpoint", proc=proc)
        xvfb = xvfb_pid(err_path.read_text())
        os.kill(xvfb, signal.SIGKILL)
        communicate_after_signal(proc, timeout=60)
    finally:
        end(proc)
    err = err_path.read_text()
    (line,) = error_lines(err)
    assert proc.returncode == 1 and f"(pid {xvfb}) that the windowed instances ran on died" in line, err[-3000:]
    assert "cannot run without their display" in line and "max-restarts" not in err and "Traceback" not in err
    (run_dir,) = run_dirs(runs)
    assert "checkpoint at global step" in err and (run_dir / "checkpoint.pt").is_file()
    assert f"continue with: godot-ppo train --resume {run_dir}" in err
    assert not (run_dir / "train.lock").exists() and processes_mentioning(str(tmp_path)) == []


# ---------------------------------------------------------------------------------------------- read-only places
def read_only(folder: Path, argv: list) -> list:
    """``argv`` run with ``folder`` read-only (a read-only bind mount in a mount namespace of its own), from the same
    working directory, looked up again once the mount is made (a directory already open stays writable)."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind -o ro "$0" "$0" && cd "$PWD" && exec "$@"', str(folder), *argv]


@pytest.fixture(scope="module")
def can_mount():
    probe = subprocess.run(read_only(Path("/tmp"), ["true"]), capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"no read-only bind mount here (unshare -m needs CAP_SYS_ADMIN): {probe.stderr.strip()}")


def test_a_read_only_project_with_an_asset_to_import_names_its_folder_and_the_fix(tmp_path, can_mount):
    from test_project_and_editor import walker_project

    project = walker_project(tmp_path)
    result = run(read_only(project, train_argv(tmp_path / "runs", "--project", str(project))))
    assert_one_line_and_nothing_left(result, tmp_path / "runs", 2, f"cannot make {project / '.import'} (Read-only",
                                     "copy the project to one that is and give that to --project")
    assert not (project / ".import").exists()


def test_a_run_started_in_a_read_only_folder_names_it_and_run_dir_root(tmp_path, can_mount):
    folder = tmp_path / "ro"
    folder.mkdir()
    argv = [sys.executable, "-m", "python_trainer", "train", "--env-id", "CartPole-v1"]
    result = run(read_only(folder, argv), cwd=folder, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert_one_line_and_nothing_left(result, folder / "runs", 2, f"cannot make the run folder in {folder / 'runs'} "
                                     "(Read-only file system)", "give --run-dir-root a folder you can write to")
    result = run(read_only(folder, train_argv(folder / "deeper" / "runs", "--env-id", "CartPole-v1")))
    assert_one_line_and_nothing_left(result, folder / "deeper" / "runs", 2, f"in {folder / 'deeper' / 'runs'} "
                                     "(Read-only file system)", "--run-dir-root")


# ---------------------------------------------------------------------------------------------- failed starts
@pytest.mark.parametrize("how", ["exit_at_start", "never_connect"])
def test_a_start_that_fails_leaves_no_run_folder_and_names_no_removed_file(tmp_path, how):
    game = fake_export(tmp_path / "game.x86_64", f"--fake_mode={how}")
    runs = tmp_path / "runs"
    result = run(train_argv(runs, "--env-path", str(game), "--connect-timeout", "3"))
    lines = error_lines(result.stderr)
    assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
    assert ("exited before connecting" if how == "exit_at_start" else "timed out after 3s") in lines[0]
    assert "instance_0.log (removed with its run folder)" in result.stderr and str(runs / "") not in result.stderr
    assert run_dirs(runs) == [] and processes_mentioning(str(tmp_path)) == []


def test_a_message_names_the_files_of_a_removed_run_folder_by_name_alone(tmp_path):
    text = "--- last lines of /r/x__1/logs/instance_0.log ---\nXvfb did not start; log /r/x__1/logs/xvfb.log:\n"
    assert gone_from(Path("/r/x__1"), text) == ("--- last lines of instance_0.log (removed with its run folder) ---\n"
                                                "Xvfb did not start; log xvfb.log (removed with its run folder):\n")
    assert gone_from(Path("/r/x__1"), "/r/x__10/logs/a.log") == "/r/x__10/logs/a.log", "another folder's file"
    run_dir = tmp_path / "x__1"
    (run_dir / "logs").mkdir(parents=True)
    cause, said = RuntimeError(f"log: {run_dir}/logs/instance_0.log"), UserError(f"(log: {run_dir}/logs/a.log)")
    discard_new_run(run_dir, cause, None, said)
    assert not run_dir.exists() and str(cause) == "log: instance_0.log (removed with its run folder)"
    assert str(said) == "(log: a.log (removed with its run folder))"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "error.log").write_text("Traceback ...")  # a bug's traceback, which its line names: the folder stays
    discard_new_run(run_dir, RuntimeError("x"))
    assert (run_dir / "error.log").is_file()
