"""What the in-engine LSTM cell (godot_project/addons/rl_sync/lstm_cell.gd) costs per frame for N agents.

Each agent steps once per frame (its input already in Vector3 chunks, as the policy runner's encoder leaves it),
under godot3-server -s tests/lstm_parity.gd; the median of --repeats runs is reported per (input, hidden) size.
The goal is <= 5 ms per frame for 16 agents, so a recurrent policy still plays back at 60 fps.

    .venv/bin/python scripts/bench_lstm_cell.py [--agents 16] [--sizes 64x64,64x32,32x32] [--frames 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from python_trainer.base import paths  # noqa: E402
from python_trainer.variants.recurrent import LSTMCore  # noqa: E402


def bench(input_size: int, hidden_size: int, agents: int, frames: int) -> float:
    core = LSTMCore(input_size, hidden_size)
    inputs = torch.rand(1, agents, input_size).tolist()
    case = {"weights": core.export_weights(), "agents": agents, "inputs": inputs, "resets": [[True] * agents]}
    with tempfile.TemporaryDirectory() as tmp:
        case_file = Path(tmp) / "case.json"
        case_file.write_text(json.dumps(case))
        proc = subprocess.run(
            ["godot3-server", "--path", str(paths.GODOT_PROJECT), "-s", "tests/lstm_parity.gd",
             f"--lstm_case={case_file}", f"--lstm_bench_frames={frames}"],
            capture_output=True, text=True, timeout=300,
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"bench"')]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_lstm_cell: the cell failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(lines[0])["bench"]["ms_per_frame"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--sizes", default="64x64,64x32,32x32", help="input x hidden sizes, comma-separated")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"LSTM cell, {args.agents} agents, one step each per frame (goal: <= 5 ms per frame)")
    for size in args.sizes.split(","):
        input_size, hidden_size = (int(v) for v in size.split("x"))
        ms = statistics.median(bench(input_size, hidden_size, args.agents, args.frames) for _ in range(args.repeats))
        per_agent = ms / args.agents
        print(f"  input {input_size:3d}, hidden {hidden_size:3d}: {ms:6.2f} ms per frame  ({per_agent:.3f} ms per agent)")


if __name__ == "__main__":
    main()
