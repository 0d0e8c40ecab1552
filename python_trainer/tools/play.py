"""`godot-ppo play`: watch a trained policy play in the game window, inside the engine (GDScript, no Python in the
loop) or driven from Python by the PyTorch checkpoint; against an opponent (you, with the keyboard); or record it.

    godot-ppo play runs/ball_chase__ppo__1__1700000000                    # window, real time, 4 agents
    godot-ppo play exports/policies/ball_chase.json --record ball_chase.gif --record-seconds 10
    godot-ppo play runs/... --python                                      # the PyTorch checkpoint drives the window
    godot-ppo play runs/pong__ppo__1__1700000000 --opponent human         # you against it, with the keyboard
    godot-ppo play runs/pong__ppo__1__1700000000 --opponent scripted --record pong.gif

A run folder's --env-param constants (its args.json) are given to the game again; --env-param overrides them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import tyro

from python_trainer.base.contract import ADDON_LINE, ENGINE_SCRIPT_ERROR, PERSON_LINE, RUN_REPORT, WINDOW_LINE, arg
from python_trainer.base.errors import Fault, UserError
from python_trainer.base.files import write_error
from python_trainer.base.flags import (AGENTS_FLAG, DEFAULT_CONNECT_TIMEOUT_S, ENV_ID_FLAG, ENV_PATH_FLAG, SEED_FLAG,
                                       FlagError, flag, parse_flags, positive)
from python_trainer.base.processes import end_process_tree, spawn
from python_trainer.base.signals import signal_policy
from python_trainer.engine.in_engine import (
    HUMAN_OPPONENT, MATCH_KEYWORDS, PlaybackError, engine_policy_arg, match_policy_arg, policy_game, trained_env_params,
)
from python_trainer.engine.recording import record
from python_trainer.envs.env_params import parse_flag
from python_trainer.envs.failures import InstanceCrashedError
from python_trainer.envs.game import FIXED_FPS, GameInstance, GodotGame, godot_game
from python_trainer.envs.logs import CappedLog
from python_trainer.envs.protocol import GodotConnectionError
from python_trainer.envs.xvfb import open_display, person_display, temp_xvfb
from python_trainer.tools.game_flags import EnvParam, GameArgs, game_env_params
from python_trainer.tools.policy_export import ensure_policy, resolve_checkpoint

PROG = "godot-ppo play"
DEFAULT_RECORD_SECONDS = 10.0
SECONDS = positive("10", "a number of seconds > 0")
# The game's line (on stderr) saying how many agents its window shows (addons/rl_sync/window_helpers.gd).
WINDOW_LINE_BYTES = WINDOW_LINE.encode()
# The game's line (on stderr) saying a person's side and keys, from its Input Map (addons/rl_sync/match_mode.gd).
PERSON_LINE_BYTES = PERSON_LINE.encode()
ADDON_MARK = ADDON_LINE.encode()  # any other line of the addon's, and Godot's mark of a script error, are shown
SCRIPT_ERROR_MARK = ENGINE_SCRIPT_ERROR.encode()
# What is said of a window started under our own Xvfb, which nobody sees.
UNSEEN_WINDOW = "for the window, which nobody sees (--record FILE.gif records it)"


@dataclass(kw_only=True)  # kw_only: the source, required, follows GameArgs' flags with defaults
class PlayArgs(GameArgs):
    """Watch a trained policy play in the game window. By default the policy runs inside the engine (GDScript, no
    Python in the loop), in real time."""

    src: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR_OR_CHECKPOINT_OR_POLICY")]
    """a run folder, a model.pt/checkpoint.pt (exported first if needed) or a policy .json (several separated by
    commas: each agent plays the file of its policy_name)"""
    env_path: ENV_PATH_FLAG.type(" (default: the one the policy was trained with)") = ENV_PATH_FLAG.default(None)
    env_id: ENV_ID_FLAG.type(" (default: the one the policy was trained on)") = ENV_ID_FLAG.default(None)
    agents_per_instance: AGENTS_FLAG.type(": the arenas shown (default 4; 1 with --opponent human: one match, e.g. one "
                                          "pong court); a game with a fixed set of agents shows its own"
                                          ) = AGENTS_FLAG.default(None)
    seed: SEED_FLAG.type(" of the game") = SEED_FLAG.default(0)
    seconds: Optional[float] = flag(None, SECONDS)
    """stop after this many seconds (default: until closed)"""
    python: bool = False
    """drive the window from Python with the PyTorch checkpoint"""
    record: Annotated[Optional[str], tyro.conf.arg(metavar="OUT.gif|OUT.mp4")] = None
    """record the in-engine policy (game time, 15 fps) to a GIF (or MP4 with ffmpeg) instead of watching, also with
    an --opponent; it waits as long as the game keeps writing frames, and gives up after 30 s without a new one,
    or for the first after 30 s + --connect-timeout, the game's load"""
    record_seconds: Optional[float] = flag(None, SECONDS)
    """length of the recording (default: --seconds, else 10)"""
    opponent: Annotated[Optional[str], tyro.conf.arg(metavar="human|random|scripted|FILE")] = None
    """a two-sided game (agents in teams 0 and 1, e.g. pong): the policy plays one team and this the other, the sides
    swapping after each match; human: you, with the keyboard (the game says your side and the keys of its input
    actions); scripted: the game's scripted opponent; FILE: another policy file or run folder"""
    env_param: EnvParam = ()
    """one of the game's environment parameters, NAME=NUMBER, as train's --env-param (repeat the flag for several;
    docs/env_params.md); a run folder's own (its args.json) are given again without it, and this overrides them"""


def play_main(argv=None) -> int:
    """`godot-ppo play`: the flags, checked, then the window (or the recording)."""
    args = parse_flags(PlayArgs, list(sys.argv[1:] if argv is None else argv), PROG)
    if args.opponent is not None and args.python:
        raise FlagError("--opponent plays in the engine's window: drop --python")
    if args.opponent == HUMAN_OPPONENT and args.record:
        raise FlagError("--opponent human plays with the keyboard, which a recording has none of: give --opponent "
                        "random, scripted or a policy file to --record")
    if args.opponent == HUMAN_OPPONENT:  # a person plays: a private Xvfb would show the window to nobody
        person_display("play against it", "give --opponent random, scripted or a policy file")
    if args.agents_per_instance is None:
        args = replace(args, agents_per_instance=1 if args.opponent == HUMAN_OPPONENT else 4)
    say = lambda msg: print(msg, flush=True)  # noqa: E731
    # SIGTERM and SIGHUP (a closed terminal or SSH session) end `play` like Ctrl-C: the game and Xvfb are ended on
    # the way out (cli.py's policy; `godot-ppo` installed it already, this covers a direct call).
    with signal_policy():
        return _play(args, say)


def _play(args: PlayArgs, say) -> int:
    agents = args.agents_per_instance
    try:
        flags = _run_env_params(args.src, args.env_param, say)
        if args.python:
            if args.record:
                raise PlaybackError("--record records the in-engine policy; drop --python")
            return _watch_python(args.src, args.env_id, args.env_path, agents, args.seed, args.seconds, say,
                                 args.connect_timeout, flags)
        policy = ensure_policy(args.src)
        game = policy_game(policy, args.env_id, args.env_path, timeout=args.connect_timeout)
        extra = game_env_params(game, flags, samplers=False)[0]
        opponent = None
        if args.opponent is not None:
            opponent = (args.opponent if args.opponent in MATCH_KEYWORDS + (HUMAN_OPPONENT,)
                        else match_policy_arg(ensure_policy(args.opponent), "opponent"))
        if args.record:
            seconds = args.record_seconds or args.seconds or DEFAULT_RECORD_SECONDS
            result = record(policy, args.record, game, agents=agents, seed=args.seed, seconds=seconds, say=say,
                            connect_timeout=args.connect_timeout, extra_args=extra, opponent=opponent)
            size = result["out"].stat().st_size
            say(f"wrote {result['out']}: {result['frames']} frames, {size / 1024:.0f} KiB")
            return 0
        return _watch_in_engine(policy, game, agents, args.seed, args.seconds, say, opponent, extra)
    except UserError:  # a game that cannot be used (2), did not start or crashed (1): its kind's status
        raise
    except ValueError as e:  # a policy the game cannot play
        raise UserError(str(e)) from None
    except OSError as e:  # an output that failed past its checks (e.g. the disk filled up meanwhile)
        raise Fault(str(write_error(getattr(e, "filename", None) or args.record or "?", e))) from None
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 0


def _run_env_params(src, given, say) -> tuple:
    """The --env-param flags to play with: the constants of the run ``src`` came from (its args.json; a sampler
    there leaves the game's default), then ``given``, which override a run's of the same name."""
    names = {parse_flag(text)[0] for text in given}
    reused = [f"{name}={str(value).removesuffix('.0')}" for name, value in trained_env_params(src).items()
              if name not in names]
    if reused:
        say(f"the run's environment parameters: --env-param {' --env-param '.join(reused)}")
    return (*reused, *given)


# ---------------------------------------------------------------------------------------------- in the engine
def _watch_in_engine(policy: Path, game: GodotGame, agents: int, seed: int, seconds: Optional[float], say=print,
                     opponent: Optional[str] = None, extra_args=()) -> int:
    """The windowed game with the policy inside, real time (vsync); ends on Ctrl-C, window closed or --seconds.

    --seconds S asks the game to quit after S seconds of wall time (--quit_after_seconds); should it not, it is
    ended a few seconds later. The game's output goes to a log file (capped: a game printing every frame cannot
    fill the disk); its rl_sync lines (errors) are shown.
    """
    log_path = Path(tempfile.gettempdir()) / f"godot-ppo-play-{os.getpid()}.log"
    log_path.unlink(missing_ok=True)
    with temp_xvfb() as xvfb, contextlib.closing(CappedLog(log_path)) as log:
        # Real time (no --fixed-fps): the window shows the game at the speed a person plays it.
        instance = GameInstance(game, agents=agents, seed=seed, headless=False,
                                display=open_display(xvfb, say, UNSEEN_WINDOW), fixed_fps=None,
                                extra_args=tuple(extra_args))
        mode_args = [arg("policy", engine_policy_arg(policy))]
        if opponent is not None:  # matches: the policy on one team, the opponent (human: the keyboard) on the other
            mode_args.append(arg("opponent", opponent))
        if seconds is not None:
            mode_args.append(arg("quit_after_seconds", f"{seconds:g}"))
        against = f" against {opponent}" if opponent is not None else ""

        def playing(shown: int) -> None:  # said when the window reports its agents: the game's own count, which a
            # scene with a fixed set of agents keeps whatever --agents asks (and pong seats paddles two by two)
            say(f"playing {policy}{against} in {game.env} with {_agents_text(shown)}"
                + (f" for {seconds:g} s" if seconds else "; Ctrl-C or close the window to stop"))

        proc = spawn(instance.command(*mode_args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=instance.environ())
        deadline = None if seconds is None else time.monotonic() + 1.5 * seconds + 5.0
        script_errors: list = []
        try:
            ended_by_us = _follow(proc, log, deadline, say, playing, script_errors)
            code = proc.wait(timeout=10)
        except KeyboardInterrupt:
            say("\ninterrupted: closing the game")
            code, ended_by_us = 0, True
        finally:
            if proc.poll() is None:
                end_process_tree([proc.pid])
                proc.wait()
    if code != 0 and not ended_by_us:
        raise Fault(f"the game exited with code {code}; its output is in {log_path}")
    if script_errors:  # Godot went on after it (the function stopped there): what was played was a broken game
        raise Fault(f"the game raised a script error while the policy played: {script_errors[0]} (fix the game's "
                    f"script; its output is in {log_path})")
    log_path.unlink(missing_ok=True)
    return 0


def _agents_text(count: int) -> str:
    return f"{count} agent{'' if count == 1 else 's'}"


def _follow(proc: subprocess.Popen, log: CappedLog, deadline: Optional[float], say, on_window=None,
            script_errors: Optional[list] = None) -> bool:
    """The game's output into ``log`` until it ends, its rl_sync and script-error lines shown (the script errors
    also appended to ``script_errors``), the agents its window shows handed to ``on_window`` and its run report said;
    True when it was ended here, at ``deadline``, because it did not end itself after --seconds."""
    out_buf, err_buf = b"", b""
    streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    while streams:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            end_process_tree([proc.pid])
            return True
        for fd in select.select(list(streams), [], [], wait)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                del streams[fd]
                continue
            log.write(chunk)
            if streams[fd] == "err":
                err_buf += chunk
                while b"\n" in err_buf:
                    line, err_buf = err_buf.split(b"\n", 1)
                    if line.startswith(WINDOW_LINE_BYTES) and on_window is not None:
                        on_window(int(line[len(WINDOW_LINE_BYTES):]))
                    elif line.startswith(PERSON_LINE_BYTES):  # the game's Input Map says the person's side and keys
                        say("you play " + line[len(PERSON_LINE_BYTES):].decode(errors="replace"))
                    elif line.startswith(ADDON_MARK) or SCRIPT_ERROR_MARK in line:
                        print(line.decode(errors="replace"), file=sys.stderr, flush=True)
                        if SCRIPT_ERROR_MARK in line and script_errors is not None:
                            script_errors.append(line.decode(errors="replace").strip())
            else:
                out_buf += chunk
                while b"\n" in out_buf:
                    line, out_buf = out_buf.split(b"\n", 1)
                    if line.startswith(b'{"%s"' % RUN_REPORT.encode()):
                        run = json.loads(line)[RUN_REPORT]
                        say(f"played {run['seconds']:.1f} s: {run['frames_drawn']} frames drawn, {run['fps']:.1f} fps")
    return False


# ---------------------------------------------------------------------------------------------- from Python
def _watch_python(src, env_id: Optional[str], env_path, agents: int, seed: int, seconds: Optional[float],
                  say=print, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S, env_params=()) -> int:
    """The windowed game driven step by step from Python by the PyTorch checkpoint, paced to the game's 60 physics
    frames per second."""
    import torch

    from python_trainer.envs.vec_env import make_vec_env
    from python_trainer.variants.trained_agent import load_agent  # torch: only when a checkpoint plays

    torch.set_num_threads(1)  # a 64-64 MLP: more threads only add contention with the game

    if Path(src).suffix == ".json":
        raise PlaybackError("--python runs the PyTorch checkpoint: give a run folder or a .pt file, not a policy file")
    checkpoint = resolve_checkpoint(src)
    loaded = load_agent(checkpoint)
    game = godot_game(env_id or loaded.env_id, env_path or loaded.env_path, timeout=connect_timeout)
    extra, drawn = game_env_params(game, env_params)  # a sampler is drawn again at every episode, as in training
    with temp_xvfb() as xvfb:
        display = open_display(xvfb, say, UNSEEN_WINDOW)
        envs = None
        try:
            envs = make_vec_env(game, num_instances=1, agents_per_instance=agents, headless=False, seed=seed,
                                max_restarts=0, display=display, connect_timeout=connect_timeout,
                                frame_stack=loaded.frame_stack, extra_args=tuple(extra))
            if drawn:
                envs.set_env_params(drawn)
            shown = _agents_text(envs.num_envs)  # the game's own count
            say(f"playing {checkpoint} from Python in {game.env} with {shown} ({FIXED_FPS} steps/s)"
                + (f" for {seconds:g} s" if seconds else "; Ctrl-C or close the window to stop"))
            _drive(envs, loaded, seed, seconds, say)
        except KeyboardInterrupt:
            say("\ninterrupted: closing the game")
        except (InstanceCrashedError, GodotConnectionError):
            inst = envs.launcher.instances[0] if envs is not None else None
            if inst is None or inst.proc.poll() != 0:
                raise  # a Fault (failures.py, protocol.py): exit status 1
            say("the window was closed")
        finally:
            if envs is not None:
                envs.close()
    return 0


def _drive(envs, loaded, seed: int, seconds: Optional[float], say) -> None:
    """Step ``envs`` with the agent's deterministic actions at real time, saying each episode's return."""
    obs, _ = envs.reset(seed=seed)
    start = next_t = time.monotonic()
    returns = []
    done = np.ones(len(obs), bool)  # a recurrent policy starts each agent's memory afresh
    while seconds is None or time.monotonic() - start < seconds:
        obs, _, terminated, truncated, infos = envs.step(loaded.act(obs, deterministic=True, done=done))
        done = np.logical_or(terminated, truncated)
        if "_episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                returns.append(float(infos["episode"]["r"][i]))
                say(f"episode return {returns[-1]:.2f} (mean of {len(returns)}: {np.mean(returns):.2f})")
        next_t += 1.0 / FIXED_FPS
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.25:  # fell behind (slow machine): do not race to catch up
            next_t = time.monotonic()
