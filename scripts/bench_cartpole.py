"""CartPole-v1 and the Godot cart_pole side by side: `godot-ppo train` with the course unit's command, one training
run per env and seed.

    .venv/bin/python scripts/bench_cartpole.py                 # CartPole-v1 and cart_pole, seeds 1 2 3, 500k steps each
    .venv/bin/python scripts/bench_cartpole.py --envs cart_pole --seeds 1 --total-timesteps 200000

cart_pole is gymnasium's CartPole-v1 computed in GDScript (tests/test_cart_pole.py checks the parity), trained
through the Godot vector env (one headless instance simulating the 4 carts of --num-envs 4): the same command should
solve both in as many steps, within seed noise. For each run: the first global step at which the mean return of the
last 100 episodes reaches 475 (CartPole-v1's "solved"), whether that trailing mean is still >= 475 at the end of
training, and the steps/s (charts/SPS at the end). Runs one at a time, each in its own process, so the steps/s are not
disturbed by each other.
"""

import argparse
import csv
import json
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENVS = ["CartPole-v1", "cart_pole"]
UNIT_COMMAND = ["--total-timesteps", "500000", "--learning-rate", "2.5e-4",
                "--num-envs", "4", "--num-steps", "128", "--num-minibatches", "4", "--update-epochs", "4"]
# CleanRL's ppo.py, same command, this machine: first step at which the trailing-100 mean reached 475, steps/s.
CLEANRL_REFERENCE = {1: 227_000, 2: 246_000, 3: 204_000}
CLEANRL_SPS = 8600
SOLVED = 475.0


def is_gym_id(env_id):
    sys.path.insert(0, str(REPO))
    from python_trainer.envs.game import is_gym_id as registered

    return registered(env_id)


def solve_stats(episodes_csv, window=100, threshold=SOLVED):
    """(first global step where the trailing-`window` mean return >= threshold or None, final trailing mean, episodes)."""
    steps, returns = [], []
    with open(episodes_csv) as f:
        for row in csv.DictReader(f):
            steps.append(int(row["global_step"]))
            returns.append(float(row["return"]))
    first, running = None, sum(returns[:window])
    for i in range(window - 1, len(returns)):
        if i >= window:
            running += returns[i] - returns[i - window]
        if first is None and running / window >= threshold:
            first = steps[i]
    final = sum(returns[-window:]) / min(window, len(returns)) if returns else float("nan")
    return first, final, len(returns)


def last_step(run_dir):
    """The global step of the last episode in the run's episodes.csv (a run stopped before its end)."""
    with open(run_dir / "episodes.csv") as f:
        rows = list(csv.DictReader(f))
    return int(rows[-1]["global_step"]) if rows else 0


def last_scalar(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars(tag) if tag in acc.Tags()["scalars"] else []
    return events[-1].value if events else float("nan")


def _train(cmd, root, pattern, until_solved):
    """Run one training to its end, or with ``until_solved`` until its episodes.csv shows the solve (then SIGTERM)."""
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        time.sleep(5)
        runs = sorted(root.glob(pattern))
        if until_solved and runs and (runs[-1] / "episodes.csv").is_file():
            if solve_stats(runs[-1] / "episodes.csv")[0] is not None:
                proc.send_signal(signal.SIGTERM)
                break
    proc.wait()
    reader.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(output))


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--envs", nargs="+", default=ENVS, help="env ids to train (default: %(default)s)")
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--run-dir-root", default=str(REPO / "runs" / "bench_cartpole"))
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--env-path", default=None,
                        help="the Godot games' export (default: this repository's exports/headless), e.g. a copy that "
                             "a re-export cannot replace during the benchmark")
    parser.add_argument("--until-solved", action="store_true",
                        help="stop each run (SIGTERM: it saves its checkpoint) once its trailing-100 mean reaches 475: "
                             "the step figure is the same, as the run is identical up to there; the end-of-run "
                             "figures are then not measured")
    parser.add_argument("extra", nargs="*", help="more ppo flags after --, e.g. -- --no-truncation-bootstrap")
    args = parser.parse_args(argv)

    command = list(UNIT_COMMAND)
    command[command.index("--total-timesteps") + 1] = str(args.total_timesteps)
    root = Path(args.run_dir_root)
    results = []
    for seed in args.seeds:
        for env_id in args.envs:
            exp = f"bench{int(time.time())}"
            cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", env_id, *command, "--seed", str(seed),
                   "--exp-name", exp, "--run-dir-root", str(root), "--eval-episodes", str(args.eval_episodes),
                   *args.extra]
            if args.env_path and not is_gym_id(env_id):
                cmd += ["--env-path", args.env_path]
            print("$", " ".join(cmd[1:]), flush=True)
            t0, cpu0 = time.time(), _children_cpu()
            proc = _train(cmd, root, f"{env_id}__{exp}__{seed}__*", args.until_solved)
            wall, cpu = time.time() - t0, _children_cpu() - cpu0
            stopped = args.until_solved and proc.returncode == 128 + signal.SIGTERM
            if proc.returncode != 0 and not stopped:
                print(proc.stdout[-3000:])
                raise SystemExit(f"{env_id} seed {seed}: training failed with exit code {proc.returncode}")
            run_dir = sorted(root.glob(f"{env_id}__{exp}__{seed}__*"))[-1]
            first, final, n_episodes = solve_stats(run_dir / "episodes.csv")
            eval_line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("eval:")), "")
            res = {
                "env": env_id,
                "seed": seed,
                "first_solved_step": first,
                "final_trailing100_mean": round(final, 1),
                "stays_solved_at_end": None if stopped else final >= SOLVED,
                "stopped_when_solved": stopped,
                "sps": int(last_scalar(run_dir, "charts/SPS")),
                # steps per CPU-second of the training process (startup included; a Godot game's own CPU time is
                # not in it: the game runs in its own process)
                "steps_per_cpu_second": int((last_step(run_dir) if stopped else args.total_timesteps) / cpu),
                "episodes": n_episodes,
                "wall_seconds": round(wall, 1),
                "eval": eval_line,
                "cleanrl_first_solved_step": CLEANRL_REFERENCE.get(seed) if env_id == "CartPole-v1" else None,
                "run_dir": str(run_dir),
            }
            results.append(res)
            print(json.dumps(res), flush=True)

    print(f"\n{'env':>12} {'seed':>4} {'first >=475 at':>15} {'CleanRL':>9} {'end mean(100)':>14} {'stays':>6} "
          f"{'SPS':>6} {'wall s':>7}")
    for r in sorted(results, key=lambda r: (r["env"], r["seed"])):
        first = f"{r['first_solved_step']:,}" if r["first_solved_step"] else "never"
        ref = f"{r['cleanrl_first_solved_step']:,}" if r["cleanrl_first_solved_step"] else "-"
        end = "stopped" if r["stopped_when_solved"] else r["final_trailing100_mean"]
        print(f"{r['env']:>12} {r['seed']:>4} {first:>15} {ref:>9} {end:>14} "
              f"{str(r['stays_solved_at_end']):>6} {r['sps']:>6} {r['wall_seconds']:>7}")
    print(f"(CleanRL's ppo.py reference, CartPole-v1: ~{CLEANRL_SPS} steps/s on this machine)")
    root.mkdir(parents=True, exist_ok=True)
    (root / "bench_summary.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
