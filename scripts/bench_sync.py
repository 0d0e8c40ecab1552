"""Benchmark: where the time goes between the engine and the trainer, for 1, 2 and 4 headless instances.

    .venv/bin/python scripts/bench_sync.py [--instances 1,2,4] [--agents 16] [--steps 3000] [--repeats 3]
                                          [--env-path PATH] [--env-id NAME]

For each instance count, side by side:
engine-only  that many exported games at once with --benchmark_steps: random actions chosen inside the engine,
             no trainer; the same scene, sensors and physics, so it is the limit of the sync loop.
synced       the same games driven by python_trainer.vec_env.GodotVecEnv with random actions in strict turns
             (binary step exchange; every game waits while Python decodes and chooses).
ratio        synced / engine-only (the goal: at least 70%, 80% the aim).
pipelined    the same, pipelined as training runs 2 or more instances: one half of the instances simulates while
             the other half's actions are chosen (profiling.run_window).
Best of --repeats runs each, to damp noise from other processes. `godot-ppo profile --modes headless` measures the
same columns (with CPU and memory) from the command line.
"""

import argparse
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from python_trainer.game import godot_game  # noqa: E402
from python_trainer.profiling import engine_benchmark, run_window  # noqa: E402
from python_trainer.game import add_game_arguments
from python_trainer.vec_env import make_vec_env  # noqa: E402


def engine_only(game, instances, agents, steps):
    report = engine_benchmark(game, agents, steps, timeout=300, instances=instances)
    if report is None:
        raise SystemExit("the engine-only run failed: is the export there (`godot-ppo export`)?")
    return report["agent_steps_per_second"]


def synced(game, instances, agents, steps, pipelined):
    envs = make_vec_env(game, num_instances=instances, agents_per_instance=agents, seed=0)
    try:
        obs, _ = envs.reset(seed=0)
        envs.action_space.seed(0)

        def act(o):
            return envs.action_space.sample()[: len(o)]

        obs = run_window(envs, act, obs, steps=50, pipelined=pipelined)[2]  # warm-up
        n, seconds, _ = run_window(envs, act, obs, steps=steps, pipelined=pipelined)
        return n * envs.num_envs / seconds
    finally:
        envs.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 4])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    add_game_arguments(parser)
    args = parser.parse_args()
    game = godot_game(args.env_id, args.env_path)
    print(f"{game.env}, {args.agents} agents per instance, {args.steps} decision steps, best of {args.repeats} "
          "(agent-steps/s):")
    print(f"{'instances':>9} {'engine-only':>12} {'synced':>10} {'ratio':>6} {'pipelined':>10}")
    for n in args.instances:
        engine = max(engine_only(game, n, args.agents, args.steps) for _ in range(args.repeats))
        sync = max(synced(game, n, args.agents, args.steps, False) for _ in range(args.repeats))
        piped = max(synced(game, n, args.agents, args.steps, True) for _ in range(args.repeats)) if n > 1 else None
        piped_text = f"{piped:10,.0f}" if piped is not None else f"{'-':>10}"
        print(f"{n:>9} {engine:12,.0f} {sync:10,.0f} {sync / engine:6.0%} {piped_text}", flush=True)


if __name__ == "__main__":
    main()
