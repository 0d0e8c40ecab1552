"""Benchmark: where the time goes between the engine and the trainer, for 1, 2 and 4 headless instances.

    .venv/bin/python scripts/bench_sync.py [--instances 1,2,4] [--agents 16] [--steps 3000] [--repeats 3]
                                          [--env-path PATH] [--env-id NAME]

For each instance count, side by side:
engine-only  that many exported games at once with --benchmark_steps: random actions chosen inside the engine,
             no trainer; the same scene, sensors and physics, so it is the limit of the sync loop.
synced       the same games driven by python_trainer.envs.vec_env.GodotVecEnv with random actions in strict turns
             (binary step exchange; every game waits while Python decodes and chooses).
ratio        synced / engine-only (the goal: at least 70%, 80% the aim).
pipelined    the same, pipelined as training runs 2 or more instances: one half of the instances simulates while
             the other half's actions are chosen (tools/profile/measure.run_window).
PPO          `godot-ppo train` on the same games (its defaults: pipelined with 2 or more instances), --ppo-steps
             agent-steps: its last charts/SPS, the share of the synced rate it keeps, and where an update's time went
             (the medians of its perf/* tags, the first two updates left out): the rollout (acting: the normaliser,
             forward pass and sampling, in us per step of one group of instances; waiting for the games), the
             update epochs, and the rest (GAE, logging). --ppo-code DIR trains with another checkout's trainer
             (e.g. an older main, which has no perf/* tags: its SPS only).
Best of --repeats runs each, to damp noise from other processes (PPO: one run, --ppo-repeats for more).
`godot-ppo profile --modes headless` measures the first columns (with CPU and memory) from the command line.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from python_trainer.envs.game import add_game_arguments, godot_game  # noqa: E402
from python_trainer.tools.profile.measure import engine_benchmark, run_window  # noqa: E402
from python_trainer.envs.vec_env import make_vec_env  # noqa: E402


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


def ppo(game, instances, agents, steps, code: Path) -> dict:
    """One `godot-ppo train` run: {"sps", and (a trainer with perf/* tags) "shares" of an update's time}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory(prefix="bench-sync-ppo-") as root:
        cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", game.env, "--num-instances", str(instances),
               "--agents-per-instance", str(agents), "--total-timesteps", str(steps), "--eval-episodes", "0",
               "--checkpoint-every", "0", "--run-dir-root", root]
        if game.env_path is not None:
            cmd += ["--env-path", str(game.env_path)]
        out = subprocess.run(cmd, cwd=code, capture_output=True, text=True, timeout=1800,
                             env=dict(os.environ, PYTHONPATH=str(code)))
        if out.returncode != 0:
            raise SystemExit(f"godot-ppo train failed ({out.returncode}):\n{out.stderr[-3000:]}")
        (run_dir,) = Path(root).iterdir()
        events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        events.Reload()
        tags = events.Tags()["scalars"]
        value = {tag: np.array([e.value for e in events.Scalars(tag)]) for tag in tags}
    result = {"sps": float(value["charts/SPS"][-1])}
    if "perf/rollout_s" in value:
        med = {k.split("/")[1][:-2]: float(np.median(v[2:])) for k, v in value.items() if k.startswith("perf/")}
        total = med["rollout"] + med["update"] + med["other"]
        group_steps = 128 * (2 if instances > 1 else 1)  # default --num-steps, one or two groups
        result["shares"] = (f"rollout {med['rollout'] / total:.0%} (acting {1e6 * med['policy'] / group_steps:.0f} us/"
                            f"step, waiting {med['env_wait'] / total:.0%}), update {1e3 * med['update']:.0f} ms, "
                            f"other {med['other'] / total:.0%}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 4])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ppo-steps", type=int, default=300_000, help="agent-steps of the PPO run (0: no PPO column)")
    parser.add_argument("--ppo-repeats", type=int, default=1)
    parser.add_argument("--ppo-code", type=Path, default=REPO, help="the checkout whose trainer the PPO column runs")
    add_game_arguments(parser)
    args = parser.parse_args()
    game = godot_game(args.env_id, args.env_path)
    print(f"{game.env}, {args.agents} agents per instance, {args.steps} decision steps, best of {args.repeats} "
          "(agent-steps/s):")
    print(f"{'instances':>9} {'engine-only':>12} {'synced':>10} {'ratio':>6} {'pipelined':>10} {'PPO':>8} "
          f"{'PPO/synced':>10}  where a PPO update's time went")
    for n in args.instances:
        engine = max(engine_only(game, n, args.agents, args.steps) for _ in range(args.repeats))
        sync = max(synced(game, n, args.agents, args.steps, False) for _ in range(args.repeats))
        piped = max(synced(game, n, args.agents, args.steps, True) for _ in range(args.repeats)) if n > 1 else None
        piped_text = f"{piped:10,.0f}" if piped is not None else f"{'-':>10}"
        row = f"{n:>9} {engine:12,.0f} {sync:10,.0f} {sync / engine:6.0%} {piped_text}"
        if args.ppo_steps:
            runs = [ppo(game, n, args.agents, args.ppo_steps, args.ppo_code) for _ in range(args.ppo_repeats)]
            best = max(runs, key=lambda r: r["sps"])
            row += f" {best['sps']:8,.0f} {best['sps'] / sync:10.0%}  {best.get('shares', '')}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
