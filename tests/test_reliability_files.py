"""Reliability, round 4 (issue 36): file arguments, demonstration and curriculum files, flag bounds and the small cases.

Every bad input gets one `godot-ppo CMD: error:` line naming the file as given and the fix, a non-zero exit, no
traceback, and no run folder of a new run that never trained; a FIFO, a device or a process substitution cannot hang
or flood; a demonstration file is read once; the recorder appends without rewriting, records matches, refuses a
folder; --policy=a.json, is refused; the flags of seconds and --action-repeat have bounds and a slow step is said.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from helpers import fake_env, quiet, run_dirs
from python_trainer import cli
from python_trainer.demos import DemoError, load_demos, read_episodes, write_demos
from python_trainer.envs.env_params import EnvParamError
from python_trainer.run import curriculum

GOOD_EPISODE = [[[0.0, 0.1, 0.2, 0.3]] * 3, [[0], [1]]]  # CartPole's shape: 4 values, Discrete(2)


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail instead of hanging: a file argument that blocks (a FIFO) raises here."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s: the file argument blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _one_error(capsys, code, *parts):
    """The command's one error line, which holds every one of ``parts``."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("godot-ppo "), err
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


# ---------------------------------------------------------------------------------------------------------------------
# 1. File arguments: FIFOs, devices, folders and process substitutions refused in one line; regular files read once
# ---------------------------------------------------------------------------------------------------------------------
def test_file_arguments_that_are_not_regular_files_are_refused(tmp_path, capsys):
    fifo = tmp_path / "demos.fifo"
    os.mkfifo(fifo)
    r, w = os.pipe()  # what <(zcat f.gz) gives: /dev/fd/N, a pipe
    root = tmp_path / "runs"
    try:
        cases = {str(fifo): "a pipe (FIFO)", "/dev/zero": "a device", "/dev/urandom": "a device",
                 str(tmp_path): "a folder", f"/dev/fd/{r}": "a pipe (FIFO)"}
        for flag in ("--demos", "--curriculum"):
            for path, kind in cases.items():
                with deadline(20):
                    code = cli.main(["train", "--env-id", "CartPole-v1", flag, path, "--run-dir-root", str(root)])
                line = _one_error(capsys, code, path, f"{kind}, not a regular file")
                if "pipe" in kind:
                    assert "write it to a file first" in line, line
    finally:
        os.close(r)
        os.close(w)
    assert not root.exists() or run_dirs(root) == []


def test_record_refuses_a_folder_or_a_fifo_as_its_file_before_the_game(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DISPLAY", ":59999")  # a display is checked first; none is opened before these refusals
    fifo = tmp_path / "d.fifo"
    os.mkfifo(fifo)
    code = cli.main(["record", "--env-id", "sparse_goal", "--out", str(tmp_path)])
    _one_error(capsys, code, "it is a folder; give a file name")
    with deadline(20):
        code = cli.main(["record", "--env-id", "sparse_goal", "--out", str(fifo)])
    _one_error(capsys, code, f"--out {fifo}: a pipe (FIFO), not a regular file")


def test_a_file_is_read_once_and_no_more_than_its_size(tmp_path, monkeypatch):
    from python_trainer.base import inputs

    path = write_demos(tmp_path / "d.json", [GOOD_EPISODE] * 3)
    reads = []
    real = inputs.read_bytes
    monkeypatch.setattr(inputs, "read_bytes", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    import python_trainer.demos as demos_module

    monkeypatch.setattr(demos_module, "read_bytes", inputs.read_bytes)
    parsed = demos_module.read_demo_files([path])
    demos = load_demos([path], 4, gym.spaces.Discrete(2), parsed=parsed)
    assert demos.steps == 6 and reads == [path] and parsed == {}
    assert inputs.read_text(path, "x") == path.read_text()
    with open(path, "ab") as f, pytest.raises(inputs.InputError, match="not UTF-8 text"):
        f.write(b"\xff")
        f.flush()
        inputs.read_text(path, "x")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps([GOOD_EPISODE]).encode())
    assert len(read_episodes(bom)) == 1  # a UTF-8 BOM is accepted


# ---------------------------------------------------------------------------------------------------------------------
# 2. Demonstration files that crashed the reader: one DemoError line naming the file and the episode
# ---------------------------------------------------------------------------------------------------------------------
def _refused(tmp_path, content: bytes | str, *parts, obs_dim=4, space=gym.spaces.Discrete(2), declared=None):
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(DemoError) as e:
        load_demos([path], obs_dim, space, declared, "g")
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path)) and len(message) < 400, message
    for part in parts:
        assert part in message, (part, message)
    return message


def test_demo_files_that_crashed_the_reader_are_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(0)
    _refused(tmp_path, rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), "not UTF-8 text (byte ")
    _refused(tmp_path, json.dumps([GOOD_EPISODE]).encode("utf-16"), "UTF-16 text", "in UTF-8")
    _refused(tmp_path, '[[[["caf\u00e9"]]]]'.encode("latin-1"), "not UTF-8 text")
    _refused(tmp_path, "[" * 200_000 + "]" * 200_000, "nested too deeply")
    _refused(tmp_path, "[[[[0, 0, 0, 1" + "0" * 400 + "], [0, 0, 0, 0]], [[0]]]]", "observation 0 holds an integer of 401 digits")
    _refused(tmp_path, "[[[[0, 0, 0, 1" + "0" * 5000 + "], [0, 0, 0, 0]], [[0]]]]", "digits")  # Python's own limit on digits
    _refused(tmp_path, json.dumps([[[[0, 0, 0, 1e39]] * 2, [[0]]]]), "observation 0 holds 1e+39, beyond float32's range")
    _refused(tmp_path, json.dumps([[[[0, 0, 0, 0]] * 2, [[10**400]]]]), "action 0 holds an integer of 401 digits")
    _refused(tmp_path, json.dumps([[[[0, 0, 0, [[[]]]]] * 2, [[0]]]]), "observation 0 holds [[[]]], not a number")
    declared = {"move": {"size": 3, "action_type": "discrete"}}
    for keys in (5, [5], [["move", "discrete"]], [["move", "discrete", "3"]], [["move", "discrete", 0]], "abc",
                 [["move", "discrete", [[3]]]]):
        _refused(tmp_path, json.dumps([[[[0, 0, 0, 0]] * 2, [[0]], {"action_keys": keys}]]), 'meta\'s "action_keys"',
                 declared=declared)
    for rewards in ("ten", ["ten"], [1, 2], [[1]], {"a": 1}, [10**400]):
        _refused(tmp_path, json.dumps([[[[0, 0, 0, 0]] * 2, [[0]], {"rewards": rewards}]]), 'reward')
    _refused(tmp_path, json.dumps([[[[0, 0, 0, 0]] * 2, [[0]], {"game": ["x"] * 100}]]), "recorded in the game")


def test_a_demo_observation_too_large_for_float32_is_refused_before_it_trains(tmp_path, capsys):
    """1e39 passed the float64 check and trained a NaN model with exit 0; a shape that fails once the game is up (the
    observation size) leaves no run folder either."""
    root = tmp_path / "runs"
    big = write_demos(tmp_path / "big.json", [GOOD_EPISODE, [[[0, 0, 0, 1e39]] * 3, [[0], [1]]]])
    small = write_demos(tmp_path / "small.json", [[[[0, 0, 0]] * 3, [[0], [1]]]])
    for path, part in ((big, "episode 1: observation 0 holds 1e+39, beyond float32's range"),
                       (small, "episode 0: observation 0 has 3 values, not 4")):
        code = cli.main(["train", "--env-id", "CartPole-v1", "--demos", str(path), "--total-timesteps", "0",
                         "--run-dir-root", str(root)])
        _one_error(capsys, code, f"godot-ppo train: error: {path}: {part}")
        assert run_dirs(root) == [] if root.exists() else True


# ---------------------------------------------------------------------------------------------------------------------
# 4. Curricula
# ---------------------------------------------------------------------------------------------------------------------
CURRICULUM = """[environment_parameters.gap_max]
curriculum = [
  { name = "easy", value = 2.0, completion_criteria = { measure = "reward", threshold = 0.5, min_lesson_length = LEN } },
  { name = "hard", value = 3.0 },
]
"""


def test_curricula_that_crashed_the_reader_are_refused_and_a_bom_is_read(tmp_path):
    path = tmp_path / "c.toml"

    def refused(content: bytes, *parts):
        path.write_bytes(content)
        with pytest.raises(EnvParamError) as e:
            curriculum.load(path)
        assert "\n" not in str(e.value) and str(e.value).startswith((f"--curriculum {path}", f"{path}:")), str(e.value)
        for part in parts:
            assert part in str(e.value), (part, str(e.value))

    refused(np.random.default_rng(1).integers(0, 256, 2048, dtype=np.uint8).tobytes(), "not UTF-8 text")
    refused(b"a = " + b"[" * 5000 + b"]" * 5000, "nested too deeply")
    refused(CURRICULUM.replace("LEN", "1" + "0" * 20).encode(), "min_lesson_length must be an integer from 1 to 1000000")
    refused(CURRICULUM.replace("LEN", "10").replace("0.5", "1" + "0" * 400).encode(), "threshold", "finite number")
    path.write_bytes(b"\xef\xbb\xbf" + CURRICULUM.replace("LEN", "10").encode())
    params, _ = curriculum.load(path)
    assert [lesson.name for lesson in params["gap_max"]] == ["easy", "hard"]


def test_a_range_whose_min_exceeds_its_max_is_refused(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    base = ["train", "--env-path", str(headless_export), "--env-id", "jumper", "--run-dir-root", str(root)]
    code = cli.main(base + ["--env-param", "gap_min=3.0", "--env-param", "gap_max=2.5"])
    _one_error(capsys, code, "--env-param gap_max=2.5: gap_min=3 is above gap_max=2.5", "raise gap_max")
    code = cli.main(base + ["--env-param", "gap_min=3.0"])  # gap_max keeps its default, 2.2
    _one_error(capsys, code, "gap_min=3 is above gap_max=2.2 (its default)")
    toml = tmp_path / "c.toml"
    toml.write_text(CURRICULUM.replace("LEN", "10").replace("gap_max", "gap_min")
                    + "[environment_parameters.gap_max]\ncurriculum = [{ value = 2.5, completion_criteria = { measure = "
                      '"progress", threshold = 0.5 } }, { value = 2.8 }]\n')
    code = cli.main(base + ["--curriculum", str(toml)])
    _one_error(capsys, code, "gap_min=3 is above gap_max=2.8 in lesson 1")
    assert not root.exists() or run_dirs(root) == []


# ---------------------------------------------------------------------------------------------------------------------
# 5. Flags: seconds and --action-repeat have bounds; a slow step is said
# ---------------------------------------------------------------------------------------------------------------------
def test_flags_of_seconds_and_action_repeat_have_bounds(tmp_path, capsys):
    root = tmp_path / "runs"
    for flag, value in (("--connect-timeout", "1e308"), ("--step-timeout", "1e308"), ("--action-repeat", "4294967297"),
                        ("--action-repeat", "1001")):
        code = cli.main(["train", "--env-id", "ball_chase", flag, value, "--run-dir-root", str(root)])
        _one_error(capsys, code, f"{flag} {value if 'repeat' in flag else '1e+308'} is not valid")
    for command in (["launch"], ["envs"]):
        code = cli.main(command + ["--connect-timeout", "1e308"])
        _one_error(capsys, code, "at most 86400")
    assert not root.exists()


def test_a_slow_step_is_said_once_with_how_long_it_takes(tmp_path, monkeypatch):
    monkeypatch.setattr("python_trainer.envs.vec_env.SLOW_STEP_S", 0.05)
    events = []
    envs = fake_env(tmp_path, "--fake_step_delay=0.1", instances=1, agents=2, action_repeat=7, report=quiet(events))
    try:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(envs.action_space.sample())
    finally:
        envs.close()
    slow = [e for e in events if "each step of ball_chase takes about" in e]
    assert len(slow) == 1 and "(7 physics frames per step, --action-repeat)" in slow[0], events


# ---------------------------------------------------------------------------------------------------------------------
# 6. Runs refused once the game started leave no run folder; a game of several policies is refused before Ray starts
# ---------------------------------------------------------------------------------------------------------------------
def test_runs_refused_once_the_game_started_leave_no_run_folder(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    demos = write_demos(tmp_path / "d.json", [GOOD_EPISODE])
    base = ["train", "--env-path", str(headless_export), "--env-id", "tag", "--run-dir-root", str(root)]
    code = cli.main(base + ["--demos", str(demos), "--total-timesteps", "0"])
    _one_error(capsys, code, "--demos clones one policy; tag's agents play 2")
    code = cli.main(base + ["--ray-address", "local"])
    _one_error(capsys, code, "tag has several policies (", "drop --ray-address")
    assert not root.exists() or run_dirs(root) == []
    assert "ray" not in sys.modules or not __import__("ray").is_initialized()  # refused before Ray started


# ---------------------------------------------------------------------------------------------------------------------
# 7. play --opponent human needs a person's display; a temporary Xvfb log never outlives its command
# ---------------------------------------------------------------------------------------------------------------------
def test_play_against_a_person_refuses_without_a_display(monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    code = cli.main(["play", "exports/policies/ball_chase.json", "--opponent", "human"])
    _one_error(capsys, code, "godot-ppo play: error: no display ($DISPLAY is not set): a person must see the game",
               "--opponent random, scripted or a policy file")


def test_a_temporary_xvfb_log_is_removed_even_when_the_command_fails(tmp_path, monkeypatch):
    import tempfile

    from python_trainer.envs.xvfb import TEMP_LOG_PREFIX, temp_xvfb

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{TEMP_LOG_PREFIX}{dead.pid}.log"  # a SIGKILLed command's
    stale.write_text("")
    with pytest.raises(RuntimeError), temp_xvfb() as xvfb:
        assert not stale.exists()
        xvfb.log_path.write_text("")  # Xvfb started and wrote its log; then the command failed
        raise RuntimeError("the recording failed")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------------------------
# 3. and 5. The engine: the recorder appends, records matches, refuses a folder; --policy=a.json, is refused
# ---------------------------------------------------------------------------------------------------------------------
def _game(binary, *args, timeout=90):
    return subprocess.run([str(binary), *args, "--fixed-fps", "60"], capture_output=True, text=True, timeout=timeout)


def test_recording_appends_keeps_earlier_digits_and_records_matches(headless_export, tmp_path):
    out = tmp_path / "d.json"
    record = ["--env=jumper", "--policy=random", f"--record_demos={out}", "--record_episodes=1", "--max_episode_steps=5"]
    assert _game(headless_export, *record).returncode == 0
    episodes = json.loads(out.read_text())
    episodes[0][0][0][:2] = [1.2e-07, 0.123456789012]  # digits that to_json's 6 would lose
    write_demos(out, episodes)
    before = out.read_bytes()
    result = _game(headless_export, *record)
    assert result.returncode == 0, result.stderr
    after = out.read_bytes()
    assert after.startswith(before.rstrip()[:-1])  # appended: the earlier episode's bytes as written
    first, second = json.loads(after)
    assert first == episodes[0]
    digits = [len(v.lstrip("-0.").replace(".", "").split("e")[0]) for v in json.dumps(second[0])[2:-2].replace("[", "")
              .replace("]", "").split(",")]
    assert max(digits) > 6, second[0]  # the new episode's floats keep more than to_json's 6 digits

    match = ["--env=pong", "--policy=random", "--opponent=random", f"--record_demos={tmp_path / 'm.json'}",
             "--record_episodes=2", "--max_episode_steps=20"]
    assert _game(headless_export, *match).returncode == 0
    for obs, actions, meta in json.loads((tmp_path / "m.json").read_text()):
        assert len(actions) == 20 and len(obs) == len(actions) + 1 == len(meta["rewards"]) + 1

    folder = _game(headless_export, "--env=jumper", "--policy=random", f"--record_demos={tmp_path}/")
    assert folder.returncode == 1 and f"--record_demos={tmp_path}/ is a folder: give a file in it" in folder.stderr
    comma = _game(headless_export, "--env=jumper", f"--policy={tmp_path / 'p.json'},", "--eval_episodes=1")
    assert comma.returncode == 1 and f"--policy={tmp_path / 'p.json'}, has an empty file name" in comma.stderr
