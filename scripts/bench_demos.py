"""Issue 25's acceptance runs: PPO that starts from demonstrations (`godot-ppo train --demos`) against plain PPO.

    python scripts/bench_demos.py                          # record, then every run (long: 2 at a time, niced)
    python scripts/bench_demos.py --only jumper_clone      # one run
    python scripts/bench_demos.py --table-only             # the table from the runs already made

1. The demonstrations, recorded by the addon (--record_demos) from committed drivers, headless:
   - sparse_goal: 10 episodes of agent 0 driven by exports/policies/sparse_goal_route.json, a hand-written lookup
     table from the grid cell to a move (scripts/make_sparse_goal_route.py), which reaches the goal every episode;
   - jumper: 20 episodes of agent 0 driven by the pretrained exports/policies/jumper.json.
2. sparse_goal, seeds 1-3, 300k steps each, default flags: with --demos and without. The goal share is the share
   of the last 100 episodes with a positive return (as scripts/bench_memory_exploration.py counts it).
3. jumper: the clone alone (--total-timesteps 0) played by the engine over 32 episodes with --env_seed=9, against
   random play and the pretrained policy (the clone passes at half the way from random to pretrained); then PPO with
   the demonstrations under the pretrained run's flags (2 instances x 16 agents) for half its 4.5M steps: the step
   at which the trailing-100 training return first reaches the README's 18.4, and the final policy in the engine.

Runs go to runs/bench_i25/<name>/ (a run with a model.pt is not run again).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import bench_runs  # scripts/: the run and its episodes, shared by the benchmarks

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "runs" / "bench_i25"
BINARY = REPO / "exports" / "headless" / "rl_games.x86_64"
POLICIES = REPO / "exports" / "policies"
SPARSE_DEMOS, JUMPER_DEMOS = ROOT / "sparse_goal_demos.json", ROOT / "jumper_demos.json"
JUMPER_README_RETURN = 18.4
EVAL_SEED, EVAL_EPISODES = 9, 32

# name -> (env, extra flags, total steps, seed)
RUNS = {"jumper_clone": ("jumper", ["--demos", str(JUMPER_DEMOS)], 0, 1)}
for seed in (1, 2, 3):
    RUNS[f"sparse_goal_demos_{seed}"] = ("sparse_goal", ["--demos", str(SPARSE_DEMOS)], 300_000, seed)
    RUNS[f"sparse_goal_ppo_{seed}"] = ("sparse_goal", [], 300_000, seed)
JUMPER_FLAGS = ["--num-instances", "2", "--agents-per-instance", "16"]  # the pretrained run's
RUNS["jumper_demos_1"] = ("jumper", ["--demos", str(JUMPER_DEMOS), *JUMPER_FLAGS], 2_250_000, 1)
# Plain PPO, the same flags and seed, for as long as the demonstrations' run took to reach 18.4 twice over: if it
# has not reached it by then, the demonstrations took at most half its steps.
RUNS["jumper_ppo_1"] = ("jumper", JUMPER_FLAGS, 700_000, 1)


def game(*args, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run([str(BINARY), *args, "--fixed-fps", "60"], capture_output=True, text=True, timeout=timeout)


def record() -> None:
    ROOT.mkdir(parents=True, exist_ok=True)
    for env, policy, episodes, out in (("sparse_goal", "sparse_goal_route.json", 10, SPARSE_DEMOS),
                                       ("jumper", "jumper.json", 20, JUMPER_DEMOS)):
        if out.exists():
            continue
        result = game(f"--env={env}", f"--policy={POLICIES / policy}", f"--record_demos={out}",
                      f"--record_episodes={episodes}", "--env_seed=0")
        if result.returncode != 0:
            raise SystemExit(f"recording {env} failed: {result.stderr[-2000:]}")
        print(f"recorded {out}: {result.stdout.strip().splitlines()[-1]}", flush=True)


def engine_eval(env: str, policy: str) -> float:
    result = game(f"--env={env}", f"--policy={policy}", f"--eval_episodes={EVAL_EPISODES}", f"--env_seed={EVAL_SEED}")
    line = next(x for x in result.stdout.splitlines() if x.startswith('{"eval"'))
    return json.loads(line)["eval"]["mean_return"]


def run(name):
    env, flags, steps, seed = RUNS[name]
    return name, bench_runs.train(ROOT / name, env, flags, steps, seed)


def episodes(name):
    """(global steps, returns) of a run's episodes.csv, or None before it exists."""
    return bench_runs.episodes(ROOT / name)


def first_reached(steps, values, threshold, window=100):
    for i in range(window, len(values) + 1):
        if np.mean(values[i - window : i]) >= threshold:
            return int(steps[i - 1])
    return None


def table() -> None:
    print("| run | episodes | goal share (last 100) | first step with goal share >= 0.5 |")
    print("|-|-|-|-|")
    for name in [n for n in RUNS if n.startswith("sparse_goal")]:
        data = episodes(name)
        if data is None:
            print(f"| {name} | not run | | |")
            continue
        steps, returns = data
        hits = (returns > 0).astype(float)
        print(f"| {name} | {len(returns)} | {hits[-100:].mean():.2f} | {first_reached(steps, hits, 0.5)} |")
    clone = sorted((ROOT / "jumper_clone").glob("*/policy.json"))
    if clone:
        random_r = engine_eval("jumper", "random")
        pretrained = engine_eval("jumper", str(POLICIES / "jumper.json"))
        cloned = engine_eval("jumper", str(clone[-1]))
        halfway = random_r + 0.5 * (pretrained - random_r)
        print(f"\njumper in the engine, {EVAL_EPISODES} episodes, --env_seed={EVAL_SEED}: random {random_r:.2f}, "
              f"pretrained {pretrained:.2f}, clone {cloned:.2f} (halfway: {halfway:.2f}; "
              f"{'passes' if cloned >= halfway else 'fails'})")
    for name in ("jumper_demos_1", "jumper_ppo_1"):
        data = episodes(name)
        if data is None:
            print(f"{name}: not run")
            continue
        steps, returns = data
        reached = first_reached(steps, returns, JUMPER_README_RETURN)
        policy = sorted((ROOT / name).glob("*/policy.json"))  # the last checkpoint's (a run stopped early has one)
        engine = f"; its last policy.json in the engine: {engine_eval('jumper', str(policy[-1])):.2f}" if policy else ""
        print(f"{name}: {len(returns)} episodes up to step {int(steps[-1])}, trailing-100 return "
              f"{returns[-100:].mean():.2f}, first >= {JUMPER_README_RETURN} at step {reached}{engine}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="run only these")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if not args.table_only:
        record()
        names = args.only or list(RUNS)
        with ThreadPoolExecutor(args.parallel) as pool:
            for name, code in pool.map(run, names):
                print(f"{name}: exit {code}", flush=True)
    table()


if __name__ == "__main__":
    main()
