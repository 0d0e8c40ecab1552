"""Benchmark: the trainer's own costs, without games: acting per step of a group of 16 envs and the update per 4,096
samples, for one or more checkouts side by side (alternated, so that a busy machine slows each alike).

    .venv/bin/python scripts/bench_trainer.py [--code DIR ...] [--rounds 3] [--obs-dim 12]

Each round runs, for each --code checkout (default: this one) in its own process with one torch thread (as
`godot-ppo train` runs): ``collect_rollout`` over an in-memory vector env of 2 groups of 16 envs whose step costs
nothing (ball_chase's shape: 12 observations, 2 continuous actions, normalised observations and rewards), and
``ppo.iterations`` over 128 x 32 samples of random data with the default epochs and minibatches. It prints the median
and best of each: acting in us per group step (``perf/policy_s`` over group steps, as `train` reports it) and the
update in ms per 4,096 samples (``perf/update_s``). In a run with games, acting costs more than here: the games
share the cores and the caches.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

# What one measurement process runs: its checkout's trainer on an env that costs nothing.
CHILD = r"""
import json, sys, time
import gymnasium as gym, numpy as np, torch
from python_trainer import ppo
try:  # the trainer's agent: fast_acting's (issues 33 to 58), agent.Agent before and after
    from python_trainer.fast_acting import FastAgent as Agent
except ImportError:
    from python_trainer.agent import Agent
from python_trainer.normalization import Normalizer
from python_trainer.optimizer import Adam
from python_trainer.rollout import RolloutBuffer, collect_rollout

torch.set_num_threads(1)
torch.manual_seed(0)
OBS, GROUP, GROUPS, STEPS = int(sys.argv[1]), 16, 2, 128
N = GROUP * GROUPS


class FreeEnv:
    # A vector env of GROUPS groups whose steps cost nothing: prepared observations, an episode end now and then.
    num_envs = N
    single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    groups = [slice(g * GROUP, (g + 1) * GROUP) for g in range(GROUPS)]

    def __init__(self):
        rng = np.random.default_rng(0)
        self.obs = rng.standard_normal((64, GROUP, OBS)).astype(np.float32)
        self.t = 0

    def step_async(self, actions, group):
        pass

    def step_wait(self, group):
        self.t += 1
        done = np.zeros(GROUP, bool)
        infos = {}
        if self.t % 50 == 0:
            done[3] = True
            infos = {"episode": {"r": np.zeros(GROUP), "l": np.zeros(GROUP)}, "_episode": done.copy(),
                     "final_obs": np.zeros((GROUP, OBS), np.float32), "_final_obs": done.copy()}
        return self.obs[self.t % 64], np.full(GROUP, 0.1, np.float32), done, np.zeros(GROUP, bool), infos


envs = FreeEnv()
agent = Agent(OBS, envs.single_action_space)
normalizer = Normalizer(OBS, N, 0.99, True, True)
buf = RolloutBuffer(STEPS, N, OBS, agent)
acting = []
for i in range(13):
    collect_rollout(envs, agent, normalizer, buf)
    if i >= 3:
        acting.append(buf.policy_s / buf.group_steps)


class NoRollouts:
    num_envs = N

    def collect(self, *args):
        buf.policy_s = buf.env_wait_s = 0.0


rng = np.random.default_rng(0)
buf.obs[:] = rng.standard_normal(buf.obs.shape)
buf.actions[:] = rng.standard_normal(buf.actions.shape)
buf.logprobs[:] = -2.0 + 0.1 * rng.standard_normal(buf.logprobs.shape)
buf.rewards[:] = rng.standard_normal(buf.rewards.shape)
optimizer = Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
update = [it.scalars["perf/update_s"] for it in ppo.iterations(ppo.Args(), agent, optimizer, NoRollouts(), buf,
                                                               normalizer, num_iterations=25)][3:]
print(json.dumps({"acting_us": [1e6 * a for a in acting], "update_ms": [1e3 * u * 4096 / (STEPS * N) for u in update]}))
"""


def measure(code: Path, obs_dim: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(obs_dim)], cwd=code, capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, PYTHONPATH=str(code)))
    if out.returncode != 0:
        raise SystemExit(f"the measurement in {code} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, nargs="+", default=[REPO], help="checkouts whose trainers to measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--obs-dim", type=int, default=12)
    args = parser.parse_args()
    results = {code: {"acting_us": [], "update_ms": []} for code in args.code}
    for r in range(args.rounds):
        for code in args.code:
            for key, values in measure(code, args.obs_dim).items():
                results[code][key] += values
        print(f"round {r + 1} of {args.rounds} done", flush=True)
    print(f"\n{'checkout':<40} {'acting us/step (median, best)':>30} {'update ms/4096 (median, best)':>30}")
    for code, res in results.items():
        acting, update = np.array(res["acting_us"]), np.array(res["update_ms"])
        print(f"{str(code):<40} {np.median(acting):>20.0f} {acting.min():>9.0f} {np.median(update):>20.1f} "
              f"{update.min():>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
