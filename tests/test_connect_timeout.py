"""Slow games (issue 22): --connect-timeout on every command that starts games (train, launch, envs, profile, play;
`envs --timeout` is its older name), one rule in flags.py; a game that takes longer to load than that is refused
saying what timed out and which flag gives it more time. The fake game loads until a file exists (--fake_wait_for):
the test decides when it has loaded, no sleep stands for it."""

import threading
import time

import pytest

from helpers import REPO, fake_export, wait_for
from python_trainer import cli
from python_trainer.envs.game import godot_game
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.failures import InstanceStartError


def test_a_slow_game_is_timed_out_naming_the_flag_and_connects_when_given_more_time(fake_binary, tmp_path):
    """Two launches of a game that is still loading: the one with 0.5 s gives up, naming --connect-timeout; the one
    with 60 s, started first, connects once the game has loaded (after the other's 0.5 s were over)."""
    loaded = tmp_path / "loaded"
    slow = godot_game("ball_chase", program=fake_binary)
    loading = {"agents_per_instance": 2, "extra_args": (f"--fake_wait_for={loaded}",)}
    patient = InstanceLauncher(slow, LaunchOptions(**loading, run_dir=tmp_path / "patient", connect_timeout=60))
    outcome = {}

    def start():
        try:
            outcome["instances"] = patient.start()
        except BaseException as e:  # noqa: BLE001 (said by the assertion below)
            outcome["error"] = e

    thread = threading.Thread(target=start)
    thread.start()
    try:
        wait_for(lambda: patient.instances[0] is not None, 30, "patient instance started")
        hasty = InstanceLauncher(slow, LaunchOptions(**loading, run_dir=tmp_path / "hasty", connect_timeout=0.5))
        with pytest.raises(InstanceStartError) as e:
            hasty.start()
        first_line = str(e.value).splitlines()[0]
        assert first_line.startswith("timed out after 0.5s waiting for instance 0 ") and first_line.endswith(
            "to connect (a game that takes longer to load can be given more time with --connect-timeout SECONDS)"
        ), first_line
        loaded.touch()  # the game has loaded: the patient launcher's instance connects
        thread.join(timeout=60)
        assert "error" not in outcome, outcome.get("error")
        assert outcome["instances"][0].env_info["n_agents"] == 2
    finally:
        loaded.touch()
        thread.join(timeout=60)
        patient.close()


def _slow_export(tmp_path):
    """An executable that runs the fake game, which never finishes loading (it does not even list its games)."""
    return str(fake_export(tmp_path / "slow_game.x86_64", f"--fake_wait_for={tmp_path / 'never'}"))


COMMANDS = {
    "train": lambda game, flag: cli.main(["train", "--env-path", game, flag, "0.5", "--run-dir-root", "runs_never"]),
    "launch": lambda game, flag: cli.main(["launch", "--env-path", game, flag, "0.5", "--seconds", "1"]),
    "envs": lambda game, flag: cli.main(["envs", "--env-path", game, flag, "0.5"]),
    "profile": lambda game, flag: cli.main(["profile", "--env-path", game, flag, "0.5", "--modes", "headless",
                                            "--num-instances", "1", "--out", "profile_never"]),
    "play": lambda game, flag: cli.main(["play", str(REPO / "exports" / "policies" / "ball_chase.json"),
                                         "--env-path", game, flag, "0.5"]),
}


@pytest.mark.parametrize("command, flag", [*((c, "--connect-timeout") for c in COMMANDS), ("envs", "--timeout")])
def test_every_command_that_starts_games_takes_connect_timeout(command, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    game = _slow_export(tmp_path)
    start = time.monotonic()
    assert COMMANDS[command](game, flag) == 2
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert (f"{game} did not answer --list_envs within 0.5 s: a game that takes longer to load can be given more "
            "time with --connect-timeout SECONDS" in err), err
    assert err.count("\n") == 1 and 0.5 <= elapsed < 15, (err, elapsed)  # its own 0.5 s, not the default 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow_game.x86_64"]  # no run or profile folder


def _train(argv):
    return cli.main(["train", *argv])  # its error line is the command line's


def _play(argv):
    return cli.main(["play", *argv])


@pytest.mark.parametrize("main", [lambda argv: cli.main(["launch", *argv]), lambda argv: cli.main(["envs", *argv]),
                                  lambda argv: cli.main(["profile", *argv]), _play, _train],
                         ids=["launch", "envs", "profile", "play", "train"])
def test_a_connect_timeout_that_is_not_a_positive_number_is_refused(main, tmp_path, capsys):
    argv = ["--connect-timeout", "0", "--run-dir-root", str(tmp_path)] if main is _train else ["--connect-timeout", "0"]
    try:
        code = main(argv + ([] if main is not _play else ["policy.json"]))
    except SystemExit as e:  # argparse: the usage, then the error line
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "0 is not valid: give a number of seconds > 0 (how long a game may take to load and " \
        "connect; at most 86400, a day), e.g." in err, err
