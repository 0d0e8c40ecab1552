"""jumper at its hard setting, with and without a curriculum: the claim of docs/env_params.md.

For each seed, two trainings with the same budget (--total-timesteps, and at most --minutes of wall time each: a run
still going then gets SIGTERM, which saves its checkpoint and policy file): one with the curriculum of
docs/jumper_hard_curriculum.toml (from jumper's default course to the hard one in four lessons), one on the hard course
from the start (--env-param with the curriculum's last lessons). The two of a seed run side by side, so they share
the machine alike. Then each policy file plays --eval-episodes episodes inside the engine at the hard setting
(--env_param, --policy, --eval_episodes); the score is the share of episodes that reached a goal platform (the game's
get_info() "reached_goal", averaged by the engine's report).

    .venv/bin/python scripts/bench_curriculum.py --seeds 1 2 [--total-timesteps 4000000] [--minutes 30]

Prints one JSON line per run and a summary; --out FILE keeps them (JSON).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from python_trainer.run import curriculum  # noqa: E402
from python_trainer.engine import in_engine  # noqa: E402

CURRICULUM = REPO / "docs" / "jumper_hard_curriculum.toml"


def hard_setting() -> dict:
    """The hard course: the last lesson of each parameter of the curriculum file (one place states it)."""
    params, _ = curriculum.load(CURRICULUM)
    return {name: lessons[-1].value.center() for name, lessons in params.items()}


def train(seed: int, mode: str, args, root: Path) -> subprocess.Popen:
    flags = ["--curriculum", str(CURRICULUM)] if mode == "curriculum" else [
        a for name, value in hard_setting().items() for a in ("--env-param", f"{name}={value:g}")]
    where = ["--env-path", args.env_path] if args.env_path else []
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "jumper", *where, "--num-instances", "2",
           "--agents-per-instance", "16", "--total-timesteps", str(args.total_timesteps), "--seed", str(seed),
           "--exp-name", mode, "--eval-episodes", "0", "--run-dir-root", str(root), *flags]
    log = open(root / f"{mode}_{seed}.log", "w")
    return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def run_pair(seed: int, args, root: Path) -> list[dict]:
    procs = {mode: train(seed, mode, args, root) for mode in ("curriculum", "no_curriculum")}
    start = time.time()
    ended = {}
    while len(ended) < len(procs):
        for mode, proc in procs.items():
            if mode not in ended and proc.poll() is not None:
                ended[mode] = time.time() - start
        if time.time() - start > args.minutes * 60:
            for mode, proc in procs.items():
                if mode not in ended:
                    os.killpg(proc.pid, signal.SIGTERM)  # saves the checkpoint and the policy file, then exits 143
            for mode, proc in procs.items():
                if mode not in ended:
                    proc.wait(timeout=300)
                    ended[mode] = time.time() - start
        time.sleep(5)
    out = []
    for mode in procs:
        (run_dir,) = sorted(root.glob(f"jumper__{mode}__{seed}__*"))
        rows = list(csv.DictReader(open(run_dir / "episodes.csv")))
        report = in_engine.evaluate_in_engine(run_dir / "policy.json", env_path=args.env_path,
                                             episodes=args.eval_episodes, seed=0,
                                             env_params=hard_setting(), timeout=1800)
        out.append({"seed": seed, "mode": mode, "exit": procs[mode].returncode, "minutes": round(ended[mode] / 60, 1),
                    "global_step": int(rows[-1]["global_step"]) if rows else 0,
                    "last_lesson": int(rows[-1]["lesson"]) if rows and "lesson" in rows[-1] else None,
                    "eval_episodes": report["episodes"], "hard_goal_rate": report["info_means"].get("reached_goal"),
                    "hard_mean_return": report["mean_return"], "run_dir": str(run_dir)})
        print(json.dumps(out[-1]), flush=True)
    return out


def plot(results: list[dict], out: Path) -> None:
    """The goal rate of training's ended episodes (TensorBoard episode_info/reached_goal, mean of the last 200) of
    every run, the curriculum's lesson changes dashed: with it, the rate is at the lesson's course, not the hard one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        acc = EventAccumulator(r["run_dir"], size_guidance={"scalars": 0})
        acc.Reload()
        events = acc.Scalars("episode_info/reached_goal")
        steps, rate = np.array([e.step for e in events]), np.array([e.value for e in events])
        window = min(200, len(rate))
        trailing = np.convolve(rate, np.ones(window) / window, mode="valid")
        style = "-" if r["mode"] == "curriculum" else ":"
        line, = ax.plot(steps[window - 1:], trailing, style, label=f"{r['mode'].replace('_', ' ')}, seed {r['seed']} "
                        f"(hard, in the engine: {r['hard_goal_rate']:.2f})")
        if r["mode"] == "curriculum" and "curriculum/lesson" in acc.Tags()["scalars"]:
            lessons = acc.Scalars("curriculum/lesson")
            for before, after in zip(lessons, lessons[1:]):
                if after.value > before.value:
                    ax.axvline(after.step, color=line.get_color(), ls="--", lw=0.8, alpha=0.6)
    ax.set_xlabel("global step")
    ax.set_ylabel("goal rate of ended episodes (last 200)")
    ax.set_title("jumper: a curriculum to the hard course (dashed: lesson changes) vs the hard course from the start",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--total-timesteps", type=int, default=4_000_000)
    parser.add_argument("--minutes", type=float, default=30.0, help="wall-time cap of each run")
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--root", default=str(REPO / "runs" / "bench_curriculum"))
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", default=None, help="a PNG of the training curves")
    parser.add_argument("--plot-only", default=None, metavar="RESULTS_JSON",
                        help="no training: plot the runs of an earlier --out file")
    parser.add_argument("--env-path", default=None, help="the export to train and evaluate with (default: this "
                        "repository's; a copy keeps long runs safe from a new export)")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()), Path(args.plot or "curriculum.png"))
        return 0
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"hard_setting": hard_setting(), "total_timesteps": args.total_timesteps,
                      "minutes": args.minutes}), flush=True)
    results = [r for seed in args.seeds for r in run_pair(seed, args, root)]
    for seed in args.seeds:
        rates = {r["mode"]: r["hard_goal_rate"] for r in results if r["seed"] == seed}
        ok = rates["curriculum"] >= 0.3 and rates["curriculum"] >= 2 * rates["no_curriculum"]
        print(f"seed {seed}: hard goal rate {rates['curriculum']:.3f} with the curriculum, "
              f"{rates['no_curriculum']:.3f} without: {'meets' if ok else 'misses'} the claim (>= 0.3 and >= 2x)")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
