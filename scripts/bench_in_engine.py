"""Benchmark: `godot-ppo train --in-engine` against `--no-in-engine`, alternated, several rounds in one run (issue 58).

    flock /tmp/bench.lock .venv/bin/python scripts/bench_in_engine.py --demos PATH [--work DIR] [--rounds 3]
                                                                       [--scale 1.0] [--configs dodge1,dodge4,...]

PATH is godot-demo-projects (a clone, bare or not; see scripts/demo_games.py), needed by the dodge configurations
only. The configurations (--configs, in this order by default), each 4 or 8 one-agent instances or 2 of 16 agents:
dodge1          Dodge the Creeps as docs/own_flow.md makes it, but deciding every frame (the game the issue measured:
                the docs' scene says `frames_per_decision = 4`, which no flag lowers, so a second copy of the game is
                built with the line changed to 1 and the time limit to 1,800 decisions, the same 30 s of game time),
                4 instances x 1 agent;
dodge4          the same game exactly as the docs make it (a decision every 4 frames), 4 x 1;
ball8x1         ball_chase (this repository's headless export), 8 instances x 1 agent;
ball2x16        ball_chase, 2 instances x 16 agents;
forager         forager at its default 16 agents (its camera: windowed instances under the trainer's own Xvfb), 2
                instances; `--in-engine` refuses a camera today, and the table then quotes the refusal;
forager-vector  forager's vector baseline (`--env-param vision=0`, headless), 2 x 16.
Each round runs every configuration's two sides, one run at a time, the side that goes first alternating from round
to round, so that a machine whose speed drifts loads both alike. Each run is `godot-ppo train` with --seed 1,
--eval-episodes 0, --checkpoint-every 0, its own --run-dir-root under DIR/runs/ and its output in DIR/logs/; its
steps/s is the last progress line's `SPS=` (train's: global steps over the wall clock since the games were up, the
warm-up and reset included), and the run's wall clock (the whole command, the games' start included) is shown beside.
Each configuration's --total-timesteps is set so that its slower side lasts about 30-60 s on a quiet 2-core machine
(--scale multiplies them; rounded to whole updates of 128 steps, at least 2). The dodge games are built in DIR once
(again when the addon or docs/own_flow.md is newer than the build, or with --rebuild). The last lines are a table:
each configuration's SPS medians over the rounds for both sides, the ratio of the medians (per round in brackets),
the games alone (an update's steps over the median time the games took to collect a fragment while the learner waited,
`perf/fragment_wait_s`: about the most any --in-engine run of the configuration does on this machine, the learner
costing nothing) with that over --no-in-engine's median (the highest ratio this machine allows), and the issue's
target (dodge1 >= 3x, dodge4 >= 2x, ball8x1 >= 2x; the others are quoted).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_games  # noqa: E402

REPO = demo_games.REPO
sys.path.insert(0, str(REPO))
from python_trainer.base.processes import run_to_end  # noqa: E402

TRAINER = [sys.executable, "-m", "python_trainer"]
NUM_STEPS = 128  # train's default --num-steps: one update is NUM_STEPS x the agents
SIDES = ("--no-in-engine", "--in-engine")
PATHS = {"--in-engine": "actors: in the engine (", "--no-in-engine": "actors: the trainer steps every agent ("}
REFUSED = re.compile(r"--in-engine: .* does not run in the engine yet.*")
DODGE = {"dodge1": "dodge_every_frame", "dodge4": "dodge_docs"}  # config -> the game's folder in DIR


class Config:
    def __init__(self, what, flags, agents, steps, target=None):
        self.what, self.flags, self.agents, self.steps, self.target = what, flags, agents, steps, target


# steps: the slower side's ~30-60 s on a quiet 2-core machine, from the and docs/training.md's figures
CONFIGS = {
    "dodge1": Config("Dodge the Creeps, a decision every frame, 4 x 1", ["--num-instances", "4",
                     "--agents-per-instance", "1"], 4, 61_440, 3.0),  # ~1.5k SPS step by step
    "dodge4": Config("Dodge the Creeps as the docs make it (every 4 frames), 4 x 1", ["--num-instances", "4",
                     "--agents-per-instance", "1"], 4, 163_840, 2.0),  # ~4.1k
    "ball8x1": Config("ball_chase, 8 x 1", ["--env-id", "ball_chase", "--num-instances", "8",
                      "--agents-per-instance", "1"], 8, 204_800, 2.0),  # ~5.5k
    "ball2x16": Config("ball_chase, 2 x 16", ["--env-id", "ball_chase", "--num-instances", "2",
                       "--agents-per-instance", "16"], 32, 245_760),  # ~4.7k in the engine
    "forager": Config("forager (camera, windowed), 2 x its default 16", ["--env-id", "forager", "--num-instances",
                      "2"], 32, 98_304),  # ~2.3k step by step
    "forager-vector": Config("forager's vector baseline (vision=0), 2 x 16", ["--env-id", "forager",
                             "--num-instances", "2", "--env-param", "vision=0"], 32, 245_760),  # ~6k in the engine
}


def newest_source() -> float:
    """The newest modification time of what a dodge build is made of: the addon and the docs' page."""
    files = [p for p in demo_games.ADDON.rglob("*") if p.is_file()] + [demo_games.DOCS / "own_flow.md"]
    return max(p.stat().st_mtime for p in files)


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{path}: expected one `{old}` (the docs' block changed?): update bench_in_engine.py")
    path.write_text(text.replace(old, new))


def build_dodge(name: str, work: Path, demos: Path, rebuild: bool) -> Path:
    """The dodge game of config ``name``, built in work/<folder> from the docs' blocks (demo_games.py); its binary."""
    dest = work / DODGE[name]
    binary = dest / "exports" / "headless" / demo_games.GAMES["dodge"].binary
    if binary.is_file() and not rebuild and binary.stat().st_mtime > newest_source():
        return binary
    demo_games.build("dodge", dest, demos, export=False)
    if name == "dodge1":
        # The issue measured the game deciding every frame, as the docs made it then. No flag lowers a scene's
        # frames_per_decision (--action_repeat multiplies it), so this copy's scene says 1, and its controller's
        # time limit counts the same 30 s of game time in decisions (450 at every 4 frames, 1,800 at every frame).
        replace_once(dest / "Main.tscn", "frames_per_decision = 4", "frames_per_decision = 1")
        script = dest / "dodge_agent.gd"
        limit = re.subn(r"max_episode_steps = 450\b.*", "max_episode_steps = 1800  # 30 s of game time at a decision "
                        "every frame (bench_in_engine.py's copy)", script.read_text())
        if limit[1] != 1:
            raise SystemExit(f"{script}: expected one `max_episode_steps = 450` (the docs' block changed?)")
        script.write_text(limit[0])
    subprocess.run([*TRAINER, "export", "--project", str(dest), "--only", "headless"], cwd=REPO, check=True,
                   timeout=900, stdout=subprocess.DEVNULL)
    return binary


def total_steps(config: Config, scale: float) -> int:
    batch = config.agents * NUM_STEPS
    return max(2, round(config.steps * scale / batch)) * batch


def games_alone(root: Path, batch: int):
    """An --in-engine run's bound: one update's steps over the median `perf/fragment_wait_s`, the time the games took
    to collect a fragment while the learner waited (synchronous: the games had the CPUs to themselves). No run of
    that configuration on this machine goes faster, whatever the learner does; None without the scalar."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not runs:
        return None
    acc = EventAccumulator(str(runs[0]), size_guidance={"scalars": 0}).Reload()
    if "perf/fragment_wait_s" not in acc.Tags().get("scalars", []):
        return None
    wait = statistics.median(e.value for e in acc.Scalars("perf/fragment_wait_s"))
    return batch / wait if wait > 0 else None


def train(flags: list, steps: int, root: Path, log: Path, timeout: float, batch: int) -> dict:
    """One `godot-ppo train` run: {"sps", "wall", "path" (the start-up line's actors), "refused", "error", "alone"
    (games_alone(), in the engine)}."""
    if root.exists():
        shutil.rmtree(root)
    cmd = [*TRAINER, "train", *flags, "--total-timesteps", str(steps), "--seed", "1", "--eval-episodes", "0",
           "--checkpoint-every", "0", "--run-dir-root", str(root)]
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}  # windowed games: the trainer's own Xvfb
    start = time.monotonic()
    out = run_to_end(cmd, timeout=timeout, env=env, cwd=REPO)
    wall = time.monotonic() - start
    log.write_text(f"$ {' '.join(cmd)}\n{out.stdout}\n--- stderr ---\n{out.stderr}")
    text = out.stdout + out.stderr
    found = re.findall(r"^global_step=\d+ SPS=(\d+)", out.stdout, re.M)
    refused = REFUSED.search(text) if out.returncode == 2 else None
    error = None
    if refused is None and (out.returncode != 0 or not found):
        error = "timed out" if out.returncode is None else f"exit {out.returncode}" if out.returncode else "no SPS="
    path = next((side for side, line in PATHS.items() if line in text), "?")
    return {"sps": float(found[-1]) if found and not error else None, "wall": wall, "path": path,
            "refused": refused.group(0) if refused else None, "error": error,
            "alone": games_alone(root, batch) if found and not error else None}


def median(values: list):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def row(name: str, config: Config, results: dict) -> str:
    """One table row: the configuration, its rounds, both sides' medians (each round's), the ratio, the target."""
    no, yes = results["--no-in-engine"], results["--in-engine"]
    cells = []
    for side in (no, yes):
        m = median([r["sps"] for r in side])
        each = ", ".join(f"{r['sps']:,.0f}" if r["sps"] is not None else (r["error"] or "refused") for r in side)
        cells.append(f"{m:,.0f} ({each})" if m is not None else each or "-")
    refusal = next((r["refused"] for r in yes if r["refused"]), None)
    m_no, m_yes = median([r["sps"] for r in no]), median([r["sps"] for r in yes])
    if m_no and m_yes:
        rounds = ", ".join(f"{a['sps'] / b['sps']:.2f}" for a, b in zip(yes, no) if a["sps"] and b["sps"])
        ratio = f"{m_yes / m_no:.2f}x ({rounds})"
    else:
        ratio = f"- ({refusal})" if refusal else "-"
    alone = median([r["alone"] for r in yes])
    bound = f"{alone:,.0f}, {alone / m_no:.2f}x" if alone and m_no else "-"
    if config.target is None:
        target = "quoted"
    else:
        met = "" if not (m_no and m_yes) else (", met" if m_yes / m_no >= config.target else ", NOT met")
        target = f">= {config.target:g}x{met}"
    return (f"| {name} | {config.what} | {max(len(no), len(yes))} | {cells[0]} | {cells[1]} | {ratio} | {bound} "
            f"| {target} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=Path, help="godot-demo-projects: a clone or a folder of it (dodge1, dodge4)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_in_engine"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every configuration's steps")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"of: {', '.join(CONFIGS)}")
    parser.add_argument("--rebuild", action="store_true", help="build the dodge games again")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for each run")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    if any(name in DODGE for name in names) and args.demos is None:
        raise SystemExit("dodge1 and dodge4 need --demos PATH (godot-demo-projects), or leave them out of --configs")
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "logs").mkdir(exist_ok=True)
    flags = {name: list(CONFIGS[name].flags) for name in names}
    for name in names:
        if name in DODGE:
            flags[name] += ["--env-path", str(build_dodge(name, args.work, args.demos, args.rebuild))]
    steps = {name: total_steps(CONFIGS[name], args.scale) for name in names}
    print(f"{args.rounds} rounds, {os.cpu_count()} CPUs, 1-minute load {os.getloadavg()[0]:.1f}; steps per run: "
          + ", ".join(f"{name} {steps[name]:,}" for name in names), flush=True)
    results = {name: {side: [] for side in SIDES} for name in names}
    for r in range(args.rounds):
        for name in names:
            for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                if any(x["refused"] for x in results[name][side]):
                    continue  # refused once: refused again
                tag = f"{name}_{side.strip('-')}_r{r + 1}"
                load = os.getloadavg()[0]
                result = train([*flags[name], side], steps[name], args.work / "runs" / tag,
                               args.work / "logs" / f"{tag}.log", args.timeout, CONFIGS[name].agents * NUM_STEPS)
                results[name][side].append(result)
                if result["refused"]:
                    said = f"refused: {result['refused']}"
                elif result["error"]:
                    said = f"FAILED ({result['error']}; see {args.work / 'logs' / tag}.log)"
                else:
                    wrong = "" if result["path"] == side else f" (its start-up line says {result['path']}!)"
                    alone = f" (the games alone {result['alone']:,.0f})" if result["alone"] else ""
                    said = f"{result['sps']:8,.0f} SPS{alone}{wrong}"
                print(f"round {r + 1} {name:>14} {side:>15}: {said}, {result['wall']:.0f} s "
                      f"(load {load:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
    print("\nSPS: the last progress line's (train's global steps over its wall clock since the games were up); "
          "the ratio: --in-engine's median over --no-in-engine's (each round's in brackets); the games alone: an "
          "update's steps over the median time the games took to collect a fragment (perf/fragment_wait_s), the most "
          "any --in-engine run can do here, and that over --no-in-engine's median: the highest ratio this machine "
          "allows")
    print("| config | what | rounds | --no-in-engine SPS, median (each round) | --in-engine SPS, median (each round) "
          "| ratio | the games alone, bound on the ratio | the issue's target |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        print(row(name, CONFIGS[name], results[name]))
    failed = [name for name in names for side in SIDES for x in results[name][side] if x["error"]]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
