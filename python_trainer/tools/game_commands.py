"""`godot-ppo envs` and `godot-ppo launch`: the games in a binary and their spaces, and instances stepped with
random actions (the vector env without a trainer: a check that a game runs, and how fast).

    godot-ppo envs --env-path my_game/exports/headless/walker.x86_64
    godot-ppo launch --env-id ball_chase --instances 2 --seconds 10
"""

from __future__ import annotations

import argparse
import sys
import time

from python_trainer.base import paths
from python_trainer.envs.game import GameError, GameExport, add_game_arguments, godot_game, list_games
from python_trainer.envs.env_params import describe
from python_trainer.base.flags import add_connect_timeout
from python_trainer.envs.protocol import DIALECT_NAMES
from python_trainer.envs.vec_env import GodotVecEnv


def envs_main(argv=None) -> int:
    """`godot-ppo envs`: the games in a binary and their spaces, read from a running headless instance of each."""
    parser = argparse.ArgumentParser(prog="godot-ppo envs", description=envs_main.__doc__.split(":", 1)[1].strip())
    add_game_arguments(parser)
    add_connect_timeout(parser, "--timeout")  # --timeout: its older name
    args = parser.parse_args(argv)
    try:
        export = GameExport.open(args.env_path or paths.default_export(headless=True))
        listing = list_games(export, args.connect_timeout)
        names = [args.env_id] if args.env_id else list(listing.envs)
        games = [godot_game(name, export.path) for name in names]
    except GameError as e:
        print(f"godot-ppo envs: error: {e}", file=sys.stderr)
        return 2
    print(f"{export.path}: {len(listing.envs)} game(s), default {listing.default}")
    status = 0
    for game in games:
        try:
            env = GodotVecEnv(game, num_instances=1, connect_timeout=args.connect_timeout)
        except Exception as e:
            print(f"godot-ppo envs: error: {game.env}: {e}", file=sys.stderr)
            status = 1
            continue
        try:
            print(f"{game.env}{' (default)' if game.env == listing.default else ''}")
            print(f"  agents per instance: {env.num_envs} (the game's own choice; --agents may change it)")
            if len(env.policies) == 1:
                print(f"  observation space:   {env.single_observation_space}")
                act = env.env_info["action_space"]
                print(f"  action space:        {env.single_action_space}  "
                      f"(godot-rl: {act[0] if isinstance(act, list) else act})")
            for p in env.policies if len(env.policies) > 1 else ():  # one network each when trained
                print(f"  policy {p.name!r}: {len(p.agents)} agents, observations {p.observation_space}, actions "
                      f"{p.action_space}")
            print(f"  speaks:              {DIALECT_NAMES[env.dialect]}")
            print(f"  max_episode_steps:   {env.max_episode_steps}")
            declared = env.env_info.get("env_params") or {}
            if declared:  # our addon's extension: --env-param / --curriculum set them (docs/env_params.md)
                print("  environment parameters:")
                for line in describe(declared):
                    print(f"    {line}")
        finally:
            env.close()
    return status


def launch_main(argv=None) -> int:
    """`godot-ppo launch`: start instances and step them with random actions until Ctrl-C (or --seconds)."""
    parser = argparse.ArgumentParser(prog="godot-ppo launch", description=launch_main.__doc__.split(":", 1)[1].strip())
    add_game_arguments(parser)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--agents", type=int, default=None, help="agents per instance (default: the game's choice)")
    parser.add_argument("--window", action="store_true", help="windowed instances (Xvfb is started if no $DISPLAY)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speedup", type=float, default=1)
    parser.add_argument("--action-repeat", type=int, default=1)
    parser.add_argument("--max-episode-steps", type=int, default=None)
    parser.add_argument("--run-dir", default=None, help="where logs/instance_<i>.log go (default: a temp dir)")
    parser.add_argument("--report-every", type=float, default=2.0, help="seconds between steps/s lines")
    add_connect_timeout(parser)
    args = parser.parse_args(argv)
    env = None
    try:
        game = godot_game(args.env_id, args.env_path, timeout=args.connect_timeout)
        env = GodotVecEnv(
            game, num_instances=args.instances, agents_per_instance=args.agents, seed=args.seed,
            headless=not args.window, speedup=args.speedup, action_repeat=args.action_repeat,
            max_episode_steps=args.max_episode_steps, run_dir=args.run_dir, connect_timeout=args.connect_timeout,
        )
        print(env.startup_line(), flush=True)
        print(f"launched {args.instances} instance(s) of {game.env} ({env.num_envs} agents in all; "
              f"pids {env.launcher.pids()}, logs in {env.launcher.log_dir}); Ctrl-C to stop", flush=True)
        env.reset(seed=args.seed)
        start = last = time.perf_counter()
        steps = last_steps = episodes = 0
        while args.seconds is None or time.perf_counter() - start < args.seconds:
            _, _, _, _, infos = env.step(env.action_space.sample())
            steps += 1
            if "_episode" in infos:
                episodes += int(infos["_episode"].sum())
            now = time.perf_counter()
            if now - last >= args.report_every:
                rate = (steps - last_steps) * env.num_envs / (now - last)
                print(f"{steps} steps, {steps * env.num_envs} agent-steps, {rate:,.0f} agent-steps/s, "
                      f"{episodes} episodes", flush=True)
                last, last_steps = now, steps
        total = time.perf_counter() - start
        print(f"done: {steps * env.num_envs} agent-steps in {total:.1f}s "
              f"({steps * env.num_envs / max(total, 1e-9):,.0f} agent-steps/s)", flush=True)
    except KeyboardInterrupt:
        print("interrupted: closing the instances", file=sys.stderr, flush=True)
    except GameError as e:
        print(f"godot-ppo launch: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        print(f"godot-ppo launch: error: {e}", file=sys.stderr)
        return 1
    finally:
        if env is not None:
            env.close()
    return 0
