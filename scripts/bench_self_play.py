"""Issue 24's acceptance run: pong trained with --self-play (2M learner steps, defaults otherwise), then matches in
the engine, without Python in the loop, against random and scripted opponents.

    python scripts/bench_self_play.py                      # seed 1: train (if not done), then the matches
    python scripts/bench_self_play.py --seeds 1 2 --matches 400

Each run is `godot-ppo train --env-id pong --self-play --total-timesteps 2000000 --seed S` (runs/bench_i24/seed_S/;
a run with a model.pt is not run again). The table gives the wall-clock time and learner steps/s of the training,
self_play/elo's first and last logged values, and the trained policy's record (wins, losses, draws, and wins over
decided matches) against --opponent=random and --opponent=scripted, the policy playing each side in half of the
matches (in_engine.play_matches: the binary's --policy --opponent --eval_episodes). The Elo curve goes to
exports/policies/self_play_elo.png.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ROOT = REPO / "runs" / "bench_i24"
PLOT = REPO / "exports" / "policies" / "self_play_elo.png"


def train(seed: int, steps: int) -> tuple[Path, str]:
    root = ROOT / f"seed_{seed}"
    log = ROOT / f"seed_{seed}.log"
    done = sorted(root.glob("*/model.pt"))
    if not done:
        root.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", "pong", "--self-play", "--total-timesteps",
               str(steps), "--seed", str(seed), "--run-dir-root", str(root), "--eval-episodes", "0"]
        start = time.time()
        with open(log, "w") as out:
            subprocess.check_call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
        with open(log, "a") as out:
            out.write(f"bench: wall-clock {time.time() - start:.0f} s\n")
        done = sorted(root.glob("*/model.pt"))
    return done[-1].parent, log.read_text() if log.exists() else ""


def elo_curve(run_dir: Path) -> list:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    return [(e.step, e.value) for e in events.Scalars("self_play/elo")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--matches", type=int, default=400)
    args = parser.parse_args()
    from python_trainer.engine.in_engine import play_matches

    curves = {}
    print(f"{'seed':>4} {'wall s':>7} {'steps/s':>8} {'Elo first':>9} {'Elo last':>9} | {'opponent':>9} {'W':>5} "
          f"{'L':>5} {'D':>5} {'W/(W+L)':>8}")
    for seed in args.seeds:
        run_dir, log = train(seed, args.steps)
        wall = re.findall(r"bench: wall-clock (\d+) s", log)
        sps = re.findall(r"SPS=(\d+)", log)
        curves[seed] = curve = elo_curve(run_dir)
        for opponent in ("random", "scripted"):
            r = play_matches(str(run_dir / "policy.json"), opponent, episodes=args.matches, seed=seed)
            decided = r["wins"] + r["losses"]
            print(f"{seed:>4} {wall[-1] if wall else '?':>7} {sps[-1] if sps else '?':>8} {curve[0][1]:>9.0f} "
                  f"{curve[-1][1]:>9.0f} | {opponent:>9} {r['wins']:>5} {r['losses']:>5} {r['draws']:>5} "
                  f"{r['wins'] / max(1, decided):>8.1%}", flush=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for seed, curve in curves.items():
        ax.plot([s for s, _ in curve], [v for _, v in curve], label=f"seed {seed}")
    ax.set_xlabel("learner steps")
    ax.set_ylabel("self_play/elo")
    ax.set_title("pong --self-play: the learner's Elo against its pool")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=100)
    print(f"plot: {PLOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
