"""What running the policy inside the engine costs per frame, for N agents (default 16).

Runs of the exported game, each repeated --repeats times (the median is reported), in three modes:
idle (human mode, no key pressed: agents stand still), random (in-engine random actions: agents move, hit walls,
reset, like a playing policy but without inference) and policy (--policy=FILE):

  windowed (under Xvfb when $DISPLAY is unset): --no_vsync --fixed-fps 60 --quit_after_frames=600
  headless:                                     --fixed-fps 60 --quit_after_frames=1500

--fixed-fps 60 makes every frame exactly one physics step (one decision for every agent) and lets the game run
as fast as it can, so 1000/fps is the whole cost of a frame; the inference cost per frame is
1000/fps(policy) - 1000/fps(random). A GDScript micro-benchmark (godot3-server -s) also times
policy_runner.gd's forward() alone. The goal is < 2 ms per frame for 16 agents, so playback holds 60 fps.

    .venv/bin/python scripts/bench_playback.py [--policy exports/policies/ball_chase.json] [--agents 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from python_trainer.base import paths  # noqa: E402
from python_trainer.engine import in_engine  # noqa: E402
from python_trainer.envs.game import game_environ  # noqa: E402
from python_trainer.envs.xvfb import Xvfb, open_display  # noqa: E402


def run(binary: Path, args: list[str], env=None, timeout: float = 120.0) -> dict:
    result = in_engine.run_game([str(binary), *args], timeout, env=env)
    report = in_engine.json_line(result.stdout, "run")
    if result.returncode != 0 or report is None:
        raise SystemExit(f"bench_playback: {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return report


def median_run(binary, args, repeats, env=None, key="fps") -> dict:
    """Median frames per second; headless runs draw nothing, so their rate is physics_fps (= frames, fixed-fps)."""
    reports = [run(binary, args, env) for _ in range(repeats)]
    return {"fps": statistics.median(r[key] for r in reports), "all_fps": [round(r[key], 1) for r in reports]}


FORWARD_BENCH = """extends SceneTree
func _init():
	var runner = load("res://addons/rl_sync/policy_runner.gd").new()
	var error = runner.load_file(%(policy)r)
	if error != "":
		printerr(error)
		quit(1)
		return
	runner.set_agent_count(1)  # a recurrent policy's state (one agent: each call steps it)
	var obs := []
	for i in range(runner.observation_size):
		obs.append(0.1 * (i %% 7) - 0.3)
	var best := 1e9
	for rep in range(5):
		var t := OS.get_ticks_usec()
		for k in range(%(calls)d):
			runner.act(obs)
		best = min(best, (OS.get_ticks_usec() - t) / float(%(calls)d))
	print("{\\"forward_us\\": %%f}" %% best)
	quit(0)
"""


def forward_microbenchmark(policy: Path, calls: int = 500) -> float:
    """Microseconds per policy_runner.act() call (best of 5 x ``calls``), run by godot3-server on the project."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".gd", delete=False) as f:
        f.write(FORWARD_BENCH % {"policy": str(policy), "calls": calls})
    try:
        result = in_engine.run_game([paths.godot_server(), "--path", str(paths.GODOT_PROJECT), "-s", f.name], 120)
    finally:
        os.unlink(f.name)
    value = in_engine.json_line(result.stdout, "forward_us")
    if value is None:
        raise SystemExit(f"bench_playback: the forward() micro-benchmark failed:\n{result.stdout[-1000:]}{result.stderr[-2000:]}")
    return float(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=str(REPO / "exports" / "policies" / "ball_chase.json"))
    parser.add_argument("--env", default="ball_chase")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--windowed-frames", type=int, default=600)
    parser.add_argument("--headless-frames", type=int, default=1500)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    policy = Path(args.policy).resolve()
    common = [f"--env={args.env}", f"--agents={args.agents}", "--env_seed=0", "--fixed-fps", "60"]

    modes = {"idle": [], "random": ["--benchmark_steps=100000000"], "policy": [f"--policy={policy}"]}
    results = {"agents": args.agents, "policy": str(policy), "repeats": args.repeats}
    headless = paths.export_binary(headless=True)
    hl = common + [f"--quit_after_frames={args.headless_frames}"]
    for mode, extra in modes.items():
        results[f"headless_{mode}"] = median_run(headless, hl + extra, args.repeats, key="physics_fps")

    windowed = paths.export_binary(headless=False)
    with Xvfb(Path(tempfile.gettempdir()) / "godot-ppo-bench-xvfb.log") as xvfb:
        env = game_environ(display=open_display(xvfb, lambda m: print(m, file=sys.stderr), "for the windowed runs"))
        results["display"] = "Xvfb" if xvfb.proc is not None else os.environ.get("DISPLAY")
        wl = common + [f"--quit_after_frames={args.windowed_frames}", "--no_vsync"]
        for mode, extra in modes.items():
            results[f"windowed_{mode}"] = median_run(windowed, wl + extra, args.repeats, env)
    results["forward_us"] = forward_microbenchmark(policy)

    def ms(kind, mode):
        return 1000.0 / results[f"{kind}_{mode}"]["fps"]

    for kind in ("headless", "windowed"):
        results[f"{kind}_inference_ms_per_frame"] = ms(kind, "policy") - ms(kind, "random")
    results["forward_ms_per_frame"] = results["forward_us"] * args.agents / 1000.0
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{args.agents} agents, policy {policy.name}, median of {args.repeats} runs, --fixed-fps 60 "
          f"(one decision per frame), windowed display: {results['display']}")
    print(f"{'':10}{'idle fps':>10}{'random fps':>12}{'policy fps':>12}{'ms/frame idle/random/policy':>32}"
          f"{'inference ms/frame':>20}")
    for kind in ("headless", "windowed"):
        fps = [results[f"{kind}_{m}"]["fps"] for m in modes]
        per = "/".join(f"{ms(kind, m):.2f}" for m in modes)
        print(f"{kind:<10}{fps[0]:>10.0f}{fps[1]:>12.0f}{fps[2]:>12.0f}{per:>32}{results[f'{kind}_inference_ms_per_frame']:>20.2f}")
    print(f"policy_runner.gd act() alone: {results['forward_us']:.0f} us per agent -> {results['forward_ms_per_frame']:.2f} ms "
          f"per frame for {args.agents} agents (goal < 2 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
