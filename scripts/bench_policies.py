"""Issue 23's acceptance run: `tag` trains its two policies (a chaser: 6 observations, a continuous move; a runner:
8 observations, five discrete moves) side by side, and each trained policy does better than random play against the
same opponent.

    python scripts/bench_policies.py                   # train (300k steps, seed 1), then measure
    python scripts/bench_policies.py --steps 100000 --seeds 1 2

Each run is `godot-ppo train --env-id tag` with default settings (runs/bench_i23/seed_<s>/). Then every pairing of
{trained, random} chaser against {trained, random} runner plays --episodes episodes per pairing in 2 instances x 16
agents (deterministic trained policies, uniform random actions otherwise), and the table gives each side's mean
return (+1 for a catch, -1 for being caught, plus the shaping, which sums to the change of distance) and the share of
episodes that end in a catch. A trained chaser should catch a random runner more often than a random chaser does, and
a trained runner should be caught by a random chaser less often than a random runner is.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ROOT = REPO / "runs" / "bench_i23"


def train(seed: int, steps: int) -> Path:
    root = ROOT / f"seed_{seed}"
    done = sorted(root.glob("*/model.pt"))
    if done:
        return done[-1].parent
    root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "tag", "--total-timesteps", str(steps),
           "--seed", str(seed), "--run-dir-root", str(root), "--eval-episodes", "0"]
    start = time.time()
    with open(root / "train.log", "w") as log:
        subprocess.check_call(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    print(f"seed {seed}: trained {steps:,} steps in {time.time() - start:.0f} s", flush=True)
    return sorted(root.glob("*/model.pt"))[-1].parent


def play(run_dir: Path, trained: dict, episodes: int, seed: int) -> dict:
    """{policy: (mean return, catch share)} of ``episodes`` episodes per side; ``trained[policy]``: play the run's
    policy (else random actions)."""
    from python_trainer.checkpoint import load_checkpoint
    from python_trainer.variants.trained_agent import agent_from_checkpoint
    from python_trainer.envs.vec_env import make_vec_env

    ckpt = load_checkpoint(run_dir / "model.pt")
    env = make_vec_env("tag", num_instances=2, agents_per_instance=16, seed=seed)
    rng = np.random.default_rng(seed)
    try:
        ids = {p.name: np.flatnonzero(env.env_policy == k) for k, p in enumerate(env.policies)}
        dims = {p.name: p.observation_space.shape[0] for p in env.policies}
        agents = {name: agent_from_checkpoint(ckpt, name) for name in ids if trained[name]}
        returns = {name: [] for name in ids}
        obs, _ = env.reset(seed=seed)
        done = np.ones(env.num_envs, bool)
        while min(len(r) for r in returns.values()) < episodes:
            actions = {}
            for name, rows in ids.items():
                if name in agents:
                    actions[name] = agents[name].act(obs[rows, : dims[name]], done=done[rows])
                elif name == "chaser":
                    actions[name] = rng.uniform(-1, 1, (rows.size, 2)).astype(np.float32)
                else:
                    actions[name] = rng.integers(0, 5, rows.size)
            obs, _, terminated, truncated, infos = env.step(actions)
            done = terminated | truncated
            for name, rows in ids.items():
                ended = rows[infos.get("_episode", np.zeros(env.num_envs, bool))[rows]]
                returns[name] += [(float(infos["episode"]["r"][i]), bool(terminated[i])) for i in ended]
        return {name: (np.mean([r for r, _ in rs[:episodes]]), np.mean([c for _, c in rs[:episodes]]))
                for name, rs in returns.items()}
    finally:
        env.close()


def main() -> int:
    torch.set_num_threads(1)  # as the trainer: small networks run fastest on one thread
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    for seed in args.seeds:
        run_dir = train(seed, args.steps)
        print(f"\nseed {seed} ({run_dir}); {args.episodes} episodes per pairing")
        print(f"{'chaser':>8} {'runner':>8} | {'chaser return':>13} {'runner return':>13} {'caught':>7}")
        for chaser in (False, True):
            for runner in (False, True):
                r = play(run_dir, {"chaser": chaser, "runner": runner}, args.episodes, seed=100 + seed)
                print(f"{'trained' if chaser else 'random':>8} {'trained' if runner else 'random':>8} | "
                      f"{r['chaser'][0]:>13.2f} {r['runner'][0]:>13.2f} {r['chaser'][1]:>7.0%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
