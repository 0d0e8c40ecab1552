"""Benchmark: Dodge the Creeps made an agent as docs/own_flow.md says, tuned by `godot-ppo tune`, then trained long.

    .venv/bin/python scripts/bench_dodge.py --demos PATH [--work DIR] [--tune-seconds 1500] [--trial-steps 400000]
                                            [--steps 3000000] [--eval-every 250000] [--skip-defaults]
                                            [--defaults-seconds S]

PATH is godot-demo-projects (a clone, bare or not; see scripts/demo_games.py). In DIR (default /tmp/bench_dodge),
one stage after another, each skipped when its output is already there (run it again to go on):
1. the game, built and exported as the docs say (a decision every 4 frames, a 30 s limit);
2. random play in the engine: 200 episodes on held-out seeds (--env_seed 1000 and 1001);
3. `godot-ppo tune` for --tune-seconds, each trial --trial-steps on 4 one-agent instances (the docs' set-up);
4. `train --config tune/best.toml` for --steps, and the same with train's defaults (--skip-defaults: not), each with
   --eval-every; the wall time of each;
5. each run's `best/policy.json` in the engine, 200 episodes on the held-out seeds.
It prints the study's table (tune's own last lines), the best command, the learning curves side by side
(eval/random/mean_return: 20 deterministic episodes at each evaluation) and the final figures. The score is the
game's own: seconds survived after the 2 s "Get Ready".
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
HELD_OUT = (1000, 1001)  # env seeds no training instance or periodic evaluation uses
SPACE = """# Dodge the Creeps: the docs' set-up, 4 one-agent instances (its agent presses Input: one per process)
drop = ["num_instances"]
[fixed]
num_instances = 4
agents_per_instance = 1
[search]
num_steps = [256, 512, 1024]  # 4 envs: a batch of at least 1024, so that a trial's time goes to the game
# Train's defaults warn that their updates hardly move the policy (approx_kl 0.0015, clipfrac 0): search above them.
learning_rate = {low = 3e-4, high = 3e-3, log = true}
update_epochs = [4, 6, 8, 10]
"""


def evaluate(binary: Path, policy: str, episodes: int = 100) -> dict:
    """The engine's evaluation of ``policy`` (a file, or random) over HELD_OUT: mean return, mean length, episodes."""
    returns, lengths = [], []
    for seed in HELD_OUT:
        out = subprocess.run([str(binary), f"--policy={policy}", f"--eval_episodes={episodes}", "--fixed-fps", "60",
                              f"--env_seed={seed}"], capture_output=True, text=True, timeout=1800).stdout
        line = next(line for line in out.splitlines() if line.startswith('{"eval"'))
        result = json.loads(line)["eval"]
        returns += result["returns"]
        lengths += result["lengths"]
    return {"mean_return": sum(returns) / len(returns), "mean_length": sum(lengths) / len(lengths),
            "episodes": len(returns), "max_return": max(returns)}


def run_folder(root: Path) -> Path:
    return next(p for p in sorted(root.iterdir()) if p.is_dir() and (p / "args.json").exists())


def train(work: Path, name: str, flags: list) -> Path:
    """A `godot-ppo train` into work/runs_NAME (skipped when it finished before); its run folder."""
    root = work / f"runs_{name}"
    done = root / "wall_seconds.txt"
    if not done.exists():
        start = time.monotonic()
        with open(work / f"train_{name}.log", "w") as log:
            subprocess.run([*TRAINER, "train", *flags, "--run-dir-root", str(root), "--exp-name", name], cwd=REPO,
                           stdout=log, stderr=subprocess.STDOUT, check=True)
        done.write_text(f"{time.monotonic() - start:.0f}\n")
    return run_folder(root)


def curve(run_dir: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    return {e.step: e.value for e in acc.Scalars("eval/random/mean_return")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_dodge"))
    parser.add_argument("--tune-seconds", type=float, default=1500)
    parser.add_argument("--trial-steps", type=int, default=400000)
    parser.add_argument("--steps", type=int, default=3000000)
    parser.add_argument("--eval-every", type=int, default=250000)
    parser.add_argument("--skip-defaults", action="store_true")
    parser.add_argument("--defaults-seconds", type=float, default=None, help="the defaults' run: --max-seconds")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    binary = work / "dodge_game" / "exports" / "headless" / "dodge_the_creeps.x86_64"
    if not binary.exists():
        binary = demo_games.build("dodge", work / "dodge_game", args.demos)
    random_file = work / "random.json"
    if not random_file.exists():
        random_file.write_text(json.dumps(evaluate(binary, "random")))
    print("random play:", random_file.read_text().strip(), flush=True)

    tune_dir = work / "tune"
    if not (work / "tune_seconds.txt").exists():
        (work / "space.toml").write_text(SPACE)
        start = time.monotonic()
        with open(work / "tune.log", "w") as log:
            subprocess.run([*TRAINER, "tune", "--env-path", str(binary), "--out", str(tune_dir), "--space",
                            str(work / "space.toml"), "--timeout", str(args.tune_seconds), "--n-trials", "1000",
                            "--trial-steps", str(args.trial_steps)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                           check=True)
        (work / "tune_seconds.txt").write_text(f"{time.monotonic() - start:.0f}\n")
    tune_log = (work / "tune.log").read_text().splitlines()
    table = [i for i, line in enumerate(tune_log) if re.match(r"\s*trial\s+state|^trials", line)]
    print(f"tune: {(work / 'tune_seconds.txt').read_text().strip()} s", flush=True)
    print("\n".join(tune_log[table[-1]:] if table else tune_log[-30:]), flush=True)

    common = ["--total-timesteps", str(args.steps), "--eval-every", str(args.eval_every), "--seed", "1"]
    runs = {"tuned": train(work, "tuned", ["--config", str(tune_dir / "best.toml"), *common])}
    if not args.skip_defaults:
        runs["defaults"] = train(work, "defaults", ["--env-path", str(binary), "--num-instances", "4",
                                                    "--agents-per-instance", "1", *common,
                                                    *(["--max-seconds", str(args.defaults_seconds)]
                                                      if args.defaults_seconds else [])])
    curves = {name: curve(run) for name, run in runs.items()}
    print("\nlearning curves (eval/random/mean_return, 20 deterministic episodes):")
    print("step".rjust(9), *(name.rjust(9) for name in runs))
    for step in sorted(set().union(*curves.values())):
        print(str(step).rjust(9), *(f"{curves[name].get(step, float('nan')):9.2f}" for name in runs))
    for name, run in runs.items():
        wall = (work / f"runs_{name}" / "wall_seconds.txt").read_text().strip()
        result_file = work / f"best_{name}.json"
        if not result_file.exists():
            result_file.write_text(json.dumps(evaluate(binary, str(run / "best" / "policy.json"))))
        print(f"{name}: {wall} s; best/policy.json in the engine (200 episodes, held-out seeds):",
              result_file.read_text().strip(), flush=True)


if __name__ == "__main__":
    main()
