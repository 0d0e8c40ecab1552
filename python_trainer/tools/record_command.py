"""`godot-ppo record`: a person plays the game in its window and the addon records the episodes of agent 0 as
demonstrations (--record_demos, addons/rl_sync/demo_recorder.gd), for `godot-ppo train --demos`.

    godot-ppo record --env-id sparse_goal --out demos.json              # play; close the window when done
    godot-ppo record --env-id jumper --out demos.json --speedup 0.5     # half speed: easier to play well

The window needs a real display (a person must see it): without $DISPLAY the command refuses. Each finished episode
is in the file at once (rewritten atomically), so closing the window loses only the episode in progress; Backspace
drops the last episode; an existing file of the same game is appended to. docs/demonstrations.md tells the rest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from python_trainer.demos import DemoError, read_episodes
from python_trainer.base.errors import say
from python_trainer.base.flags import add_connect_timeout
from python_trainer.envs.game import GameError, GameInstance, add_game_arguments, godot_game
from python_trainer.base.processes import end_process_tree, spawn
from python_trainer.base.signals import signal_policy


def _episodes_in(path: Path) -> list:
    try:
        return read_episodes(path) if path.exists() else []
    except DemoError:
        return []


def _summary(episodes: list) -> str:
    steps = sum(len(e[1]) for e in episodes)
    returns = [sum(e[2]["rewards"]) for e in episodes if len(e) > 2 and isinstance(e[2], dict) and "rewards" in e[2]]
    mean = f", mean return {sum(returns) / len(returns):.3g}" if returns else ""
    return f"{len(episodes)} episodes, {steps} steps{mean}"


def record(args) -> int:
    out = Path(args.out).resolve()
    if not os.environ.get("DISPLAY"):
        say("godot-ppo record: error: no display ($DISPLAY is not set): a person must see the game to play it; run "
            "this in a desktop session (or over ssh -X), or record a policy with the binary's --policy=FILE "
            "--record_demos=FILE")
        return 2
    try:
        game = godot_game(args.env_id, args.env_path, timeout=args.connect_timeout)
    except GameError as e:
        say(f"godot-ppo record: error: {e}")
        return 2
    before = _episodes_in(out)
    instance = GameInstance(game, agents=args.agents, seed=args.seed, speedup=args.speedup, headless=False,
                            display=os.environ["DISPLAY"], fixed_fps=None,
                            max_episode_steps=args.max_episode_steps)  # fmt: skip
    mode = [f"--record_demos={out}", f"--record_agent={args.agent}"]
    if args.episodes:
        mode.append(f"--record_episodes={args.episodes}")
    print(f"recording {game.env} into {out}: play with the arrow keys or WASD, Backspace drops the last episode, "
          "close the window (or Ctrl-C) when done", flush=True)
    proc = spawn(instance.command(*mode), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, env=instance.environ())  # fmt: skip
    failed = []
    log_path = Path(tempfile.gettempdir()) / f"godot-ppo-record-{os.getpid()}.log"  # all of the game's output
    try:
        with open(log_path, "wb") as log:
            for raw in proc.stdout:  # the game's own lines: the recorder's and errors are shown
                log.write(raw)
                line = raw.decode(errors="replace").rstrip()
                if not (line.startswith("rl_sync") or "SCRIPT ERROR" in line):
                    continue
                print(line, flush=True)
                if line.startswith("rl_sync: error"):
                    failed.append(line)
        code = proc.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        if proc.poll() is None:
            end_process_tree([proc.pid])
            proc.wait()
    after = _episodes_in(out)
    if failed or code not in (0, None):
        say(f"godot-ppo record: error: the game ended with code {code}"
            + (f" ({failed[0].removeprefix('rl_sync: error: ')})" if failed else "")
            + (f"; {out} holds {_summary(after)}" if after else "") + f"; its output is in {log_path}")  # fmt: skip
        return 1
    log_path.unlink(missing_ok=True)
    added = after[len(before):] if len(after) >= len(before) else []
    print(f"recorded {_summary(added)} in this session; {out} holds {_summary(after)}", flush=True)
    if after:
        print(f"train from them: godot-ppo train --env-id {game.env} --demos {out}", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="godot-ppo record", description=__doc__.split("\n\n")[0])
    add_game_arguments(parser)
    parser.add_argument("--out", required=True, metavar="FILE", help="the demonstration file (appended to when it "
                        "holds episodes of the same game and spaces)")
    parser.add_argument("--speedup", type=float, default=1.0, help="game speed (default 1: real time; 0.5: half)")
    parser.add_argument("--episodes", type=int, default=0, help="stop after this many episodes (default: when the "
                        "window is closed)")
    parser.add_argument("--agent", type=int, default=0, help="the agent recorded (default 0, the keyboard's)")
    parser.add_argument("--agents", type=int, default=1, help="agents the game is asked to simulate (default 1)")
    parser.add_argument("--max-episode-steps", type=int, default=None, help="the game's time limit, in decision steps")
    parser.add_argument("--seed", type=int, default=0, help="the game's seed (--env_seed)")
    add_connect_timeout(parser)
    args = parser.parse_args(argv)
    if args.speedup <= 0 or args.episodes < 0 or args.agents < 1 or args.agent < 0:
        parser.error("--speedup must be > 0, --episodes >= 0, --agents >= 1 and --agent >= 0")
    with signal_policy():
        return record(args)


if __name__ == "__main__":
    sys.exit(main())
