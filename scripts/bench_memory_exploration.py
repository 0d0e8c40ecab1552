"""Issue 14's acceptance runs: MLP vs LSTM on `memory`, PPO vs PPO+RND on `sparse_goal`, same budget and seeds; and
the LSTM on `memory` with its rollouts on two Ray workers (a Ray of this machine, bound to 127.0.0.1).

    python scripts/bench_memory_exploration.py                      # all runs (long: nice it, 2 at a time)
    python scripts/bench_memory_exploration.py --only memory_lstm_ray_1 --parallel 1
    python scripts/bench_memory_exploration.py --table-only         # table + plot from the runs already made

Each run is `godot-ppo train` with default settings plus the flag compared (memory: 400k steps, sparse_goal: 1M;
seeds 1-3); they go to runs/bench_i14/<name>/ (a run with a model.pt is not run again). The table gives, per run, the
mean return and the share of episodes with a positive return (sparse_goal: the goal reached) over the last 100
episodes, and the step at which the acceptance level was first reached (memory: trailing-100 mean return >= 0.9;
sparse_goal: the goal in >= half of the last 100 episodes); the plot (exports/policies/memory_exploration.png) the
trailing-100 mean return over global steps.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import bench_runs  # scripts/: the run and its episodes, shared by the benchmarks

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "runs" / "bench_i14"
PLOT = REPO / "exports" / "policies" / "memory_exploration.png"

# name -> (env, extra flags, total steps, seed)
RUNS = {}
for seed in (1, 2, 3):
    RUNS[f"memory_lstm_{seed}"] = ("memory", ["--lstm"], 400_000, seed)
    RUNS[f"memory_mlp_{seed}"] = ("memory", [], 400_000, seed)
    RUNS[f"sparse_goal_rnd_{seed}"] = ("sparse_goal", ["--rnd"], 1_000_000, seed)
    RUNS[f"sparse_goal_ppo_{seed}"] = ("sparse_goal", [], 1_000_000, seed)
    # two Ray workers x 1 instance x 8 agents: the 16 envs (2,048 samples an update) of the local LSTM runs, each
    # worker keeping its agents' LSTM states. With 16 agents a worker (32 envs) an update takes twice the samples and
    # 400k steps are half as many updates: seed 1 was still at chance (entropy log 3) at 400k there.
    RUNS[f"memory_lstm_ray_{seed}"] = ("memory", ["--lstm", "--ray-address", "local", "--ray-workers", "2",
                                                  "--agents-per-instance", "8"], 400_000, seed)


def run(name):
    env, flags, steps, seed = RUNS[name]
    return name, bench_runs.train(ROOT / name, env, flags, steps, seed)


def episodes(name):
    """(global steps, returns) of a run's episodes.csv, or None before it exists."""
    return bench_runs.episodes(ROOT / name)


def trailing(rets, window=100):
    return np.array([rets[max(0, i - window + 1) : i + 1].mean() for i in range(len(rets))])


def first_reached(steps, values, threshold, window=100):
    """The global step at which the trailing-``window`` mean of ``values`` first reaches ``threshold`` ("-": never)."""
    if len(values) < window:
        return "-"
    means = np.convolve(values, np.ones(window) / window, mode="valid")  # means[k]: episodes k .. k + window - 1
    hit = np.flatnonzero(means >= threshold)
    return f"{steps[hit[0] + window - 1]:,}" if hit.size else "-"


def table():
    """One row per run: the trailing-100 mean return and goal share at the end, and when the game's acceptance level
    was first reached (memory: a mean return >= 0.9; sparse_goal: the goal in >= half of the last 100 episodes)."""
    print(f"{'run':22} {'steps':>9} {'episodes':>9} {'mean return':>12} {'goal share':>11} {'first reached':>14}")
    for name in RUNS:
        data = episodes(name)
        if data is None or not len(data[1]):
            continue
        steps, rets = data
        goals = (rets > 0).astype(float)
        first = first_reached(steps, rets, 0.9) if name.startswith("memory") else first_reached(steps, goals, 0.5)
        print(f"{name:22} {steps[-1]:>9,} {len(rets):>9} {rets[-100:].mean():>12.2f} {goals[-100:].mean():>11.2f} "
              f"{first:>14}")


def plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, env, pairs in ((axes[0], "memory", ("lstm", "mlp")), (axes[1], "sparse_goal", ("rnd", "ppo"))):
        for kind, color in zip(pairs, ("C0", "C1")):
            for seed in (1, 2, 3):
                data = episodes(f"{env}_{kind}_{seed}")
                if data is None or not len(data[1]):
                    continue
                ax.plot(data[0], trailing(data[1]), color=color, alpha=0.8,
                        label=kind.upper() if seed == 1 else None)
        ax.set_title(env + (" (return: +1 right side, -1 wrong)" if env == "memory" else " (return: 1 = goal reached)"))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e3:.0f}k"))
        ax.set_xlabel("global step")
        ax.set_ylabel("mean return of the last 100 episodes")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=90)
    print(f"plot: {PLOT}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--only", nargs="*", help="run names (default: all)")
    a = p.parse_args()
    if not a.table_only:
        with ThreadPoolExecutor(a.parallel) as pool:
            for name, code in pool.map(run, a.only or list(RUNS)):
                print(f"{name}: exit {code}", flush=True)
    table()
    plot()


if __name__ == "__main__":
    main()
