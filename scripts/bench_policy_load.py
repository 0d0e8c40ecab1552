"""How long the engine takes to load a policy file, and what one forward pass then costs, per MLP shape.

Each shape (depth x width, memory's 4 observations in and 3 actions out; or the layer sizes, observations first and
a continuous key's size last, as 12-65536-2) is written as a policy file, loaded by
policy_runner.gd under `godot3-server -s` (the load is timed alone: the file's JSON parse, its checks and the
compile of the forward pass), then run --calls times on one observation. --before DIR runs the same files on
another checkout's godot_project (say `git worktree add /tmp/old main`) in the same run, side by side.
The goal (issues 36 and 55): no file the format admits takes more than seconds to load, and load time grows linearly
in the weights, however wide one row is (12-65536-2: one row of 65,536 inputs per output).

    .venv/bin/python scripts/bench_policy_load.py [--shapes 2x64,32x64,32x128,3x512] [--before /tmp/old]
    .venv/bin/python scripts/bench_policy_load.py --shapes 12-6144-2,12-65536-2,12-730-730-2 --calls 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from python_trainer.base import paths  # noqa: E402
from python_trainer.engine.policy_file import FORMAT, MLP_VERSION, action_rule  # noqa: E402

# Loads the file given by --bench_policy, times it, runs the forward pass --bench_calls times, prints one JSON line.
BENCH_GD = """extends SceneTree
const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")


func _init():
\tvar args := {}
\tfor arg in OS.get_cmdline_args():
\t\tif arg.begins_with("--bench_") and "=" in arg:
\t\t\targs[arg.split("=")[0]] = arg.split("=", true, 1)[1]
\tvar runner = PolicyRunner.new()
\tvar t0 := OS.get_ticks_usec()
\tvar error: String = runner.load_file(args["--bench_policy"])
\tvar load_s := (OS.get_ticks_usec() - t0) / 1e6
\tif error != "":
\t\tprinterr(error)
\t\tquit(1)
\t\treturn
\trunner.set_agent_count(1)
\tvar obs := []
\tfor i in range(runner.observation_size):
\t\tobs.append(0.1 * (i % 7) - 0.3)
\tvar calls := int(args["--bench_calls"])
\tt0 = OS.get_ticks_usec()
\tfor _i in range(calls):
\t\trunner.forward(obs, 0)
\tvar forward_us := float(OS.get_ticks_usec() - t0) / calls
\tprint(to_json({"bench": {"load_s": load_s, "forward_us": forward_us}}))
\tquit(0)
"""


def mlp(shape: str) -> dict:
    """A policy file for ``shape``: "DxW", memory's (4 observations, one discrete key of 3) with D layers W wide, or
    "N-W-...-M", those layer sizes (N observations, a continuous key of M)."""
    if "x" in shape:
        depth, width = (int(v) for v in shape.split("x"))
        keys, sizes = [{"key": "move", "action_type": "discrete", "size": 3}], [4] + [width] * (depth - 1) + [3]
    else:
        sizes = [int(v) for v in shape.split("-")]
        depth, keys = len(sizes) - 1, [{"key": "move", "action_type": "continuous", "size": sizes[-1]}]
    layers = [{"weight": [[0.01 * ((i + j + k) % 7 - 3) for k in range(n_in)] for j in range(n_out)],
               "bias": [0.001 * j for j in range(n_out)], "activation": "tanh" if i < depth - 1 else "linear"}
              for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]
    return {"format": FORMAT, "version": MLP_VERSION, "env": "memory", "observation_size": sizes[0], "action_keys": keys,
            "action_rule": action_rule(keys), "obs_normalization": None, "layers": layers, "lstm": None}


def run(project: Path, script: Path, policy: Path, calls: int) -> dict:
    cmd = ["godot3-server", "--path", str(project), "-s", str(script), f"--bench_policy={policy}",
           f"--bench_calls={calls}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"bench"')]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_policy_load: {policy.name} failed on {project} (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}")
    return json.loads(lines[0])["bench"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2x64,32x64,32x128,3x512", help="depth x width, comma-separated")
    parser.add_argument("--calls", type=int, default=200, help="forward passes timed after the load")
    parser.add_argument("--before", type=Path, help="another checkout, run on the same files for comparison")
    args = parser.parse_args()
    projects = {"now": paths.GODOT_PROJECT}
    if args.before:
        projects["before"] = args.before.resolve() / "godot_project"
    with tempfile.TemporaryDirectory(prefix="bench-policy-load-") as tmp:
        script = Path(tmp) / "bench_policy_load.gd"
        script.write_text(BENCH_GD)
        print("shape           weights  " + "  ".join(f"{name:>6} load  forward" for name in projects))
        for shape in args.shapes.split(","):
            policy = mlp(shape)
            path = Path(tmp) / f"mlp_{shape}.json"
            path.write_text(json.dumps(policy))
            weights = sum(len(layer["weight"]) * len(layer["weight"][0]) for layer in policy["layers"])
            cells = []
            for project in projects.values():
                result = run(project, script, path, args.calls)
                cells.append(f"{result['load_s']:9.2f} s {result['forward_us']:7.0f} µs")
            print(f"{shape:14s} {weights:9d}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
