"""Record the same-seed fixtures that tests/test_same_seed.py compares every later trainer against.

    .venv/bin/python scripts/make_same_seed_fixtures.py [--code DIR] [--set NAME] [--only RUN ...]

DIR: the checkout whose trainer to record (default: this one). The runs are kept in sets, one per kind of float
kernels (tests/same_seed_kernels.py: Intel's and AMD's CPUs round the same run differently): NAME is the set to
(re)record, a folder under tests/fixtures/same_seed/ (default: the set whose fingerprint is this machine's). For
each run of tests/fixtures/same_seed/runs.json it trains once with `python -m python_trainer train` (from DIR), held
to the recorded kernels as the test holds it (an AVX-512 machine to AVX2), and keeps under NAME/<run>/ the run's
args.json, episodes.csv and model.pt (the run's final checkpoint.pt has the same bytes); kernels.json gets the set's
fingerprint and the CPU it was recorded on.
Rerun it only when a change of the numbers is on purpose, and say why in the commit (and in test_same_seed.py's
docstring), or to add a set for a new kind of machine (recorded with the trainer of the fixtures' last commit).
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
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from python_trainer.tools.profile.sample import cpu_model  # noqa: E402
from same_seed_kernels import SETS_FILE, fingerprint, kernels_env, read_sets, set_of  # noqa: E402

# name -> the train flags, and the flags of every run (--seed 1, no evaluation, one checkpoint at the end)
_TABLE = json.loads((FIXTURES / "runs.json").read_text())
RUNS, COMMON = _TABLE["runs"], _TABLE["common"]


def train_command(name: str, run_root: Path) -> list[str]:
    return ["-m", "python_trainer", "train", *RUNS[name], *COMMON, "--run-dir-root", str(run_root)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=str(REPO), help="the checkout whose trainer records the fixtures")
    parser.add_argument("--set", dest="kernel_set", default=None,
                        help="the fixture set (default: the one recorded with this machine's kernels)")
    parser.add_argument("--only", nargs="*", default=None, help="record only these runs")
    args = parser.parse_args()
    kernels = read_sets()
    env = kernels_env(kernels["cpu_capability"])
    if isinstance(env, str):
        raise SystemExit(f"cannot record here: {env}")
    here = fingerprint(env)
    name = args.kernel_set or set_of(kernels, here)
    if name is None:
        raise SystemExit(f"no fixture set holds this machine's kernels (fingerprint {here}): name one, --set NAME")
    kernels["sets"][name] = {"fingerprint": here, "recorded_on": cpu_model() + (", held to AVX2" if env else "")}
    SETS_FILE.write_text(json.dumps(kernels, indent=2) + "\n")
    env = dict(os.environ, PYTHONPATH=args.code, **env)
    for run in args.only or RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            subprocess.run([sys.executable, *train_command(run, root)], cwd=args.code, env=env, check=True,
                           timeout=900)
            (run_dir,) = root.iterdir()
            out = FIXTURES / name / run
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for f in ("args.json", "model.pt", "episodes.csv"):  # checkpoint.pt: the same bytes as model.pt
                shutil.copy2(run_dir / f, out / f)
            print(f"{run}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
