"""forager from pixels against its vector baseline at the same budget, both played inside the engine.

For each seed: `godot-ppo train --env-id forager` (the camera, 36 x 36 RGB, and the velocity; windowed instances
under an Xvfb the trainer starts itself) and `--env-param vision=0` (no camera: the targets' relative positions), the
same flags otherwise. Then each run's policy.json plays --episodes episodes inside the engine (the pixel policy's
CNN in GDScript, windowed under an Xvfb of this script's, its window not drawn; the vector policy headless), and so
does random play (the game's own random actions, windowed: the same rooms). Printed: the mean returns, the pixel
policy's return over random's (issue 35's goal: >= 5x) and over the vector baseline's (>= 50%), each training's wall
clock and steps/s, and each evaluation's wall clock.

    .venv/bin/python scripts/bench_forager.py [--total-timesteps 1000000] [--seeds 1 2] [--episodes 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from python_trainer.engine import in_engine  # noqa: E402
from python_trainer.envs.xvfb import Xvfb  # noqa: E402

GAME = "forager"
VECTOR = ["--env-param", "vision=0"]


def train(seed: int, steps: int, root: Path, extra: list, name: str, flags: list) -> dict:
    """One training run (the CLI, as a user runs it); its run folder, wall clock and steps/s."""
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", GAME, "--total-timesteps", str(steps),
           "--seed", str(seed), "--exp-name", name, "--run-dir-root", str(root), "--eval-episodes", "0",
           *flags, *extra]
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}  # the trainer starts its own Xvfb
    t = time.perf_counter()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    (run_dir,) = root.glob(f"{GAME}__{name}__{seed}__*")
    return {"run_dir": str(run_dir), "wall_s": round(wall, 1), "steps_per_s": round(steps / wall)}


def evaluate(policy, episodes: int, seed: int, display=None, env_params=None) -> dict:
    t = time.perf_counter()
    report = in_engine.evaluate_in_engine(policy, env_id=GAME, episodes=episodes, seed=seed, display=display,
                                          env_params=env_params, timeout=1800)
    return {"mean_return": round(report["mean_return"], 3), "episodes": report["episodes"],
            "eval_wall_s": round(time.perf_counter() - t, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--episodes", type=int, default=32, help="in-engine evaluation episodes of each policy")
    parser.add_argument("--eval-seed", type=int, default=100)
    parser.add_argument("--root", default=None, help="folder for the runs (default: a temporary one, kept)")
    parser.add_argument("train_flags", nargs="*", help="more flags for both trainings (after --)")
    args = parser.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="bench_forager_"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict = {"total_timesteps": args.total_timesteps, "root": str(root), "seeds": {}}
    with Xvfb(root / "xvfb.log") as xvfb:
        display = xvfb.start()
        results["random"] = evaluate("random", args.episodes, args.eval_seed, display=display)
        print(json.dumps({"random": results["random"]}), flush=True)
        for seed in args.seeds:
            pixels = train(seed, args.total_timesteps, root, [], "pixels", args.train_flags)
            pixels.update(evaluate(Path(pixels["run_dir"]) / "policy.json", args.episodes, args.eval_seed,
                                   display=display))
            vector = train(seed, args.total_timesteps, root, VECTOR, "vector", args.train_flags)
            vector.update(evaluate(Path(vector["run_dir"]) / "policy.json", args.episodes, args.eval_seed,
                                   env_params={"vision": 0}))
            row = {"pixels": pixels, "vector": vector,
                   "pixels_over_random": round(pixels["mean_return"] / max(results["random"]["mean_return"], 1e-9), 2),
                   "pixels_over_vector": round(pixels["mean_return"] / max(vector["mean_return"], 1e-9), 2)}
            results["seeds"][seed] = row
            print(json.dumps({f"seed {seed}": row}), flush=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
