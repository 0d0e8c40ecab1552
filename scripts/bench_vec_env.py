"""Agent-steps/s of the Godot vector env: ours (python_trainer.envs.vec_env.GodotVecEnv) vs godot-rl 0.8.2's own
client (godot_rl.wrappers.clean_rl_wrapper.CleanRLGodotEnv over GodotEnv, which also sends to every instance
first and reads after), on the same exported headless binary, same flags (--fixed-fps 60, 16 agents), in the
same run, with the same pre-drawn random actions.

usage: .venv/bin/python scripts/bench_vec_env.py [--instances 1 2 4] [--agents 16] [--seconds 6] [--block 0.5]
"""

import argparse
import atexit
import contextlib
import io
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def snapshot_export() -> str:
    """Copy the headless export to a temp dir and point python_trainer at it (GODOT_PPO_EXPORTS), so a
    re-export during the benchmark cannot pull the binary from under it. Returns the temp dir."""
    import os
    import shutil
    import tempfile

    src = Path(os.environ.get("GODOT_PPO_EXPORTS", REPO / "exports")) / "headless"
    tmp = tempfile.mkdtemp(prefix="bench-exports-")
    if (src / "rl_games.x86_64").is_file() and (src / "rl_games.pck").is_file():
        shutil.copytree(src, Path(tmp) / "headless")
    os.environ["GODOT_PPO_EXPORTS"] = tmp
    return tmp


_SNAPSHOT = snapshot_export()

from python_trainer.base.paths import export_binary  # noqa: E402
from python_trainer.envs.vec_env import make_vec_env  # noqa: E402


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


def run_block(step, actions, seconds: float, offset: int) -> tuple[int, float]:
    """Step for about ``seconds``; returns (steps, elapsed)."""
    steps = 0
    t0 = time.perf_counter()
    while True:
        step(actions[(offset + steps) % len(actions)])
        steps += 1
        if steps % 10 == 0 and time.perf_counter() - t0 >= seconds:
            return steps, time.perf_counter() - t0


def make_ours(n_inst, agents):
    env = make_vec_env("ball_chase", num_instances=n_inst, agents_per_instance=agents, seed=0)
    env.reset()
    return env.step, env.close


def make_godot_rl(n_inst, agents, binary):
    from godot_rl.wrappers.clean_rl_wrapper import CleanRLGodotEnv

    quiet = io.StringIO()  # godot-rl prints the spaces and "close message sent"
    with contextlib.redirect_stdout(quiet):
        env = CleanRLGodotEnv(env_path=str(binary), n_parallel=n_inst, seed=0, port=free_consecutive_ports(n_inst),
                              framerate=60, env="ball_chase", agents=agents)
    env.reset(seed=0)

    def close():
        with contextlib.redirect_stdout(quiet):
            for e in env.envs:  # godot-rl's close() sleeps 1 s per instance; same messages, without the sleeps
                e._send_as_json({"type": "close"})
                e.connection.close()
                try:
                    atexit.unregister(e._close)
                except Exception:
                    pass
        for e in env.envs:  # godot-rl does not wait for its processes
            if e.proc is not None:
                try:
                    e.proc.wait(timeout=5)
                except Exception:
                    e.proc.kill()

    return env.step, close


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--seconds", type=float, default=6.0, help="measured seconds per configuration")
    p.add_argument("--block", type=float, default=0.5, help="seconds per interleaved block")
    p.add_argument("--only", choices=["ours", "godot-rl"], default=None)
    args = p.parse_args(argv)
    try:
        return run(args)
    finally:
        import shutil

        shutil.rmtree(_SNAPSHOT, ignore_errors=True)


def run(args):
    """All configurations run at once (an idle instance blocks on its socket and costs no CPU) and are
    stepped in short interleaved blocks, so background load on a shared machine hits them all alike."""
    binary = export_binary(headless=True)  # the snapshot; MissingExportError says to run `godot-ppo export`
    rng = np.random.default_rng(0)
    kinds = [k for k in ("ours", "godot-rl") if args.only in (None, k)]
    configs, closers = {}, []
    try:
        for n in args.instances:
            actions = rng.uniform(-1, 1, size=(64, n * args.agents, 2)).astype(np.float32)
            for kind in kinds:
                step, close = make_ours(n, args.agents) if kind == "ours" else make_godot_rl(n, args.agents, binary)
                closers.append(close)
                for k in range(50):  # warm-up
                    step(actions[k % len(actions)])
                configs[(kind, n)] = {"step": step, "actions": actions, "steps": 0, "time": 0.0, "rates": []}
        rounds = max(1, int(round(args.seconds / args.block)))
        for r in range(rounds):
            for c in configs.values():
                steps, elapsed = run_block(c["step"], c["actions"], args.block, c["steps"])
                c["steps"] += steps
                c["time"] += elapsed
                c["rates"].append(steps * c["actions"].shape[1] / elapsed)
    finally:
        for close in closers:
            close()
    rate = {k: c["steps"] * c["actions"].shape[1] / c["time"] for k, c in configs.items()}
    med = {k: statistics.median(c["rates"]) for k, c in configs.items()}
    print(f"agent-steps/s, {args.agents} agents per instance, random actions, {rounds} interleaved blocks "
          f"of {args.block:g}s per configuration (mean over all blocks; median block in brackets):")
    print(f"{'instances':>9} {'ours':>20} {'godot-rl':>20} {'ours/godot-rl':>14} {'ours vs 1 inst':>15}")
    nan = float("nan")
    base = rate.get(("ours", args.instances[0]))
    for n in args.instances:
        o, g = rate.get(("ours", n), nan), rate.get(("godot-rl", n), nan)
        om, gm = med.get(("ours", n), nan), med.get(("godot-rl", n), nan)
        print(f"{n:>9} {o:>10,.0f} [{om:>7,.0f}] {g:>10,.0f} [{gm:>7,.0f}] {o / g:>14.2f} "
              f"{(o / base if base else nan):>14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
