"""Record the same-seed fixtures that tests/test_same_seed.py compares every later trainer against.

    .venv/bin/python scripts/make_same_seed_fixtures.py [--code DIR]     # DIR: the checkout whose trainer to record

For each run of tests/fixtures/same_seed/runs.json it trains once with `python -m python_trainer train` (from DIR)
and keeps, under tests/fixtures/same_seed/<name>/, the run's args.json, episodes.csv and model.pt (the run's final
checkpoint.pt has the same bytes), for the same-seed comparison and the resume-and-play test of an old checkpoint.
`capability.json` records torch's CPU capability: a machine with another one may round differently, and the test
skips there.
Rerun it only when a change of the numbers is on purpose, and say why in the commit (and in test_same_seed.py's
docstring). On an AVX-512 machine, record with the AVX2 kernels, as the test repeats the runs: run it with the
environment of test_same_seed.AVX2_ON_AVX512 set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "same_seed"

# name -> the train flags, and the flags of every run (--seed 1, no evaluation, one checkpoint at the end)
_TABLE = json.loads((FIXTURES / "runs.json").read_text())
RUNS, COMMON = _TABLE["runs"], _TABLE["common"]


def train_command(name: str, run_root: Path) -> list[str]:
    return ["-m", "python_trainer", "train", *RUNS[name], *COMMON, "--run-dir-root", str(run_root)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=str(REPO), help="the checkout whose trainer records the fixtures")
    parser.add_argument("--only", nargs="*", default=None, help="record only these runs")
    args = parser.parse_args()
    import torch

    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / "capability.json").write_text(json.dumps({
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}, indent=2) + "\n")
    env = dict(os.environ, PYTHONPATH=args.code)
    for name in args.only or RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            subprocess.run([sys.executable, *train_command(name, root)], cwd=args.code, env=env, check=True,
                           timeout=900)
            (run_dir,) = root.iterdir()
            out = FIXTURES / name
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for f in ("args.json", "model.pt", "episodes.csv"):  # checkpoint.pt: the same bytes as model.pt
                shutil.copy2(run_dir / f, out / f)
            print(f"{name}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
