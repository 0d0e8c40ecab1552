"""What a camera policy costs in the engine per agent-decision (godot_project/addons/rl_sync/conv_network.gd).

A policy file of the given encoder (variants/cnn.py's CnnEncoder with the 64-64 tanh actor, random weights) is
played by the policy runner under godot3-server -s tests/cnn_parity.gd: --agents agents each decide --decisions
times on a random frame, through act() with the get_obs() Dictionary a camera game gives (the frame's conversion,
the frame stack, the CNN, the heads). The median of --repeats runs is reported per configuration, with the time
the file takes to load (check and compile). The goal is <= 5 ms per agent-decision at 36 x 36 x 3 for the default
(simple) encoder.

    .venv/bin/python scripts/bench_cnn_playback.py [--configs simple:36x36x3:1,...] [--agents 16] [--decisions 20]
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
import torch.nn as nn  # noqa: E402

from python_trainer.base import paths  # noqa: E402
from python_trainer.engine.policy_file import policy_dict, write_policy  # noqa: E402
from python_trainer.envs.images import ImageLayout  # noqa: E402
from python_trainer.variants.cnn import CnnEncoder  # noqa: E402

DEFAULT_CONFIGS = "simple:36x36x3:1,simple:36x36x3:4,simple:36x36x1:1,nature:36x36x3:1"
VECTOR = 3  # the vector keys' values beside the image (forager's own velocity)


def camera_policy(kind: str, shape: tuple, frame_stack: int) -> dict:
    layout = ImageLayout("camera_2d", *shape, VECTOR, frame_stack=frame_stack)
    encoder = CnnEncoder(layout.shape, kind)
    actor = nn.Sequential(nn.Linear(encoder.out_features + VECTOR, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 3))
    keys = [{"key": "move", "action_type": "discrete", "size": 3}]
    return policy_dict(actor, None, keys, env="bench", source={}, where="bench", encoder=encoder, image=layout)


def bench(policy_file: Path, agents: int, decisions: int) -> dict:
    proc = subprocess.run(
        ["godot3-server", "--path", str(paths.GODOT_PROJECT), "-s", "tests/cnn_parity.gd", f"--cnn_policy={policy_file}",
         f"--cnn_bench_agents={agents}", f"--cnn_bench_decisions={decisions}"],
        capture_output=True, text=True, timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"bench"')]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_cnn_playback: the runner failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(lines[0])["bench"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="encoder:HxWxC:frame_stack, comma-separated")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"camera policies in the engine, {args.agents} agents x {args.decisions} decisions (goal: <= 5 ms per "
          "agent-decision, simple encoder at 36x36x3)")
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs.split(","):
            kind, size, k = config.split(":")
            shape = tuple(int(v) for v in size.split("x"))
            path = write_policy(Path(tmp) / "policy.json", camera_policy(kind, shape, int(k)))
            runs = [bench(path, args.agents, args.decisions) for _ in range(args.repeats)]
            ms = statistics.median(r["ms_per_decision"] for r in runs)
            load = statistics.median(r["load_ms"] for r in runs)
            print(f"  {kind:6s} {size:9s} K={k}: {ms:6.2f} ms per agent-decision ({ms * args.agents:6.1f} ms for "
                  f"{args.agents} agents); load {load:5.0f} ms")


if __name__ == "__main__":
    main()
