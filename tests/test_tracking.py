"""The course's tracking and Hub: `train --track` (a Weights & Biases run, CleanRL's, tested offline: WANDB_MODE=offline
keeps it in RUN_DIR/wandb/) and `godot-ppo package` (a folder for the Hugging Face Hub: the model card with the
evaluation, the model, the policy file, the ONNX, a replay, the hyperparameters; `--push` fails cleanly offline).
Nothing here reaches the network."""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import (REPO, communicate_after_signal, end, processes_mentioning, read_scalars, run_dirs, train_argv,
                     train_run, wait_for, wait_gone)

OFFLINE = {"WANDB_MODE": "offline"}
TINY_CARTPOLE = ("--env-id", "CartPole-v1", "--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128",
                 "--eval-episodes", "2")
# No Hub is reachable here: a closed local port, and a token so that the upload is tried at all
NO_HUB = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "hf_not_a_token", "HF_HUB_DISABLE_TELEMETRY": "1"}


# ---------------------------------------------------------------------------------------------- an offline W&B run
def wandb_records(path: Path):
    """The records of an offline W&B run file (run-<id>.wandb: a LevelDB-style log of protobuf records, after a
    7-byte header ":W&B", magic, version), as wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos, chunks = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        body, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        chunks = body if kind in (1, 2) else chunks + body  # FULL, FIRST; then MIDDLE, LAST
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            yield record


def offline_runs(run_dir: Path) -> list:
    return sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def history(path: Path) -> list:
    """Each history row of the run: {key: value}."""
    return [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
            for r in wandb_records(path) if r.WhichOneof("record_type") == "history"]


def exit_codes(path: Path) -> list:
    return [r.exit.exit_code for r in wandb_records(path) if r.WhichOneof("record_type") == "exit"]


def wandb_services_of(pid: int) -> list:
    """wandb's service processes started for the process ``pid`` (wandb-core --pid PID)."""
    return [p for p in processes_mentioning("wandb-core") if str(pid) in " ".join(_cmdline(p))]


def _cmdline(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """A tiny CartPole run with --track and --capture-video, W&B offline (about 15 s)."""
    return train_run(tmp_path_factory.mktemp("tracked"), *TINY_CARTPOLE, "--track", "--capture-video", env=OFFLINE)


def test_track_offline_writes_a_wandb_run_in_the_run_folder_that_holds_the_tensorboard_scalars_and_the_videos(
        tracked_run):
    (path,) = offline_runs(tracked_run)
    saved = json.loads((tracked_run / "args.json").read_text())
    assert saved["track"] and saved["wandb_project_name"] == "cleanRL"
    assert path.name == f"run-{saved['wandb_run_id']}.wandb"  # the id --resume continues
    (run,) = [r.run for r in wandb_records(path) if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.display_name) == ("cleanRL", tracked_run.name)
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config["total_timesteps"] == 1024 and config["env_id"] == "CartPole-v1"  # config=vars(args)
    rows = history(path)
    tensorboard = read_scalars(tracked_run)
    for tag in ("losses/value_loss", "charts/SPS", "charts/learning_rate", "eval/episodic_return"):
        synced = [(row["global_step"], row[tag]) for row in rows if tag in row]
        # each scalar once, at its step: W&B's own files in RUN_DIR/wandb/ are not read back as more events
        assert [s for s, _ in synced] == [s for s, _ in tensorboard[tag]], tag
        assert np.allclose([v for _, v in synced], [v for _, v in tensorboard[tag]], rtol=1e-5), tag
    # episodes: W&B keeps one row per step (two envs' episodes that end at one step are one point there)
    synced = {row["global_step"] for row in rows if "charts/episodic_return" in row}
    assert len(synced) > 5 and synced == {step for step, _ in tensorboard["charts/episodic_return"]}
    videos = sorted(p.stem for p in (tracked_run / "videos").glob("*.mp4"))
    logged = {key.split("/")[1]: row[key] for row in rows for key in row
              if key.startswith("videos/") and key.endswith("/_type")}
    assert videos and logged == dict.fromkeys(videos, "video-file")  # --capture-video's, logged at the end
    assert len(list(path.parent.glob("files/media/videos/**/*.mp4"))) == len(videos)
    assert exit_codes(path) == [0]


def test_a_resumed_tracked_run_continues_the_same_wandb_run(tracked_run, tmp_path):
    run_dir = shutil.copytree(tracked_run, tmp_path / tracked_run.name)
    run_id = json.loads((run_dir / "args.json").read_text())["wandb_run_id"]
    result = subprocess.run(train_argv(tmp_path / "unused", "--resume", str(run_dir), "--total-timesteps", "1536"),
                            cwd=REPO, capture_output=True, text=True, timeout=240, env=dict(os.environ, **OFFLINE))
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = offline_runs(run_dir)
    assert first.name == second.name == f"run-{run_id}.wandb"
    assert json.loads((run_dir / "args.json").read_text())["wandb_run_id"] == run_id
    steps = [row["global_step"] for row in history(second) if "losses/value_loss" in row]
    assert steps == [1280, 1536]  # the resumed updates only


def test_sigterm_finishes_the_wandb_run_and_its_service_process_ends(tmp_path):
    root = tmp_path / "runs"
    proc = subprocess.Popen(train_argv(root, "--env-id", "CartPole-v1", "--total-timesteps", "10000000", "--num-envs",
                                       "2", "--track"), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, **OFFLINE))
    try:
        csv = wait_for(lambda: [p for p in root.glob("*/episodes.csv") if len(p.read_text().splitlines()) > 2], 120,
                       "training's first episodes", proc)[0]
        assert wandb_services_of(proc.pid), "no wandb-core service was started for the trainer"
        proc.send_signal(signal.SIGTERM)
        _, err = communicate_after_signal(proc, timeout=60)
    finally:
        end(proc)
    assert proc.returncode == 143, err.decode()[-2000:]
    last = [line for line in err.decode().splitlines() if line.strip()][-1]
    assert last.startswith("interrupted by SIGTERM: checkpoint at global step"), last  # not buried under W&B's lines
    (path,) = offline_runs(csv.parent)
    assert exit_codes(path) == [143]
    assert not wait_gone(wandb_services_of(proc.pid), 10)


def test_track_without_wandb_is_one_line_and_leaves_no_run_folder(tmp_path):
    fake = tmp_path / "site" / "wandb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'wandb'\")\n")
    env = dict(os.environ, PYTHONPATH=f"{fake.parent}{os.pathsep}{REPO}")
    result = subprocess.run(train_argv(tmp_path / "runs", *TINY_CARTPOLE, "--track"), cwd=REPO, capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "godot-ppo train: error: --track needs the wandb package (No module named 'wandb'): pip install wandb, or "
        "drop --track"]
    assert run_dirs(tmp_path / "runs") == []


def test_wandb_flags_without_track_are_refused(tmp_path):
    result = subprocess.run(train_argv(tmp_path / "runs", *TINY_CARTPOLE, "--wandb-entity", "me"), cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--wandb-entity is for tracking with Weights & Biases: add --track" in result.stderr
    assert run_dirs(tmp_path / "runs") == []


# ---------------------------------------------------------------------------------------------- godot-ppo package
def package(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "python_trainer", "package", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=240, env=dict(os.environ, **(env or {})))


@pytest.fixture(scope="module")
def ball_chase_run(tmp_path_factory, headless_export, windowed_export):
    """A tiny ball_chase run (one update, about 10 s)."""
    return train_run(tmp_path_factory.mktemp("ball_chase"), "--env-id", "ball_chase", "--total-timesteps", "1024",
                     "--num-steps", "64", "--eval-episodes", "0")


@pytest.mark.slow  # a training, an evaluation in the engine and a recording in the windowed game (about 25 s)
def test_package_writes_a_model_card_whose_model_index_holds_the_in_engine_evaluation(ball_chase_run, tmp_path):
    from huggingface_hub import metadata_load

    from python_trainer.engine.in_engine import evaluate_in_engine
    from python_trainer.engine.policy_file import read_policy

    out = tmp_path / "hub"
    result = package(str(ball_chase_run), "--repo-id", "me/ppo-ball_chase", "--out", str(out), "--eval-episodes", "4",
                     "--seed", "3", "--video-seconds", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["n_evaluation_episodes"] == 4 and results["env_id"] == "ball_chase"
    # the engine's own evaluation of the policy file, with the same seed, gives the same returns
    report = evaluate_in_engine(out / "policy.json", episodes=4, seed=3)
    assert results["returns"] == pytest.approx(report["returns"])
    mean, std = np.mean(report["returns"]), np.std(report["returns"])
    assert (results["mean_reward"], results["std_reward"]) == pytest.approx((mean, std))
    card = metadata_load(out / "README.md")
    (model,) = card["model-index"]
    (entry,) = model["results"]
    assert entry["dataset"]["name"] == "ball_chase" and entry["task"]["type"] == "reinforcement-learning"
    (metric,) = entry["metrics"]
    assert (metric["type"], metric["value"]) == ("mean_reward", f"{mean:.2f} +/- {std:.2f}")
    assert {"ball_chase", "ppo", "deep-rl-course"} <= set(card["tags"])
    assert read_policy(out / "policy.json")["env"] == "ball_chase"
    assert (out / "model.pt").read_bytes() == (ball_chase_run / "model.pt").read_bytes()
    assert json.loads((out / "args.json").read_text()) == json.loads((ball_chase_run / "args.json").read_text())
    assert (out / "policy.onnx").stat().st_size > 1000 and (out / "replay.mp4").read_bytes()[4:8] == b"ftyp"
    assert list((out / "logs").glob("events.out.tfevents.*"))
    assert "| total_timesteps | 1024 |" in (out / "README.md").read_text()  # the hyperparameters
    assert not [p for p in tmp_path.iterdir() if p.name != "hub"]  # no scratch folder left beside it


def test_package_of_a_gymnasium_run_evaluates_in_python_and_push_fails_in_one_line_without_the_hub(
        tracked_run, tmp_path):
    from huggingface_hub import metadata_load

    out = tmp_path / "hub"
    result = package(str(tracked_run), "--repo-id", "me/ppo-CartPole-v1", "--out", str(out), "--eval-episodes", "3",
                     "--push", env=NO_HUB)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("godot-ppo package: error: --push: the upload to the Hub failed")
    assert "127.0.0.1" in errors[0] and f"{out} is complete" in errors[0]
    results = json.loads((out / "results.json").read_text())  # the folder is whole: push it later
    assert results["where"].startswith("in Python") and results["n_evaluation_episodes"] == 3
    value = metadata_load(out / "README.md")["model-index"][0]["results"][0]["metrics"][0]["value"]
    assert value == f"{results['mean_reward']:.2f} +/- {results['std_reward']:.2f}"
    assert (out / "replay.mp4").read_bytes() == sorted((tracked_run / "videos").glob("*.mp4"),
                                                       key=lambda p: -p.stat().st_mtime)[0].read_bytes()
    assert not (out / "policy.json").exists()  # a gymnasium task: the engine has no policy file of it


def test_package_refuses_a_bad_repo_id_and_a_folder_of_other_files_before_any_work(tracked_run, tmp_path):
    result = package(str(tracked_run), "--repo-id", "no-user", "--out", str(tmp_path / "hub"))
    assert result.returncode == 2 and "--repo-id 'no-user': a Hub model's id is USER/NAME" in result.stderr
    assert not (tmp_path / "hub").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    result = package(str(tracked_run), "--repo-id", "me/x", "--out", str(tmp_path / "mine"))
    assert result.returncode == 2 and "that folder holds other files" in result.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
