"""Steps/s of `godot-ppo train` beside CleanRL's own ppo.py, on CartPole-v1 with the course command, alternated.

    .venv/bin/python scripts/bench_vs_cleanrl.py --cleanrl PATH/TO/cleanrl/ppo.py [--rounds 3] [--total-timesteps 100000]
                                                 [--async]

CleanRL is not on the package index in a usable form (its last release pins an old gym), so this script does not
ship it: give the path of CleanRL's gymnasium/tyro `cleanrl/ppo.py` (a clone of github.com/vwxyzjn/cleanrl). It runs
in a venv of its own (--venv, made on first use: the same torch 2.13.0 CPU build, gymnasium 0.29.1, tyro, tensorboard),
with OMP_NUM_THREADS=1: CleanRL's best case on 2 cores (with its default two threads it drops from about 8,200 to
1,600 steps/s as soon as anything else runs). Ours runs as a user runs it, with its defaults (--torch-threads 1).
Each round runs CleanRL, then ours, one at a time; the table gives each run's steps/s (CleanRL's last `SPS:` line,
our progress line's `SPS=` field: both global steps over wall-clock time since the loop started) and the ratio of
the best of each. --async runs ours a second time each round, with `--async` (docs/training.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COURSE = ["--learning-rate", "2.5e-4", "--num-envs", "4", "--num-steps", "128", "--num-minibatches", "4",
          "--update-epochs", "4"]
CLEANRL_PACKAGES = ["torch==2.13.0", "gymnasium==0.29.1", "numpy<2", "tyro", "tensorboard"]


def cleanrl_python(venv: Path) -> Path:
    """The venv's python, making the venv first when it does not exist."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv} for CleanRL ({', '.join(CLEANRL_PACKAGES)})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *CLEANRL_PACKAGES], check=True)
    return python


def last_sps(text: str, pattern: str) -> int:
    found = re.findall(pattern, text)
    if not found:
        raise SystemExit(f"no steps/s in the output:\n{text[-2000:]}")
    return int(found[-1])


def run_cleanrl(python: Path, script: Path, total: int, seed: int, work: Path) -> int:
    cmd = [str(python), str(script), "--env-id", "CartPole-v1", "--total-timesteps", str(total), "--seed", str(seed),
           *COURSE, "--no-cuda"]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"CleanRL failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return last_sps(out.stdout, r"SPS: (\d+)")


def run_ours(total: int, seed: int, work: Path, extra=()) -> int:
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "CartPole-v1", "--total-timesteps", str(total),
           "--seed", str(seed), *COURSE, "--run-dir-root", str(work / "runs"), *extra]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"godot-ppo train failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return last_sps(out.stdout, r"SPS=(\d+)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cleanrl", required=True, type=Path, help="CleanRL's cleanrl/ppo.py (gymnasium + tyro version)")
    p.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "cleanrl-venv")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--total-timesteps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--async", dest="async_rl", action="store_true", help="ours also with --async, after each round")
    a = p.parse_args()
    if not a.cleanrl.is_file():
        raise SystemExit(f"--cleanrl {a.cleanrl}: no such file (give the path of CleanRL's cleanrl/ppo.py)")
    python = cleanrl_python(a.venv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cleanrl-") as tmp:
        for k in range(a.rounds):
            work = Path(tmp) / f"round_{k}"
            work.mkdir()
            clean = run_cleanrl(python, a.cleanrl.resolve(), a.total_timesteps, a.seed, work)
            ours = run_ours(a.total_timesteps, a.seed, work)
            asynchronous = run_ours(a.total_timesteps, a.seed, work, ["--async"]) if a.async_rl else None
            rows.append((clean, ours, asynchronous))
            also = f", --async {asynchronous:,} ({asynchronous / clean:.2f}x)" if a.async_rl else ""
            print(f"round {k + 1}: CleanRL {clean:,} steps/s, godot-ppo {ours:,} steps/s ({ours / clean:.2f}x){also}",
                  flush=True)
    best = [max(r[i] for r in rows) if rows[0][i] is not None else None for i in range(3)]
    print(f"\nCartPole-v1, {a.total_timesteps:,} steps, seed {a.seed}, the course command, {a.rounds} rounds alternated")
    print("| run | CleanRL ppo.py (OMP_NUM_THREADS=1) | godot-ppo train | godot-ppo train --async |\n|-|-|-|-|")
    for k, row in enumerate(rows):
        print(f"| {k + 1} | " + " | ".join("-" if v is None else f"{v:,}" for v in row) + " |")
    print(f"| best | {best[0]:,} | " + " | ".join("-" if v is None else f"{v:,} ({v / best[0]:.2f}x)" for v in best[1:])
          + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
