"""Agent-steps/s of the Godot vector env: ours (python_trainer.vec_env.GodotVecEnv) vs godot-rl 0.8.2's own
client (godot_rl.wrappers.clean_rl_wrapper.CleanRLGodotEnv over GodotEnv, which also sends to every instance
first and reads after), on the same exported headless binary, same flags (--fixed-fps 60, 16 agents), in the
same run, with the same pre-drawn random actions.

usage: .venv/bin/python scripts/bench_vec_env.py [--instances 1 2 4] [--agents 16] [--seconds 5] [--repeats 1]
"""

import argparse
import contextlib
import io
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from python_trainer.paths import export_binary  # noqa: E402
from python_trainer.vec_env import GodotVecEnv  # noqa: E402


def free_consecutive_ports(n: int, start: int = 20000) -> int:
    """A base port p with p..p+n-1 all free now (godot-rl's CleanRLGodotEnv uses consecutive ports)."""
    for base in range(start, 60000, n):
        socks = []
        try:
            for k in range(n):
                s = socket.socket()
                s.bind(("127.0.0.1", base + k))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free consecutive ports")


def time_steps(step, actions, seconds: float, warmup: int = 50) -> float:
    for k in range(warmup):
        step(actions[k % len(actions)])
    steps = 0
    t0 = time.perf_counter()
    while True:
        step(actions[steps % len(actions)])
        steps += 1
        if steps % 20 == 0 and time.perf_counter() - t0 >= seconds:
            break
    return steps * actions.shape[1] / (time.perf_counter() - t0)


def bench_ours(n_inst, agents, seconds, actions):
    env = GodotVecEnv("ball_chase", num_instances=n_inst, agents_per_instance=agents, seed=0)
    try:
        env.reset()
        return time_steps(env.step, actions, seconds)
    finally:
        env.close()


def bench_godot_rl(n_inst, agents, seconds, actions, binary):
    from godot_rl.wrappers.clean_rl_wrapper import CleanRLGodotEnv

    quiet = io.StringIO()  # godot-rl prints the spaces and "close message sent"
    with contextlib.redirect_stdout(quiet):
        env = CleanRLGodotEnv(env_path=str(binary), n_parallel=n_inst, seed=0, port=free_consecutive_ports(n_inst),
                              framerate=60, env="ball_chase", agents=agents)
    try:
        env.reset(seed=0)
        return time_steps(env.step, actions, seconds)
    finally:
        with contextlib.redirect_stdout(quiet):
            env.close()
        for e in env.envs:  # godot-rl does not wait for its processes
            if e.proc is not None:
                try:
                    e.proc.wait(timeout=5)
                except Exception:
                    e.proc.kill()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--only", choices=["ours", "godot-rl"], default=None)
    args = p.parse_args(argv)
    binary = export_binary(headless=True)
    rng = np.random.default_rng(0)
    results = {}
    for n in args.instances:
        actions = rng.uniform(-1, 1, size=(64, n * args.agents, 2)).astype(np.float32)
        for rep in range(args.repeats):
            if args.only in (None, "ours"):
                results.setdefault(("ours", n), []).append(bench_ours(n, args.agents, args.seconds, actions))
            if args.only in (None, "godot-rl"):
                results.setdefault(("godot-rl", n), []).append(
                    bench_godot_rl(n, args.agents, args.seconds, actions, binary))
            print(f"  {n} instance(s), repeat {rep}: " + ", ".join(
                f"{k[0]} {v[-1]:,.0f}" for k, v in results.items() if k[1] == n), flush=True)
    print(f"\nagent-steps/s, {args.agents} agents per instance, random actions, median of {args.repeats}:")
    print(f"{'instances':>9} {'ours':>10} {'godot-rl':>10} {'ours/godot-rl':>14} {'ours vs 1 inst':>15}")
    base = statistics.median(results[("ours", args.instances[0])]) if ("ours", args.instances[0]) in results else None
    for n in args.instances:
        ours = statistics.median(results[("ours", n)]) if ("ours", n) in results else float("nan")
        grl = statistics.median(results[("godot-rl", n)]) if ("godot-rl", n) in results else float("nan")
        scale = ours / base if base else float("nan")
        print(f"{n:>9} {ours:>10,.0f} {grl:>10,.0f} {ours / grl:>14.2f} {scale:>14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
