"""Benchmark: `godot-ppo train --async` against the synchronous trainer, side by side in one run (issue 37).

    .venv/bin/python scripts/bench_async.py [--rounds 2] [--total-timesteps 400000] [--ray] [--skip-cartpole]

Each round, one run at a time, alternating:
ball_chase  2 headless instances x 16 agents, the `make demo` settings: synced random stepping (GodotVecEnv, random
            actions, pipelined as training runs: the ceiling of any trainer), then PPO synchronous, then --async,
            then --async with the learner at its own priority (--learner-nice 0: what lowering it gains);
CartPole    CartPole-v1 with the course command (4 envs x 128 steps, 4 x 4 minibatches, lr 2.5e-4), synchronous
            and --async (scripts/bench_vs_cleanrl.py puts either beside CleanRL's ppo.py);
--ray       a 2-node Ray cluster on this machine (ray.cluster_utils, loopback only), 2 workers x 1 instance of
            ball_chase x 16 agents (--ray-instances 2: 2 instances x 8 agents each), synchronous, --async and
            --async --learner-nice 0.
A training run's steps/s is its last charts/SPS: global steps over the wall clock since its games were up. The
table gives each run's, the best of each kind, and the ratios of the bests. Beside each training run: the machine's
cores busy on average over its training loop (all processes: games, trainer, Ray's daemons). Overlap adds no CPU,
so a synchronous run that keeps C of N cores busy can gain at most N / C from it: the last lines give that bound.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a Ray this script starts binds 127.0.0.1 only
from bench_sync import synced  # noqa: E402  (scripts/: random actions through GodotVecEnv, no policy, no update)
from python_trainer.envs.game import godot_game  # noqa: E402

BALL_CHASE = ["--env-id", "ball_chase", "--agents-per-instance", "16"]
COURSE = ["--env-id", "CartPole-v1", "--learning-rate", "2.5e-4", "--num-envs", "4", "--num-steps", "128",
          "--num-minibatches", "4", "--update-epochs", "4"]


class BusyCores:
    """The whole machine's busy CPU time (every process: the games, the trainer, Ray's daemons), sampled every
    SAMPLE_S in a thread, so that a run's cores in use can be read off for any window of its wall clock."""

    SAMPLE_S = 0.2

    def __init__(self):
        self.samples: list = []  # (time.time(), busy CPU seconds so far, all CPUs together)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            t = psutil.cpu_times()
            self.samples.append((time.time(), sum(t) - t.idle - getattr(t, "iowait", 0.0)))
            self._stop.wait(self.SAMPLE_S)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> float:
        """Cores busy on average from ``start`` to ``end`` (time.time() values), from the samples nearest them."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, b0), (t1, b1) = inside[0], inside[-1]
        return (b1 - b0) / (t1 - t0)


def train(flags: list, total: int, seed: int = 1) -> dict:
    """One `godot-ppo train` run in its own process: {"sps": its last charts/SPS, "lag": its last policy lag,
    "cores": the machine's cores busy on average over its training loop (from its first update to its last)}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    busy = BusyCores()
    with tempfile.TemporaryDirectory(prefix="bench-async-") as root:
        cmd = [sys.executable, "-m", "python_trainer", "train", *flags, "--total-timesteps", str(total), "--seed",
               str(seed), "--eval-episodes", "0", "--checkpoint-every", "0", "--run-dir-root", root]
        try:
            out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
        finally:
            busy.stop()
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(flags)}: exit code {out.returncode}\n{out.stderr[-3000:]}")
        (run_dir,) = Path(root).iterdir()
        events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        events.Reload()
        value = {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
        sps_events = events.Scalars("charts/SPS")
    return {"sps": float(value["charts/SPS"][-1]), "lag": value.get("charts/policy_lag", [None])[-1],
            "cores": busy.between(sps_events[0].wall_time, sps_events[-1].wall_time)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--total-timesteps", type=int, default=400_000, help="ball_chase's steps per run")
    p.add_argument("--cartpole-timesteps", type=int, default=200_000)
    p.add_argument("--ray", action="store_true", help="also the 2-node Ray cluster, synchronous and --async")
    p.add_argument("--skip-cartpole", action="store_true")
    p.add_argument("--ray-instances", type=int, default=1, choices=(1, 2, 4),
                   help="with --ray: each worker's instances, 16 agents between them (2: two groups to pipeline)")
    args = p.parse_args()
    cluster = None
    if args.ray:
        from ray import cluster_utils

        cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "include_dashboard": False, "node_ip_address": "127.0.0.1"})
        cluster.add_node(num_cpus=2, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
    runs: dict = {}
    cores: dict = {}  # name -> the machine's busy cores over each run's training loop
    try:
        for r in range(args.rounds):
            kinds = {"ball_chase synced random": lambda: synced(godot_game("ball_chase"), 2, 16, 3000, pipelined=True),
                     "ball_chase PPO": lambda: train([*BALL_CHASE, "--num-instances", "2"], args.total_timesteps),
                     "ball_chase PPO --async": lambda: train([*BALL_CHASE, "--num-instances", "2", "--async"],
                                                             args.total_timesteps),
                     "ball_chase PPO --async --learner-nice 0": lambda: train(
                         [*BALL_CHASE, "--num-instances", "2", "--async", "--learner-nice", "0"],
                         args.total_timesteps)}
            if not args.skip_cartpole:
                kinds["CartPole PPO"] = lambda: train(COURSE, args.cartpole_timesteps)
                kinds["CartPole PPO --async"] = lambda: train([*COURSE, "--async"], args.cartpole_timesteps)
            if cluster is not None:
                ray_flags = ["--env-id", "ball_chase", "--num-instances", str(args.ray_instances),
                             "--agents-per-instance", str(16 // args.ray_instances),
                             "--ray-address", cluster.address, "--ray-workers", "2",
                             "--ray-cpus-per-worker", "2"]  # a worker to each 2-CPU node, whatever its instances
                kinds["Ray 2 nodes PPO"] = lambda: train(ray_flags, args.total_timesteps)
                kinds["Ray 2 nodes PPO --async"] = lambda: train([*ray_flags, "--async"], args.total_timesteps)
                kinds["Ray 2 nodes PPO --async --learner-nice 0"] = lambda: train(
                    [*ray_flags, "--async", "--learner-nice", "0"], args.total_timesteps)
            for name, measure in kinds.items():
                result = measure()
                if not isinstance(result, dict):  # synced random stepping: its steps/s alone
                    result = {"sps": result, "cores": float("nan")}
                runs.setdefault(name, []).append(result["sps"])
                cores.setdefault(name, []).append(result["cores"])
                busy = "" if np.isnan(result["cores"]) else f", {result['cores']:.2f} of {os.cpu_count()} cores busy"
                print(f"round {r + 1}: {name}: {result['sps']:,.0f} steps/s{busy}", flush=True)
    finally:
        if cluster is not None:
            cluster.shutdown()
    best = {name: max(values) for name, values in runs.items()}
    print("\n| run | steps/s, each round | best | cores busy, each round |\n|-|-|-|-|")
    for name, values in runs.items():
        print(f"| {name} | {', '.join(f'{v:,.0f}' for v in values)} | {best[name]:,.0f} | "
              f"{', '.join(f'{c:.2f}' for c in cores[name] if not np.isnan(c)) or '-'} |")
    print()
    ratios = [("ball_chase --async / synchronous", "ball_chase PPO --async", "ball_chase PPO"),
              ("ball_chase --async --learner-nice 0 / synchronous", "ball_chase PPO --async --learner-nice 0",
               "ball_chase PPO"),
              ("ball_chase --async / synced random", "ball_chase PPO --async", "ball_chase synced random"),
              ("ball_chase synchronous / synced random", "ball_chase PPO", "ball_chase synced random"),
              ("CartPole --async / synchronous", "CartPole PPO --async", "CartPole PPO"),
              ("Ray --async / synchronous", "Ray 2 nodes PPO --async", "Ray 2 nodes PPO"),
              ("Ray --async --learner-nice 0 / synchronous", "Ray 2 nodes PPO --async --learner-nice 0",
               "Ray 2 nodes PPO")]
    for label, a, b in ratios:
        if a in best and b in best:
            print(f"{label}: {best[a] / best[b]:.2f}x")
    # Overlap moves work in time; it adds no CPU. A synchronous run that keeps C of the machine's N cores busy can be
    # made at most N / C times as fast by overlapping its parts (and only if the overlap costs nothing).
    for name in ("ball_chase PPO", "CartPole PPO", "Ray 2 nodes PPO"):
        if name in cores:
            c = float(np.nanmedian(cores[name]))
            print(f"{name}: {c:.2f} of {os.cpu_count()} cores busy, so an overlap can make it at most "
                  f"{os.cpu_count() / c:.2f}x as fast here")
    print(f"(numpy {np.__version__}, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
