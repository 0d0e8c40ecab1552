"""`godot-ppo record`: a person plays the game in its window and the addon records the episodes of agent 0 as
demonstrations (--record_demos, addons/rl_sync/demo_recorder.gd), for `godot-ppo train --demos`.

    godot-ppo record --env-id sparse_goal --out demos.json              # play; close the window when done
    godot-ppo record --env-id jumper --out demos.json --speedup 0.5     # half speed: easier to play well

The window needs a real display (a person must see it): without $DISPLAY the command refuses. Each finished episode
is in the file at once (appended: the episodes already there are never rewritten), so closing the window loses only
the episode in progress; Backspace drops the last episode; an existing file of the same game is appended to.
docs/demonstrations.md tells the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import tyro

from python_trainer.base.contract import ADDON_LINE, ENGINE_SCRIPT_ERROR, arg
from python_trainer.base.errors import Fault, UserError
from python_trainer.base.files import check_output
from python_trainer.base.inputs import check_regular
from python_trainer.base.flags import AGENTS_FLAG, SEED_FLAG, SPEEDUP, at_least, flag, parse_flags
from python_trainer.base.processes import end_process_tree, spawn
from python_trainer.base.signals import signal_policy
from python_trainer.demos import DemoError, read_episodes
from python_trainer.engine.in_engine import addon_error
from python_trainer.envs.game import GameInstance, godot_game
from python_trainer.envs.xvfb import person_display
from python_trainer.tools.game_flags import GameArgs


@dataclass(kw_only=True)  # kw_only: --out, required, follows GameArgs' flags with defaults
class RecordArgs(GameArgs):
    """A person plays the game in its window and the addon records the episodes of agent 0 as demonstrations."""

    out: Annotated[str, tyro.conf.arg(metavar="FILE")]
    """the demonstration file (appended to when it holds episodes of the same game and spaces)"""
    speedup: float = flag(1.0, SPEEDUP)
    """game speed (1: real time; 0.5: half)"""
    episodes: int = flag(0, at_least(0, "an integer >= 0 (0: until the window is closed)", "5"))
    """stop after this many episodes (0: when the window is closed)"""
    agent: int = flag(0, at_least(0, "an integer >= 0 (an agent's index)", "0"))
    """the agent recorded (0 is the keyboard's)"""
    agents_per_instance: AGENTS_FLAG.type(kind=int) = AGENTS_FLAG.default(1)
    max_episode_steps: Optional[int] = flag(None, at_least(1, "an integer >= 1", "500"))
    """the game's time limit, in decision steps"""
    seed: SEED_FLAG.type(" of the game (its --env_seed)") = SEED_FLAG.default(0)


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


def record(args: RecordArgs) -> int:
    """Start the windowed game recording into --out, show its recorder's lines, and say what the file holds."""
    out = Path(args.out).resolve()
    check_output(out)  # a folder, a path under a file, a read-only place: said before the game starts
    if out.exists():  # appended to: a regular file (a FIFO would block the game)
        check_regular(out, f"--out {args.out}", UserError, "a demonstration file")
    # a person must see the window: no private Xvfb here
    display = person_display("play it", "record a policy with the binary's --policy=FILE --record_demos=FILE")
    game = godot_game(args.env_id, args.env_path, timeout=args.connect_timeout)  # a GameError names the fix
    before = _episodes_in(out)
    instance = GameInstance(game, agents=args.agents_per_instance, seed=args.seed, speedup=args.speedup,
                            headless=False, display=display, fixed_fps=None,
                            max_episode_steps=args.max_episode_steps)
    mode = [arg("record_demos", out), arg("record_agent", args.agent)]
    if args.episodes:
        mode.append(arg("record_episodes", args.episodes))
    print(f"recording {game.env} into {out}: play with the arrow keys or WASD, Backspace drops the last episode, "
          "close the window (or Ctrl-C) when done", flush=True)
    proc = spawn(instance.command(*mode), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, env=instance.environ())
    failed = []
    log_path = Path(tempfile.gettempdir()) / f"godot-ppo-record-{os.getpid()}.log"  # all of the game's output
    try:
        with open(log_path, "wb") as log:
            for raw in proc.stdout:  # the game's own lines: the recorder's and errors are shown
                log.write(raw)
                line = raw.decode(errors="replace").rstrip()
                if not (line.startswith(ADDON_LINE) or ENGINE_SCRIPT_ERROR in line):
                    continue
                print(line, flush=True)
                if addon_error(line) is not None:
                    failed.append(addon_error(line))
        code = proc.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        if proc.poll() is None:
            end_process_tree([proc.pid])
            proc.wait()
    after = _episodes_in(out)
    if failed or code not in (0, None):
        raise Fault(f"the game ended with code {code}"
                    + (f" ({failed[0]})" if failed else "")
                    + (f"; {out} holds {_summary(after)}" if after else "") + f"; its output is in {log_path}")
    log_path.unlink(missing_ok=True)
    added = after[len(before):] if len(after) >= len(before) else []
    print(f"recorded {_summary(added)} in this session; {out} holds {_summary(after)}", flush=True)
    if after:
        print(f"train from them: godot-ppo train --env-id {game.env} --demos {out}", flush=True)
    return 0


def main(argv=None) -> int:
    """`godot-ppo record`: the flags, then the recording."""
    args = parse_flags(RecordArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo record")
    with signal_policy():
        return record(args)


if __name__ == "__main__":
    sys.exit(main())
