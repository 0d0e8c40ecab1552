"""What the learning benchmarks share: one `godot-ppo train` run into its own folder, and the episodes it logged.

    from bench_runs import episodes, train      # scripts/bench_*.py, run from anywhere
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def train(root: Path, env: str, flags: list, steps: int, seed: int) -> int:
    """`godot-ppo train` (niced, no final evaluation) into ``root``, its output in root/train.log; a run that left a
    model.pt there is not run again (0). Ray, when the flags ask for it, binds to the loopback address."""
    root = Path(root)
    if list(root.glob("*/model.pt")):
        return 0
    root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", env, *flags, "--total-timesteps", str(steps),
           "--seed", str(seed), "--run-dir-root", str(root), "--eval-episodes", "0"]
    with open(root / "train.log", "w") as log:
        return subprocess.call(["nice", *cmd], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO),
                                    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})


def episodes(root: Path) -> Optional[tuple]:
    """(global steps, returns) of the newest run's episodes.csv under ``root``, or None before there is one."""
    files = sorted(Path(root).glob("*/episodes.csv"))
    if not files:
        return None
    with open(files[-1]) as f:
        rows = [(int(r["global_step"]), float(r["return"])) for r in csv.DictReader(f)]
    return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows])
