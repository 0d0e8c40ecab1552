"""Benchmark: agent-steps/s of one headless instance synced with a trainer vs the engine-only limit.

    .venv/bin/python scripts/bench_sync.py [--agents 16] [--steps 5000] [--repeats 3] [--env-path PATH] [--env-id NAME]

engine-only  the exported game with --benchmark_steps: random actions chosen inside the engine, no trainer;
             the same scene, sensors and physics, so it is the physical limit of the sync loop.
synced       the same game driven over the wire protocol by python_trainer.vec_env.GodotVecEnv with random
             actions (the trainer's view: JSON both ways, socket round trips, Python decoding).
The goal is synced >= 80% of engine-only. Best of --repeats runs each, to damp noise from other processes.
"""

import argparse
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from python_trainer.game import godot_game  # noqa: E402
from python_trainer.profiling import engine_benchmark  # noqa: E402
from python_trainer.vec_env import add_game_arguments, make_vec_env  # noqa: E402


def engine_only(game, agents, steps):
    report = engine_benchmark(game, agents, steps, timeout=300)
    if report is None:
        raise SystemExit("the engine-only run failed: is the export there (`godot-ppo export`)?")
    return report["agent_steps_per_second"]


def synced(game, agents, steps):
    envs = make_vec_env(game, num_instances=1, agents_per_instance=agents, seed=0)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        actions = [envs.action_space.sample() for _ in range(steps)]  # drawn before the clock starts
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        return steps * envs.num_envs / (time.perf_counter() - start)
    finally:
        envs.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    add_game_arguments(parser)
    args = parser.parse_args()
    game = godot_game(args.env_id, args.env_path)
    engine = max(engine_only(game, args.agents, args.steps) for _ in range(args.repeats))
    sync = max(synced(game, args.agents, args.steps) for _ in range(args.repeats))
    print(f"{game.env}, one headless instance, {args.agents} agents, {args.steps} decision steps, best of {args.repeats}:")
    print(f"  engine-only (no trainer): {engine:10,.0f} agent-steps/s")
    print(f"  synced (GodotVecEnv):     {sync:10,.0f} agent-steps/s")
    print(f"  synced / engine-only:     {sync / engine:10.0%}  (goal: >= 80%)")


if __name__ == "__main__":
    main()
