"""What a weight update costs the in-engine actors (issue 58), against today's load of a policy file and a forward pass.

For each network size, a policy B is loaded and compiled under `godot3-server -s tests/weights_parity.gd`, then given
policy A's weights message --updates times (each update: bytes2var of the binary message, then weights_setter.gd's
set from the buffer, as the game does after every training update); the medians are printed beside the median of a
few loads of A's file as --policy loads one (JSON parse, the check of every number, the compile of the forward pass)
and of a forward pass on one observation (normalisation included); and the actors' load, once a session, which
compiles the setter too; and the forward pass of the same network loaded for --policy playback (no setter, today's
code), interleaved with the actors' one, which should be no faster. The sizes: ball_chase's and Dodge the Creeps'
network (26 inputs, 64 x 64 tanh, two discrete keys of 3) and one 256 wide, both with observation normalisation.
The goal: an update costs <= 10% of collecting one fragment on a one-agent game, which is at least --num-steps
forward passes (and as many game steps), so the last column should stay well under 10%.

    .venv/bin/python scripts/bench_weights.py [--sizes 26-64-64-6,26-256-256-6] [--updates 100] [--num-steps 128]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from python_trainer.base import paths  # noqa: E402
from python_trainer.engine.policy_file import policy_dict  # noqa: E402
from python_trainer.engine.policy_weights import flat_weights  # noqa: E402

POOL_REAL_ARRAY = 22  # Godot's Variant type of PoolRealArray: the weights message is var2bytes of one


def policy(seed: int, sizes: list) -> dict:
    """A tanh MLP of ``sizes`` (observations first) with random weights, normalised observations and discrete keys
    of 3 for its outputs."""
    torch.manual_seed(seed)
    modules = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        modules += [nn.Linear(n_in, n_out), nn.Tanh()]
    keys = [{"key": f"key{i}", "action_type": "discrete", "size": 3} for i in range(sizes[-1] // 3)]
    rng = np.random.default_rng(seed)
    stats = {"mean": rng.uniform(-1, 1, sizes[0]), "var": rng.uniform(0.5, 2, sizes[0]), "epsilon": 1e-8, "clip": 10.0}
    return policy_dict(nn.Sequential(*modules[:-1]), stats, keys, env="bench", source={}, where="bench")


def bench(sizes: list, updates: int) -> dict:
    a, b = policy(1, sizes), policy(2, sizes)
    values = flat_weights(a)
    with tempfile.TemporaryDirectory(prefix="bench-weights-") as tmp:
        tmp = Path(tmp)
        (tmp / "a.json").write_text(json.dumps(a))
        (tmp / "b.json").write_text(json.dumps(b))
        (tmp / "weights.bin").write_bytes(struct.pack("<II", POOL_REAL_ARRAY, values.size) + values.astype("<f4").tobytes())
        obs = np.random.default_rng(0).uniform(-1, 1, (1, sizes[0])).tolist()
        (tmp / "case.json").write_text(json.dumps({"target": str(tmp / "b.json"), "source": str(tmp / "a.json"),
                                                   "buffer": str(tmp / "weights.bin"), "observations": obs}))
        proc = subprocess.run(
            ["godot3-server", "--path", str(paths.GODOT_PROJECT), "-s", "tests/weights_parity.gd",
             f"--weights_case={tmp / 'case.json'}", f"--weights_bench={updates}"],
            capture_output=True, text=True, timeout=600,
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"bench"')]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_weights: {sizes} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(lines[0])["bench"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="26-64-64-6,26-256-256-6", help="layer sizes, observations first")
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--num-steps", type=int, default=128, help="a fragment's decision steps (train's --num-steps)")
    args = parser.parse_args()
    print(f"medians: {args.updates} updates, {args.updates} forward passes (one observation), 5 loads of the file")
    print("sizes              values   update  load (today)  load/update  forward  update/forward  "
          f"update / {args.num_steps} forwards  actors' load  playback's forward")
    for size in args.sizes.split(","):
        r = bench([int(v) for v in size.split("-")], args.updates)
        print(f"{size:16s} {r['weights']:8d} {r['update_us'] / 1e3:6.2f} ms {r['load_us'] / 1e3:9.1f} ms "
              f"{r['load_us'] / r['update_us']:9.0f}x {r['forward_us']:7.0f} µs {r['update_us'] / r['forward_us']:11.1f}"
              f"  {100 * r['update_us'] / (args.num_steps * r['forward_us']):19.1f}%  {r['settable_load_us'] / 1e3:9.1f} ms  {r['playback_forward_us']:12.0f} µs")


if __name__ == "__main__":
    main()
