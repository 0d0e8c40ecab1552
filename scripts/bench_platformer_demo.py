"""Benchmark: Godot's 2D Platformer demo made an agent as docs/own_flow_more.md says, trained, played in the engine.

    .venv/bin/python scripts/bench_platformer_demo.py --demos PATH [--work DIR] [--steps 300000] [--max-seconds 780]
                                                      [--eval-every 75000] [--noop-max 30] [--episodes 50]
                                                      [--coin-pull 0]

PATH is godot-demo-projects (a clone, bare or not; see scripts/demo_games.py). In DIR (default /tmp/bench_platformer):
1. the game, built and exported from the docs' scene edit and controller (scripts/demo_games.py);
2. `godot-ppo train` on 4 one-agent instances (the docs' set-up) for --steps learner steps or --max-seconds of wall
   time, whichever comes first, with `--eval-every` (20 deterministic and 20 sampled episodes at each evaluation,
   randomised starts: `--eval-noop-max`) and `--env-param coin_pull=W` (the controller's reward for coming nearer to
   the nearest coin; the periodic evaluations' returns include it), into DIR/runs (a run folder already there is
   reused: delete it to train again);
3. in the engine, on held-out env seeds (1000 and 1001, --episodes each, the two side by side), each episode starting
   with 0 to --noop-max random decisions (`--policy_noop_max`), at the game's own reward (coin_pull 0: a coin is +1,
   nothing else is): random play, then the run's best/policy.json (the best periodic evaluation) and its
   final policy.json, each deterministic (argmax) and sampled (`--policy_sample`).
It prints the training's wall time and steps/s, its curve (at each evaluation: the deterministic and sampled policy's
return, and the training episodes' coins and share reaching the upper half since the previous one), the trainer's
warnings, then for each policy the coins an episode (mean, max), the share of episodes with none and the share that
reached the level's upper half (the controller's get_info() "upper_half": 28 of the 40 coins are there). The level
has 40 coins; an episode is 30 s of game time (450 decisions).
"""

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_games  # noqa: E402

REPO = demo_games.REPO
TRAINER = [sys.executable, "-m", "python_trainer"]
HELD_OUT = (1000, 1001)  # env seeds no training instance or periodic evaluation uses


def evaluate(binary: Path, policy: str, episodes: int, noop_max: int, sample: bool = False) -> dict:
    """The engine's evaluation of ``policy`` (a file, or random) on HELD_OUT, ``episodes`` each, side by side."""

    def one(seed: int) -> dict:
        cmd = [str(binary), f"--policy={policy}", f"--eval_episodes={episodes}", "--fixed-fps", "60",
               f"--env_seed={seed}", f"--policy_noop_max={noop_max}"] + (["--policy_sample"] if sample else [])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800).stdout
        return json.loads(next(line for line in out.splitlines() if line.startswith('{"eval"')))["eval"]

    with ThreadPoolExecutor(len(HELD_OUT)) as pool:
        reports = list(pool.map(one, HELD_OUT))
    n = sum(r["episodes"] for r in reports)
    coins = [c for r in reports for c in r["returns"]]  # the reward is +1 a coin, nothing else
    upper = sum(r["info_means"]["upper_half"] * r["episodes"] for r in reports) / n
    return {"episodes": n, "coins_mean": round(sum(coins) / n, 2), "coins_max": max(coins),
            "no_coin_share": round(sum(c == 0 for c in coins) / n, 2), "upper_half_share": round(upper, 2),
            "in_level": min(r["info_means"]["coins_in_level"] for r in reports)}


def train(work: Path, binary: Path, args) -> tuple:
    """A `godot-ppo train` into work/runs (skipped when one finished there before); its run folder and wall time."""
    root, done = work / "runs", work / "runs" / "wall_seconds.txt"
    if not done.exists():
        flags = ["train", "--env-path", str(binary), "--num-instances", "4", "--agents-per-instance", "1",
                 "--total-timesteps", str(args.steps), "--max-seconds", str(args.max_seconds), "--seed", "1",
                 "--eval-every", str(args.eval_every), "--eval-sample", "--eval-noop-max", str(args.noop_max),
                 "--env-param", f"coin_pull={args.coin_pull}", "--run-dir-root", str(root), "--exp-name", "coins",
                 *args.train_flags]
        start = time.monotonic()
        with open(work / "train.log", "w") as log:
            subprocess.run([*TRAINER, *flags], cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=True)
        done.write_text(f"{time.monotonic() - start:.0f}\n")
    run = next(p for p in sorted(root.iterdir()) if p.is_dir() and (p / "args.json").exists())
    return run, float(done.read_text())


def curve(run_dir: Path) -> tuple:
    """Rows (step, deterministic coins, sampled coins, training coins, training upper-half share) and the mean SPS."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    det = dict(scalars.get("eval/random/mean_return", []))
    sampled = dict(scalars.get("eval_sampled/random/mean_return", []))
    rows, last = [], -1
    for step in sorted(det):
        window = lambda tag: [v for s, v in scalars.get(tag, []) if last < s <= step]  # noqa: E731
        coins, upper = window("episode_info/coins"), window("episode_info/upper_half")
        rows.append((step, det[step], sampled.get(step, float("nan")), sum(coins) / max(len(coins), 1),
                     sum(upper) / max(len(upper), 1)))
        last = step
    sps = [v for _, v in scalars.get("charts/SPS", [])]
    return rows, (sps[-1] if sps else float("nan"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_platformer"))
    parser.add_argument("--steps", type=int, default=300000)
    parser.add_argument("--max-seconds", type=float, default=780)
    parser.add_argument("--eval-every", type=int, default=75000)
    parser.add_argument("--noop-max", type=int, default=30, help="randomised starts: 0 to K random decisions")
    parser.add_argument("--episodes", type=int, default=50, help="in-engine episodes on each held-out seed")
    parser.add_argument("--coin-pull", type=float, default=0.0, help="training's reward towards the nearest coin")
    parser.add_argument("train_flags", nargs="*", help="more flags for train (after --)")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    binary = work / "game" / "exports" / "headless" / "platformer_2d.x86_64"
    if not (work / "runs" / "wall_seconds.txt").exists():  # a new run plays the docs' controller as it is now
        binary = demo_games.build("platformer", work / "game", args.demos)
    run, wall = train(work, binary, args)
    steps = json.loads((run / "args.json").read_text()).get("total_timesteps")
    rows, sps = curve(run)
    print(f"training: {run} ({wall:.0f} s wall time, last SPS {sps:.0f}, --total-timesteps {steps})")
    print("the curve (20 episodes each, randomised starts; their returns are coins + the pull; training: the coins"
          " of the episodes since the previous evaluation):")
    print("     step  deterministic  sampled  training  training upper half")
    for step, det, sampled, coins, upper in rows:
        print(f"{step:9d}  {det:13.2f}  {sampled:7.2f}  {coins:8.2f}  {upper:19.0%}")
    log = (work / "train.log").read_text().splitlines()
    for line in log:
        if "warning" in line or line.startswith("evaluations:"):
            print("  trainer:", line)

    results = {"random": evaluate(binary, "random", args.episodes, args.noop_max)}
    for name, policy in (("best", run / "best" / "policy.json"), ("final", run / "policy.json")):
        for sample in (False, True):
            key = f"{name} {'sampled' if sample else 'deterministic'}"
            results[key] = evaluate(binary, str(policy), args.episodes, args.noop_max, sample)
    best = json.loads((run / "best" / "evaluation.json").read_text())["global_step"]
    print(f"in the engine, held-out seeds {HELD_OUT}, 0 to {args.noop_max} random decisions at each start "
          f"(best: the evaluation at step {best}):")
    for key, result in results.items():
        print(f"  {key:22s}", json.dumps(result))


if __name__ == "__main__":
    main()
