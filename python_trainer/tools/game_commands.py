"""`godot-ppo envs` and `godot-ppo launch`: the games in a binary and their spaces, and instances stepped with
random actions (the vector env without a trainer: a check that a game runs, and how fast).

    godot-ppo envs --env-path my_game/exports/headless/walker.x86_64
    godot-ppo envs --env-id forager --env-param vision=1 --show-camera forager.png   # what each camera sees
    godot-ppo launch --env-id ball_chase --num-instances 2 --seconds 10
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import tyro

from python_trainer.base import paths
from python_trainer.base.errors import Fault, UserError, one_line
from python_trainer.base.files import OutputError, atomic_output, check_output
from python_trainer.base.flags import (ACTION_REPEAT, AGENTS_FLAG, INSTANCES_FLAG, SEED_FLAG, SPEEDUP, at_least, flag,
                                       parse_flags, positive)
from python_trainer.envs.env_params import describe
from python_trainer.envs.game import godot_game, list_games, open_game_path
from python_trainer.envs.launcher import LaunchOptions
from python_trainer.envs.protocol import DIALECT_NAMES, GODOT_RL
from python_trainer.envs.spaces import ARENAS_KEY, DECISION_FRAMES_KEY, PHYSICS_FPS_KEY, dict_observation_space
from python_trainer.envs.vec_env import GodotVecEnv
from python_trainer.tools.game_flags import EnvParamArgs, GameArgs, game_env_params

CAMERA_TILE = 144  # pixels: the side of each camera's image in --show-camera's grid (at least; nearest-neighbour)


@dataclass
class EnvsArgs(GameArgs, EnvParamArgs):
    """The games in a binary and their spaces, read from a running headless instance of each."""

    show_camera: Annotated[Optional[str], tyro.conf.arg(metavar="OUT.png")] = None
    """save what each camera sensor of the game (--env-id's, else the default) sees as its agents start: one PNG, a
    grid of the agents' images, from a windowed instance (Xvfb is started if no $DISPLAY)"""


@dataclass
class LaunchArgs(GameArgs, EnvParamArgs):
    """Start instances and step them with random actions until Ctrl-C (or --seconds)."""

    num_instances: INSTANCES_FLAG.type() = INSTANCES_FLAG.default(1)
    agents_per_instance: AGENTS_FLAG.type(" (default: the game's own choice)") = AGENTS_FLAG.default(None)
    window: bool = False
    """windowed instances (Xvfb is started if no $DISPLAY)"""
    seconds: Optional[float] = flag(None, positive("10", "a number of seconds > 0"))
    """stop after this many seconds (default: at Ctrl-C)"""
    seed: SEED_FLAG.type(" of the games") = SEED_FLAG.default(0)
    speedup: float = flag(1.0, SPEEDUP)
    """engine time scale"""
    action_repeat: int = flag(1, ACTION_REPEAT)
    """physics frames per decision step"""
    max_episode_steps: Optional[int] = flag(None, at_least(1, "an integer >= 1", "500"))
    """the games' time limit, in decision steps (default: the game's)"""
    run_dir: Optional[str] = None
    """where logs/instance_<i>.log go (default: a temporary folder)"""
    report_every: float = flag(2.0, positive("2", "a number of seconds > 0"))
    """seconds between steps/s lines"""


def envs_main(argv=None) -> int:
    """`godot-ppo envs`: the games in a binary and their spaces, read from a running headless instance of each."""
    args = parse_flags(EnvsArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo envs")
    export = open_game_path(args.env_path or paths.default_export(headless=True))  # a GameError names the fix
    listing = list_games(export, args.connect_timeout)
    one = args.env_id or (listing.default if args.show_camera or args.env_param else None)
    if args.env_param and len(listing.envs) > 1 and not args.env_id:
        raise UserError(f"--env-param sets one game's parameters: add --env-id NAME (one of "
                        f"{', '.join(listing.envs)})")
    games = [godot_game(name, export.path) for name in ([one] if one else listing.envs)]
    extra = game_env_params(games[0], args.env_param)[0] if args.env_param else []
    if args.show_camera:
        check_output(args.show_camera)
    print(f"{export.path}: {len(listing.envs)} game(s), default {listing.default}")
    failed = []
    for game in games:
        try:
            # headless even for a camera game (its handshake and env_info say its spaces, and nothing steps), unless
            # --show-camera asks what its cameras see: a headless build renders nothing
            env = GodotVecEnv(game, LaunchOptions(connect_timeout=args.connect_timeout, extra_args=tuple(extra),
                                                  auto_window=bool(args.show_camera)))
        except Exception as e:
            failed.append(f"{game.env}: {one_line(e)}")
            continue
        try:
            print(f"{game.env}{' (default)' if game.env == listing.default else ''}")
            _print_spaces(env)
            if args.show_camera:
                _save_cameras(env, Path(args.show_camera))
        finally:
            env.close()
    if failed:  # the games that did start are listed above; the others are said once, at the end
        raise Fault("cannot start " + "; ".join(failed))
    return 0


# What --agents does to a game's count, as its env_info says (our extension `agents_from_flag`; a game made with
# godot_rl_agents' plugin never reads --agents, and an addon older than the key says nothing).
AGENTS_NOTES = {True: "the game's own choice; --agents may change it",
                False: "fixed by the game: --agents does not change it", None: "the game's own choice"}


def _print_spaces(env) -> None:
    """A game's agents, spaces, protocol, time limit and environment parameters, as `godot-ppo envs` prints them."""
    from_flag = env.env_info.get("agents_from_flag", False if env.dialect == GODOT_RL else None)
    print(f"  agents per instance: {env.num_envs} ({AGENTS_NOTES[from_flag]})")
    if len(env.policies) == 1:
        print(f"  observation space:   {_observations(env.policies[0])}")
        act = env.env_info["action_space"]
        print(f"  action space:        {env.single_action_space}  "
              f"(godot-rl: {act[0] if isinstance(act, list) else act})")
    for p in env.policies if len(env.policies) > 1 else ():  # one network each when trained
        print(f"  policy {p.name!r}: {len(p.agents)} agents, observations {_observations(p)}, actions "
              f"{p.action_space}")
    print(f"  speaks:              {DIALECT_NAMES[env.dialect]}")
    print(f"  max_episode_steps:   {env.max_episode_steps}")
    declared = env.env_info.get("env_params") or {}
    if declared:  # our addon's extension: --env-param / --curriculum set them (docs/env_params.md)
        print("  environment parameters:")
        for line in describe(declared):
            print(f"    {line}")
    for line in _play_lines(env.env_info):
        print(f"  {line}")


def _play_lines(info: dict) -> list:
    """Who plays and how often: the teams, the policy names, the agents per arena and the decision rate (what the
    game's env_info says; a game made with godot_rl_agents' plugin says less)."""
    def counted(values) -> str:
        return ", ".join(f"{value} ({n} agent{'' if n == 1 else 's'})" for value, n in Counter(values).items())

    teams = [int(t) for t in info.get("agent_teams") or () if int(t) >= 0]
    names = info.get("agent_policy_names") or ["shared_policy"] * int(info.get("n_agents", 0))
    lines = [f"teams:               {counted(f'team {t}' for t in sorted(teams)) if teams else 'none'}",
             f"policy names:        {counted(repr(str(n)) for n in names)}"]
    arenas = info.get(ARENAS_KEY)
    if arenas:
        sizes = sorted(set(Counter(arenas).values()))
        per = "/".join(str(n) for n in sizes)
        lines.append(f"agents per arena:    {per} ({len(set(arenas))} arena{'' if len(set(arenas)) == 1 else 's'}: "
                     "an arena is the parent node of its agents)")
    frames, fps = info.get(DECISION_FRAMES_KEY), info.get(PHYSICS_FPS_KEY)
    if frames and fps:
        lines.append(f"decision rate:       every {int(frames)} physics frame{'' if frames == 1 else 's'} "
                     f"({fps / frames:g} decisions per second of game time, {int(fps)} physics frames/s)")
    return lines


def _save_cameras(env, out: Path) -> None:
    """What each agent's camera sees as its episode starts, as one PNG: the agents' images in a grid."""
    from PIL import Image

    layout = env.image_layout
    if layout is None:
        raise UserError(f"--show-camera: {env.env_id}'s agents have no camera sensor (no observation key with \"2d\")"
                        + ("; with several policies, each needs one" if len(env.policies) > 1 else ""))
    obs, _ = env.reset(seed=0)
    images = layout.split(obs)[1][..., -layout.channels:].clip(0, 255).astype(np.uint8)  # each agent's newest frame
    scale = max(1, -(-CAMERA_TILE // max(layout.height, layout.width)))
    cols = int(np.ceil(np.sqrt(len(images))))
    rows = -(-len(images) // cols)
    gap = 4
    tile_h, tile_w = layout.height * scale, layout.width * scale
    grid = np.full((rows * (tile_h + gap) + gap, cols * (tile_w + gap) + gap, 3), 40, np.uint8)
    for i, image in enumerate(images):
        big = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
        r, c = divmod(i, cols)
        y, x = gap + r * (tile_h + gap), gap + c * (tile_w + gap)
        grid[y:y + tile_h, x:x + tile_w] = big  # a gray camera's one channel on all three
    try:
        with atomic_output(out) as part:
            Image.fromarray(grid).save(part, format="PNG")
    except OSError as e:
        raise OutputError(f"cannot write {out}: {e}") from None
    print(f"  cameras:             {len(images)} agents' {layout.width}x{layout.height}x{layout.channels} images "
          f"({layout.key}) -> {out}, {scale}x, in a {rows}x{cols} grid")


def _observations(policy) -> str:
    """A policy's observation space as gymnasium writes it: the flat Box, or for a camera game the Dict of its keys
    with the image as Box(0, 255, (H, W, C), uint8) (godot-rl's GodotEnv's form; the trainer keeps the flat row)."""
    if policy.image is None:
        return str(policy.observation_space)
    return f"{dict_observation_space(policy)}  (the trainer's flat row: {policy.observation_space.shape[0]} values; trained on windowed instances)"


def launch_main(argv=None) -> int:
    """`godot-ppo launch`: start instances and step them with random actions until Ctrl-C (or --seconds)."""
    args = parse_flags(LaunchArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo launch")
    env = None
    try:
        game = godot_game(args.env_id, args.env_path, timeout=args.connect_timeout)
        extra, drawn = game_env_params(game, args.env_param)  # train's rule: constants start the games, samplers
        env = GodotVecEnv(game, LaunchOptions(  # are drawn again at every episode (the env_params message)
            num_instances=args.num_instances, agents_per_instance=args.agents_per_instance, seed=args.seed,
            headless=not args.window, speedup=args.speedup, action_repeat=args.action_repeat,
            max_episode_steps=args.max_episode_steps, run_dir=args.run_dir, connect_timeout=args.connect_timeout,
            extra_args=tuple(extra),
        ))
        if drawn:
            env.set_env_params(drawn)
        print(env.startup_line(), flush=True)
        print(f"launched {args.num_instances} instance(s) of {game.env} ({env.num_envs} agents in all; "
              f"pids {env.launcher.pids()}, logs in {env.launcher.log_dir}); Ctrl-C to stop", flush=True)
        _step_randomly(env, args)
    except KeyboardInterrupt:
        print("interrupted: closing the instances", file=sys.stderr, flush=True)
    except UserError:  # a game that cannot be used as named (2), or one that did not start or crashed (1)
        raise
    except Exception as e:  # anything else that stopped the instances: a fault, said in one line
        raise Fault(str(e)) from e
    finally:
        if env is not None:
            env.close()
    return 0


def _step_randomly(env, args: LaunchArgs) -> None:
    """Random actions until --seconds (or Ctrl-C), a steps/s line every --report-every seconds, and the total."""
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
