"""The training comparison (--compare-training): PPO trained for the same wall-clock budget on the fastest headless
and the fastest windowed configuration, and the episodic return each reached."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import psutil

from python_trainer.base import paths
from python_trainer.base.flags import to_argv
from python_trainer.base.processes import descendants, end_process_tree, read_log_tail, spawn
from python_trainer.envs.game import GodotGame
from python_trainer.run.run_folder import episode_rows
from python_trainer.tools.profile.measure import Config

TOTAL_TIMESTEPS = 10**12  # never reached: the budget's SIGINT ends the training
STOP_WAIT_S = 60  # from the SIGINT to PPO's exit: a checkpoint and closing the instances take a few seconds


def _episode_returns(run_dir: Path) -> list[tuple[int, float]]:
    return [(int(r["global_step"]), float(r["return"])) for r in episode_rows(run_dir)]


def _processes(pids) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    return procs


def train_command(cfg: Config, opts, game: GodotGame, root: Path, exp: str, frame_stack: int = 1) -> list[str]:
    """`godot-ppo train` on ``cfg`` (its copies and environment parameters too) with no evaluation and no checkpoint
    before the stop; its flag names are those of train's own Args."""
    from python_trainer.run.train import Args as TrainArgs  # torch: only when a comparison trains

    params = [arg for name, value in cfg.env_params for arg in to_argv(TrainArgs, env_param=f"{name}={value}")]
    return [sys.executable, "-m", "python_trainer", "train", *to_argv(
        TrainArgs, env_id=game.env, env_path=game.env_path, num_instances=cfg.instances,
        agents_per_instance=cfg.agents, copies=cfg.copies if cfg.copies != 1 else None,
        frame_stack=frame_stack if frame_stack != 1 else None, total_timesteps=TOTAL_TIMESTEPS, num_steps=128,
        eval_episodes=0, checkpoint_every=0, run_dir_root=str(root), exp_name=exp, seed=opts.seed + 1,
        connect_timeout=opts.connect_timeout, window=not cfg.headless or None), *params]


def _run_for(cmd: list[str], log_path: Path, budget_s: float, result: dict) -> int:
    """Run ``cmd`` for ``budget_s`` seconds, then SIGINT (PPO saves a checkpoint and closes its instances); its
    exit code. Its Godot instances (and Xvfb) are checked gone."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(paths.REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                     cwd=str(paths.REPO_ROOT))  # own session; dies with us (processes.spawn)
    try:
        try:
            code = proc.wait(timeout=budget_s)  # finishing by itself within the budget is unexpected: an error
        except subprocess.TimeoutExpired:
            result["child_pids"] = [p.pid for p in descendants(proc.pid)]  # its Godot instances (and Xvfb): checked gone below
            proc.send_signal(signal.SIGINT)  # PPO: checkpoint, close the instances, exit 130
            try:
                code = proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:  # the stop is stuck: this SIGTERM also logs where (signals.py)
                result["stuck"] = f"PPO did not exit within {STOP_WAIT_S} s of its SIGINT"
                end_process_tree([proc.pid])
                code = proc.wait(timeout=10)
    except BaseException:
        end_process_tree([proc.pid])  # also when our own Ctrl-C (KeyboardInterrupt) lands here
        proc.wait(timeout=10)
        raise
    result["wall_seconds"] = time.perf_counter() - t0
    result["exit_code"] = code
    left = [p for p in psutil.wait_procs(_processes(result.get("child_pids", [])), timeout=10)[1]]
    if left:
        end_process_tree([p.pid for p in left])
        result["leftover_pids_killed"] = [p.pid for p in left]
    return code


def _returns_reached(run_dir: Path, wall_seconds: float) -> dict:
    """The steps done, the episodes, and the mean return of the first and the last tenth of the episodes."""
    episodes = _episode_returns(run_dir)
    try:
        from python_trainer.checkpoint import load_checkpoint  # torch: only once a training ran

        steps = int(load_checkpoint(run_dir / paths.CHECKPOINT_NAME)["global_step"])
    except Exception:
        steps = episodes[-1][0] if episodes else 0
    result = {"status": "ok", "global_steps": steps, "episodes": len(episodes), "steps_per_second": steps / wall_seconds}
    if not episodes:
        return {**result, "note": "no episode finished within the budget"}
    k = max(5, len(episodes) // 10)
    returns = [r for _, r in episodes]
    result["first_return"] = float(np.mean(returns[:k]))
    result["final_return"] = float(np.mean(returns[-k:]))
    result["return_gain_per_minute"] = (result["final_return"] - result["first_return"]) / (wall_seconds / 60)
    return result


def train_for(cfg: Config, opts, game: GodotGame, out_dir: Path, budget_s: float, frame_stack: int = 1) -> dict:
    """PPO (`godot-ppo train`) on ``cfg`` (``frame_stack``: the profiled policy's) for ``budget_s`` seconds of wall
    clock, then SIGINT. Returns the episodic-return numbers from episodes.csv."""
    root = out_dir / "training"
    root.mkdir(parents=True, exist_ok=True)
    exp = f"profile_{cfg.key}"
    cmd = train_command(cfg, opts, game, root, exp, frame_stack)
    log_path = root / f"{exp}.log"
    result = {"key": cfg.key, "mode": cfg.mode, "instances": cfg.instances, "agents": cfg.agents,
              "copies": cfg.copies, "budget_seconds": budget_s, "status": "failed", "command": " ".join(cmd),
              "log": str(log_path)}
    code = _run_for(cmd, log_path, budget_s, result)
    runs = sorted(root.glob(f"{game.env}__{exp}__*"), key=lambda p: p.stat().st_mtime)
    if code not in (0, 130) or not runs:
        stuck = f"{result['stuck']}; " if "stuck" in result else ""
        result["error"] = f"{stuck}PPO exited with code {code}; last lines of {log_path}:\n" + read_log_tail(log_path)
        return result
    result["run_dir"] = str(runs[-1])
    result.update(_returns_reached(runs[-1], result["wall_seconds"]))
    return result


def training_verdict(training) -> Optional[str]:
    """One line: the return each mode reached in the budget, or None without both."""
    ok = {t["mode"]: t for t in training if t["status"] == "ok" and t.get("final_return") is not None}
    if "headless" not in ok or "windowed" not in ok:
        return None
    h, w = ok["headless"], ok["windowed"]
    return (f"Training verdict: in {h['budget_seconds']:.0f} s of wall clock, {h['instances']} headless reached a return "
            f"of {h['final_return']:.2f} ({h['global_steps']:,} steps, {h['return_gain_per_minute']:+.2f}/min); "
            f"{w['instances']} windowed reached {w['final_return']:.2f} ({w['global_steps']:,} steps, "
            f"{w['return_gain_per_minute']:+.2f}/min).")
