"""`godot-ppo train` on the real ball_chase export: the Godot path of ppo.py end to end."""

import json
import signal
import subprocess

import pytest

from helpers import (CLEANRL_TAGS, REPO, communicate_after_signal, descendants, end, read_scalars, run_dirs, train_argv,
                     wait_for, wait_gone)
from python_trainer.run import train
from python_trainer.variants import trained_agent
from python_trainer.checkpoint import load_checkpoint


@pytest.mark.slow
def test_ball_chase_smoke_run_writes_tags_logs_and_a_policy(tmp_path, headless_export):
    argv = ["--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "2", "--num-steps", "256",
            "--total-timesteps", "2048", "--eval-episodes", "2", "--checkpoint-every", "1",
            "--run-dir-root", str(tmp_path)]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path)
    scalars = read_scalars(run_dir)
    assert not [t for t in CLEANRL_TAGS if t not in scalars]
    assert "eval/episodic_return" in scalars
    assert sorted(p.name for p in (run_dir / "logs").glob("instance_*.log")) == ["instance_0.log", "instance_1.log"]
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy["env"] == "ball_chase" and policy["observation_size"] == 12
    assert len(policy["action_keys"][0].pop("log_std")) == 2 and policy["version"] == 5  # --policy_sample's
    assert policy["action_keys"] == [{"key": "move", "action_type": "continuous", "size": 2}]
    assert trained_agent.load_agent(run_dir).global_step == 2048


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_leaves_no_godot_process(tmp_path, headless_export):
    cmd = train_argv(tmp_path, "--env-id", "ball_chase", "--agents-per-instance", "4", "--num-steps", "32",
                     "--total-timesteps", "100000000", "--checkpoint-every", "1")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        games = []

        def first_update():  # noting the games the trainer runs until then
            games[:] = descendants(proc.pid)
            return list(tmp_path.glob("*/checkpoint.pt"))

        wait_for(first_update, 120, "first checkpoint", proc)
        assert games, "the trainer started no game process"
        proc.send_signal(signal.SIGINT)
        _, err = communicate_after_signal(proc)
    finally:
        end(proc)
    assert proc.returncode == 130, err
    assert "--resume" in err
    (run_dir,) = run_dirs(tmp_path)
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 4 * 32
    assert wait_gone(games, timeout=10) == [], "a Godot process outlived the interrupted training"
