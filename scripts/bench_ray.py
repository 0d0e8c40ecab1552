"""Benchmark: the Ray rollout path against the local one, same total instances and rollout settings.

    .venv/bin/python scripts/bench_ray.py [--total-timesteps 300000] [--seeds 1] [--address local]

Runs `godot-ppo train` on ball_chase (16 agents per instance, the default rollout settings) three ways, each in
its own process: local with 2 instances (pipelined), Ray with 2 workers x 1 instance, Ray with 1 worker x 2
instances. Prints steps/s (the run's last charts/SPS), the mean return of the last 100 training episodes, and
the Ray runs' per-update costs from TensorBoard: fragment bytes, broadcast time (ray.put of the weights and
statistics), collect time (the whole rollout, the slowest worker included), learner time (GAE + update +
logging) and each worker's steps/s, from which the closing estimate for more hosts is made:

    update time on H hosts  ~  collect(one host's workers) + transfer(H fragments) + learner(H x batch)
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def scalars(run_dir: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def run(name, extra, total, seed, root):
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "ball_chase", "--agents-per-instance", "16",
           "--total-timesteps", str(total), "--seed", str(seed), "--eval-episodes", "0", "--exp-name", name,
           "--run-dir-root", str(root), *extra]
    env = dict(os.environ)
    if "local" in extra:  # a Ray started for the run listens on 127.0.0.1 only (train sets this itself too)
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{name}: exit code {out.returncode}\n{out.stderr[-3000:]}")
    (run_dir,) = [p for p in Path(root).iterdir() if p.is_dir() and f"__{name}__{seed}__" in p.name]
    s = scalars(run_dir)
    returns = s.get("charts/episodic_return", [])
    row = {"name": name, "seed": seed, "sps": s["charts/SPS"][-1], "ret100": float(np.mean(returns[-100:]))}
    if "ray/fragment_bytes" in s:
        skip = slice(2, None)  # the first updates include the workers' warm-up
        row.update({k: float(np.median(s[f"ray/{k}"][skip])) for k in
                    ("fragment_bytes", "broadcast_s", "collect_s", "learner_s")})
        row["worker_sps"] = [round(float(np.median(v[skip]))) for k, v in sorted(s.items())
                             if k.startswith("ray/worker_")]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--total-timesteps", type=int, default=300_000)
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--address", default="local", help="--ray-address for the Ray runs")
    a = p.parse_args()
    configs = [
        ("local_x2", ["--num-instances", "2"]),
        ("ray_2x1", ["--num-instances", "1", "--ray-address", a.address, "--ray-workers", "2"]),
        ("ray_1x2", ["--num-instances", "2", "--ray-address", a.address, "--ray-workers", "1"]),
    ]
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as root:
        for seed in a.seeds:
            for name, extra in configs:
                print(run(name, extra, a.total_timesteps, seed, root), flush=True)


if __name__ == "__main__":
    main()
