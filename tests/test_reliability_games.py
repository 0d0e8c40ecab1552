"""Reliability, round 3, the engine and the games: a policy file's sizes are checked before anything is allocated from
them (in the game and in Python). The --watch window's reloader keeps its policy through a file claiming huge sizes:
godot_project/tests/test_policy_reloader.gd."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from python_trainer import train
from python_trainer.policy_file import MAX_SIZE, PolicyFileError, policy_dict, read_policy
from python_trainer.recurrent import RecurrentAgent

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
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
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
           "--fixed-fps", "60"]  # fmt: skip
    code, out, err, seconds, peak_mb = run_with_peak_rss(cmd, timeout=30)
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("rl_sync: error: policy file")]
    assert len(errors) == 1, err[-3000:]
    expected = HUGE.get(case, "the LSTM comes after layer 2147483648 of 3")
    assert expected in errors[0], errors[0]
    assert seconds < 10, f"refused after {seconds:.1f} s"
    assert peak_mb < 300, f"the game's peak RSS was {peak_mb:.0f} MB"
    assert '"eval"' not in out


class _NanAtTheTimeLimit(gym.Env):
    """Finite observations, but the last one of each episode (cut by the time limit) is NaN."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        truncated = self.t >= 4
        return np.full(2, np.nan if truncated else 0.0, np.float32), 0.0, False, truncated, {}


def test_a_nan_final_observation_is_named_not_blamed_on_the_learning_rate(tmp_path, capsys):
    gym.register("TestNanFinalObs-v0", entry_point=_NanAtTheTimeLimit)
    try:
        assert train.main(["--env-id", "TestNanFinalObs-v0", "--run-dir-root", str(tmp_path), "--num-envs", "2",
                           "--num-steps", "8", "--total-timesteps", "64"]) == 2  # fmt: skip
    finally:
        gym.registry.pop("TestNanFinalObs-v0")
    err = capsys.readouterr().err
    assert "returned NaN/inf final observations (the last of an ended episode) at global step" in err, err[-2000:]
    assert "learning-rate" not in err
