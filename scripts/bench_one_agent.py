"""Benchmark: a one-agent game, ball_chase at --agents-per-instance 1, trained by PPO several ways, side by side.

    .venv/bin/python scripts/bench_one_agent.py --before DIR [--rounds 3] [--steps 100000] [--copies 16]

before   `godot-ppo train` from the checkout DIR (the trainer before this change, e.g. `git worktree add /tmp/before
         d147839`): 8 instances x 1 agent;
now      this checkout's trainer, the same 8 instances x 1 agent (no copies);
copies   this checkout's trainer, 2 instances, each running --copies copies of the game's scene (16 agents each);
now-async, copies-async (only when --configs names them): now and copies with `--async` (the collection beside
         the update, make demo's choice for games).
random, random-piped (only when --configs names them): no trainer, random actions through GodotVecEnv on the same
         8 instances x 1 for as many agent-steps, in strict turns and pipelined (two groups of 4, as training runs
         them): the most any trainer that waits for each reply can get out of these games on this machine.
All of them run this checkout's headless export (`godot-ppo export`; without --copies it plays as before), one after
the other in each round, so that a machine shared with other work loads each about alike; each run prints its
`SPS=` (the last `global_step=... SPS=...` line) and the machine's 1-minute load average before and after it. The
last lines give each configuration's median over the rounds and each one's ratio to before.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXPORT = REPO / "exports" / "headless" / "rl_games.x86_64"
CONFIGS = {  # name -> (whose trainer: "before" or "now", its flags), or ("random", [its turns]): no trainer
    "before": ("before", ["--num-instances", "8", "--agents-per-instance", "1"]),
    "now": ("now", ["--num-instances", "8", "--agents-per-instance", "1"]),
    "copies": ("now", ["--num-instances", "2", "--agents-per-instance", "1", "--copies", "{copies}"]),
    "now-async": ("now", ["--num-instances", "8", "--agents-per-instance", "1", "--async"]),
    "copies-async": ("now", ["--num-instances", "2", "--agents-per-instance", "1", "--copies", "{copies}", "--async"]),
    "random": ("random", ["strict"]),
    "random-piped": ("random", ["pipelined"]),
}


def train_sps(code: Path, flags: list, steps: int, seed: int) -> float:
    """One `godot-ppo train` of ball_chase with ``code``'s trainer: its last SPS."""
    with tempfile.TemporaryDirectory(prefix="bench-one-agent-") as root:
        cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "ball_chase", "--env-path", str(EXPORT),
               *flags, "--total-timesteps", str(steps), "--seed", str(seed), "--eval-episodes", "0",
               "--checkpoint-every", "0", "--run-dir-root", root]
        out = subprocess.run(cmd, cwd=code, capture_output=True, text=True, timeout=1800,
                             env=dict(os.environ, PYTHONPATH=str(code)))
    if out.returncode != 0:
        raise SystemExit(f"godot-ppo train ({code}) failed ({out.returncode}):\n{out.stderr[-3000:]}")
    found = re.findall(r"^global_step=\d+ SPS=(\d+)", out.stdout, re.MULTILINE)
    if not found:
        raise SystemExit(f"no SPS= line in the output of {cmd}:\n{out.stdout[-2000:]}")
    return float(found[-1])


def random_sps(turns: str, steps: int) -> float:
    """Random actions on 8 one-agent instances through GodotVecEnv, no trainer: agent-steps/s over ``steps``."""
    from bench_sync import synced  # scripts/: the same measurement at any instance count
    from python_trainer.envs.game import godot_game

    return synced(godot_game("ball_chase", EXPORT), 8, 1, steps // 8, pipelined=turns == "pipelined")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the trainer to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100_000, help="agent-steps of each training")
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--configs", default="before,now,copies",
                        help=f"which configurations, in each round's order, of: {', '.join(CONFIGS)}")
    args = parser.parse_args()
    if not EXPORT.is_file():
        raise SystemExit(f"{EXPORT} is missing: run `godot-ppo export` first")
    names = args.configs.split(",")
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    code = {"before": args.before.resolve(), "now": REPO}
    sps = {name: [] for name in names}
    print(f"ball_chase, 1 agent per instance (copies: {args.copies} per instance), {args.steps} steps per run, "
          f"{args.rounds} rounds; SPS (1-minute load average before -> after)", flush=True)
    for r in range(args.rounds):
        for name in names:
            whose, flags = CONFIGS[name]
            load = os.getloadavg()[0]
            if whose == "random":
                value = random_sps(flags[0], args.steps)
            else:
                value = train_sps(code[whose], [f.format(copies=args.copies) for f in flags], args.steps, seed=1 + r)
            sps[name].append(value)
            print(f"round {r + 1} {name:>12}: {value:8,.0f} SPS (load {load:.1f} -> {os.getloadavg()[0]:.1f})",
                  flush=True)
    median = {name: statistics.median(v) for name, v in sps.items()}
    print("median: " + ", ".join(f"{name} {m:,.0f}" for name, m in median.items()))
    for name in names:
        if name != "before" and "before" in median:
            ratios = [a / b for a, b in zip(sps[name], sps["before"])]
            print(f"{name} / before: {median[name] / median['before']:.2f}x (per round: "
                  f"{', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
