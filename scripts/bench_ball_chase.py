"""Benchmark: how long PPO takes to learn ball_chase with 1 and 2 headless instances (16 agents each).

    .venv/bin/python scripts/bench_ball_chase.py [--instances 1 2] [--target 25] [--total-timesteps 1000000]

Each configuration runs `godot-ppo train` (the `make demo` settings) and reads the run's TensorBoard events:
time-to-target is the wall time from the start of the command until the mean of the last 100 training
episodes first reaches --target (a random policy scores about -1; the pretrained policy about 37).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from python_trainer import cli  # noqa: E402


def episodic_returns(run_dir: Path):
    """[(wall_time, global_step, return)] of charts/episodic_return, in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [(e.wall_time, e.step, e.value) for e in events.Scalars("charts/episodic_return")]


def run(instances, target, total_timesteps, root, seed):
    exp = f"bench_x{instances}"
    started = time.time()
    code = cli.main([
        "train",
        "--env-id", "ball_chase", "--num-instances", str(instances), "--agents-per-instance", "16",
        "--total-timesteps", str(total_timesteps), "--exp-name", exp, "--seed", str(seed),
        "--run-dir-root", str(root), "--eval-episodes", "0",
    ])
    wall = time.time() - started
    if code != 0:
        raise SystemExit(f"training with {instances} instance(s) failed (exit code {code})")
    run_dir = max(root.glob(f"ball_chase__{exp}__{seed}__*"), key=lambda p: p.stat().st_mtime)
    episodes = episodic_returns(run_dir)
    returns = np.array([r for _, _, r in episodes])
    trailing = np.array([returns[max(0, i - 99): i + 1].mean() for i in range(len(returns))])
    hit = np.flatnonzero(trailing >= target)
    result = {"instances": instances, "wall_s": wall, "steps": total_timesteps, "sps": total_timesteps / wall,
              "final_mean_100": float(trailing[-1]) if len(trailing) else float("nan"),
              "steps_to_target": None, "seconds_to_target": None}
    if hit.size:
        wall_time, step, _ = episodes[hit[0]]
        result.update(steps_to_target=step, seconds_to_target=wall_time - started)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--target", type=float, default=25.0)
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--root", type=Path, default=Path("runs/bench_ball_chase"))
    args = parser.parse_args()
    results = [run(n, args.target, args.total_timesteps, args.root, args.seed) for n in args.instances]
    print(f"\nball_chase, 16 agents per instance, {args.total_timesteps:,} steps, target: trailing-100 mean >= "
          f"{args.target:g}")
    print("| instances | steps/s | wall s | steps to target | seconds to target | final trailing-100 mean |")
    print("|---|---|---|---|---|---|")
    for r in results:
        to_steps = f"{r['steps_to_target']:,}" if r["steps_to_target"] else "not reached"
        to_secs = f"{r['seconds_to_target']:.0f}" if r["seconds_to_target"] else "-"
        print(f"| {r['instances']} | {r['sps']:,.0f} | {r['wall_s']:.0f} | {to_steps} | {to_secs} | "
              f"{r['final_mean_100']:.1f} |")


if __name__ == "__main__":
    main()
