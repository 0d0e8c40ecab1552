"""Benchmark: Godot's Pong demo made an agent as docs/own_flow_more.md says, trained by self-play with the game's
ball-following paddle in the opponent pool (issue 57's check), then its best snapshot played in the engine.

    flock /tmp/bench.lock .venv/bin/python scripts/bench_pong_demo.py --demos PATH [--work DIR] [--seed 1]

PATH is godot-demo-projects (a clone, bare or not; see scripts/demo_games.py). In DIR (default /tmp/bench_pong_demo),
one stage after another, each skipped when its output is already there (delete DIR to start again):
1. the game, built and exported as the docs say (demo_games.py: the docs' scene edit and controller);
2. the issue's training command, its wall time measured:
   `godot-ppo train --env-path BINARY --num-instances 1 --copies 64 --self-play --opponents scripted:0.2,pool:0.8
   --eval-every 500000 --total-timesteps 3000000` (with --seed, --run-dir-root and --exp-name; log: DIR/train.log);
3. the run's best/policy.json (the snapshot with the best win rate against scripted in the periodic evaluations) and
   its final policy.json, each in the headless binary (`--policy=FILE --opponent=scripted --eval_episodes=100
   --fixed-fps 60 --env_seed=S`, S from 1000 up: seeds no training game or periodic evaluation uses) until at least
   50 points are decided, and 100 matches against --opponent=random. The policy plays each side in half of them.
It prints the wall time and steps/s of the training, each periodic evaluation (wins over decided matches of 20
against each yardstick, the decided count against scripted, the Elo of the progress line), and each policy's points
against scripted (wins/decided, draws, and as the left and right paddle) and against random. A point is a match:
the controller ends both paddles' episodes on a point, a rally that reaches its time limit is a draw.
"""

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_games  # noqa: E402

REPO = demo_games.REPO
TRAINER = [sys.executable, "-m", "python_trainer"]
TRAIN_FLAGS = ["--num-instances", "1", "--copies", "64", "--self-play", "--opponents", "scripted:0.2,pool:0.8",
               "--eval-every", "500000", "--total-timesteps", "3000000"]
FIRST_SEED = 1000  # the engine's evaluations here: the trainer's games use seed + copy, its evaluations seed + 50000
MATCHES = 100
DECIDED = 50
MAX_ROUNDS = 20


def matches(binary: Path, policy: str, opponent: str, seed: int) -> dict:
    """MATCHES matches of ``policy`` against ``opponent`` in the engine on ``seed``: the game's report."""
    out = subprocess.run([str(binary), f"--policy={policy}", f"--opponent={opponent}", f"--eval_episodes={MATCHES}",
                          "--fixed-fps", "60", f"--env_seed={seed}"], capture_output=True, text=True,
                         timeout=1800).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith('{"eval"')))["eval"]


def record(binary: Path, policy: str, opponent: str, decided: int = 0) -> dict:
    """Rounds of matches (seeds FIRST_SEED, FIRST_SEED + 1, ...) until ``decided`` points are decided (one round at
    least): wins, losses, draws, matches, and each side's wins and losses."""
    total = {"wins": 0, "losses": 0, "draws": 0, "matches": 0, "left": [0, 0], "right": [0, 0]}
    for seed in range(FIRST_SEED, FIRST_SEED + MAX_ROUNDS):
        report = matches(binary, policy, opponent, seed)
        for key in ("wins", "losses", "draws"):
            total[key] += int(report[key])
        total["matches"] += int(report["episodes"])
        for team, side in (("0", "left"), ("1", "right")):
            total[side][0] += int(report["by_team"][team]["wins"])
            total[side][1] += int(report["by_team"][team]["losses"])
        if total["wins"] + total["losses"] >= decided:
            break
    return total


def show(name: str, opponent: str, r: dict) -> str:
    decided = r["wins"] + r["losses"]
    rate = f"{r['wins'] / decided:.0%}" if decided else "-"
    return (f"{name} vs {opponent}: {rate} of decided points ({r['wins']}/{decided}), {r['draws']} draws in "
            f"{r['matches']} matches; as the left paddle {r['left'][0]}-{r['left'][1]}, as the right "
            f"{r['right'][0]}-{r['right'][1]}")


def curve(log: str) -> list:
    """The periodic evaluations of a train log: [(step, {tag: value})], with the Elo of the progress line after it."""
    rows, elo = [], {}
    for line in log.splitlines():
        if line.startswith("evaluation: global_step="):
            fields = dict(field.split("=", 1) for field in line.split()[1:])
            rows.append((int(fields.pop("global_step")), {tag: float(v) for tag, v in fields.items()}))
        found = re.match(r"global_step=(\d+) .* elo=(\d+)", line)
        if found:
            elo[int(found.group(1))] = int(found.group(2))
    for step, tags in rows:
        later = [s for s in elo if s >= step]
        tags["elo"] = elo[min(later)] if later else None
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_pong_demo"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    binary = work / "pong_game" / "exports" / "headless" / demo_games.GAMES["pong"].binary
    if not binary.exists():
        binary = demo_games.build("pong", work / "pong_game", args.demos)
    root, wall_file, log_file = work / "runs", work / "wall_seconds.txt", work / "train.log"
    if not wall_file.exists():
        start = time.monotonic()
        with open(log_file, "w") as log:
            subprocess.run([*TRAINER, "train", "--env-path", str(binary), *TRAIN_FLAGS, "--seed", str(args.seed),
                            "--run-dir-root", str(root), "--exp-name", "bench"], cwd=REPO, stdout=log,
                           stderr=subprocess.STDOUT, check=True)
        wall_file.write_text(f"{time.monotonic() - start:.0f}\n")
    run = next(p for p in sorted(root.iterdir()) if (p / "args.json").exists())
    log = log_file.read_text()
    wall = int(wall_file.read_text())
    sps = re.findall(r"^global_step=\d+ SPS=(\d+)", log, re.M)
    print(f"train: {' '.join(TRAIN_FLAGS)}\n  {wall} s wall time ({wall / 60:.1f} min), {3_000_000 / wall:.0f} learner "
          f"steps/s over the whole run, SPS {sps[len(sps) // 2]} at mid-run and {sps[-1]} at the end", flush=True)
    for line in log.splitlines():
        if line.startswith(("evaluations:", "time:")):
            print("  " + line)
    print("periodic evaluations (deterministic, 20 matches per yardstick; wins over decided matches):")
    yardsticks = ("random", "scripted", "pool_oldest", "pool_newest")
    print("     step " + " ".join(f"{name:>11}" for name in yardsticks) + "  scripted decided    elo")
    for step, tags in curve(log):
        rates = [tags.get(f"eval/{name}/win_rate") for name in yardsticks]
        print(f"{step:>9} " + " ".join(f"{'-' if r is None else f'{r:.0%}':>11}" for r in rates)
              + f"  {tags.get('eval/scripted/decided', 0):>16.0f} {tags['elo'] or '-':>6}")
    best = json.loads((run / "best" / "evaluation.json").read_text())
    print(f"best: the evaluation at step {best['global_step']} (win rate against scripted {best['score']:.0%})")
    for name, policy in (("best", run / "best" / "policy.json"), ("final", run / "policy.json")):
        for opponent, decided in (("scripted", DECIDED), ("random", 0)):
            result_file = work / f"{name}_vs_{opponent}.json"
            if not result_file.exists():
                result_file.write_text(json.dumps(record(binary, str(policy), opponent, decided)))
            print(show(name, opponent, json.loads(result_file.read_text())), flush=True)


if __name__ == "__main__":
    main()
