"""In-engine policy playback: export a trained actor to a policy file the game runs in plain GDScript, watch it,
record it, and evaluate it inside the engine.

    godot-ppo export-policy runs/ball_chase__ppo__1__1700000000           # -> <run>/policy.json
    godot-ppo export-policy runs/ball_chase__ppo__1__1700000000 --format onnx -o policy.onnx   # godot-rl's ONNX
    godot-ppo import-policy model.onnx --env-id ball_chase -o policy.json   # an SB3/CleanRL ONNX model, in the engine
    godot-ppo play runs/ball_chase__ppo__1__1700000000                    # window, real time, 4 agents
    godot-ppo play exports/policies/ball_chase.json --record ball_chase.gif --record-seconds 10
    godot-ppo play runs/... --python                                      # the PyTorch checkpoint drives the window
    godot-ppo play runs/pong__ppo__1__1700000000 --opponent human         # you against it, with the keyboard

The policy file's format is described in policy_file.py (and docs/watching.md, "The policy file").
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from python_trainer.envs.env_params import CONSTANT, check_params, parse_flag
from python_trainer.base.errors import one_line
from python_trainer.base.files import OutputError, atomic_output, check_output, scratch_dir, write_error
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S, add_connect_timeout
from python_trainer.envs.game import GameError, GameInstance, GodotGame, game_environ, godot_game, is_gym_id
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.logs import CappedLog
from python_trainer.envs.failures import InstanceCrashedError, InstanceStartError
from python_trainer.envs.xvfb import Xvfb
from python_trainer.base.paths import CHECKPOINT_NAME, MODEL_NAME
from python_trainer.engine.policy_file import FORMAT, VERSION, policy_json  # noqa: F401  (playback's public names too)
from python_trainer.engine.policy_file import POLICIES_DIR, POLICY_NAME, PolicyFileError, game_policy, is_bundle, policy_entries
from python_trainer.engine.policy_file import policy_bundle, policy_file_name, policy_source, read_policy, write_policy
from python_trainer.base.processes import describe_exit, end_process_tree, run_to_end, spawn
from python_trainer.envs.protocol import GodotConnectionError
from python_trainer.base.signals import signal_policy

PLAY_FPS = 60  # the game's physics rate: a recording of S seconds is 60 * S frames
RECORD_EVERY = 4  # record every 4th frame of 60 fps -> a 15 fps clip at true speed
GIF_WIDTH = 512
DEFAULT_TIMEOUT_S = 120.0
FFMPEG_TIMEOUT_S = 600.0
RANDOM_POLICY = "random"  # --policy=random: the game plays random actions (policy_mode.gd)
RECORD_PREFIX = "godot-ppo-record-"  # the recording's frames: <temp dir>/godot-ppo-record-<pid>-XXXX/frame_*.png
# Rough bytes per recorded frame, for the room checked before recording: the game's PNG frames in the temp dir, and
# the clip made of them at GIF_WIDTH. Measured on ball_chase (4 agents): 18 kB a PNG frame, 6 kB of GIF, 0.8 kB of
# mp4 (jumper less); about ten times that, for bigger windows and busier scenes.
ROUGH_FRAME_BYTES = {".png": 200_000, ".gif": 60_000, ".mp4": 10_000}

# A problem the user can fix; the commands print it as `godot-ppo CMD: error: ...`. One class with the policy file's
# errors (policy_file.PolicyFileError), so `except PlaybackError` also catches a bad or unplayable policy file.
PlaybackError = PolicyFileError


# ======================================================================================================================
# Policy export (the file itself and its content for an agent in memory: policy_file.py)
# ======================================================================================================================
def resolve_checkpoint(src) -> Path:
    """model.pt (else checkpoint.pt) of a run folder, or the checkpoint file itself."""
    src = Path(src)
    if src.is_dir():
        for name in (MODEL_NAME, CHECKPOINT_NAME):
            if (src / name).is_file():
                return src / name
        raise PlaybackError(
            f"{src} holds no {MODEL_NAME} or {CHECKPOINT_NAME}: give a run folder of `godot-ppo train` (runs/<env>__...) "
            "that got at least to its first checkpoint, or a .pt file"
        )
    if not src.exists():
        raise PlaybackError(f"{src}: no such file or folder (give a run folder, a model.pt/checkpoint.pt or a policy .json)")
    return src


def default_policy_path(src) -> Path:
    """<run>/policy.json for a run folder; <stem>.policy.json next to a checkpoint file."""
    src = Path(src)
    if src.is_dir():
        return src / POLICY_NAME
    return src.with_name(src.stem + ".policy.json")


def game_env_info(game: GodotGame) -> dict:
    """The game's env_info, read from one headless instance with one agent (about half a second)."""
    with InstanceLauncher(game, LaunchOptions(agents_per_instance=1)) as launcher:
        return launcher.instances[0].env_info


def policy_dict(checkpoint_path, env_info: Optional[dict] = None) -> dict:
    """The policy file's content for a checkpoint (model.pt / checkpoint.pt); a checkpoint of several policies (its
    "policies": {name: that policy's model, normaliser and spaces}) gives a bundle of them, each named.

    ``env_info`` is the game's env_info (where the action keys come from); without it, the one saved in the
    checkpoint, else (older checkpoints) one headless instance of the checkpoint's game is started to ask for it.
    """
    from python_trainer.checkpoint import load_checkpoint  # torch: only when a checkpoint is exported
    from python_trainer.run.run_folder import recorded_command, train_command
    from python_trainer.variants.trained_agent import agent_from_checkpoint

    checkpoint_path = Path(checkpoint_path)
    where = str(checkpoint_path)
    try:
        ckpt = load_checkpoint(checkpoint_path)
        named = ckpt.get("policies")
        # each policy's entry holds what a checkpoint of one policy holds at its top level: rebuilt as one, each
        # policy is read like a checkpoint of one
        common = {key: value for key, value in ckpt.items() if key != "policies"}
        agents = ({name: agent_from_checkpoint({**common, **state}) for name, state in named.items()} if named
                  else {None: agent_from_checkpoint(ckpt)})  # fmt: skip
    except Exception as e:  # truncated, not a checkpoint, another format
        raise PlaybackError(f"{where}: cannot read it as a godot-ppo checkpoint ({type(e).__name__}: "
                            f"{one_line(e)[:200]})") from None
    loaded = next(iter(agents.values()))
    env_info = env_info or ckpt.get("env_info")
    if env_info is None:
        if is_gym_id(loaded.env_id) and loaded.env_path is None:
            raise PlaybackError(
                f"{where}: it was trained on the gymnasium id {loaded.env_id!r}, not a Godot game; "
                "only Godot games can play a policy in the engine: give --env GAME, a game with the same observations "
                "and actions (e.g. --env cart_pole for CartPole-v1)"
            )
        env_info = game_env_info(godot_game(loaded.env_id, loaded.env_path))
    args = ckpt.get("args") or {}
    # the command that trained it: as its run folder recorded it, else every flag it was trained with
    command = recorded_command(checkpoint_path.parent) or train_command(args)
    source = policy_source(checkpoint_path, global_step=loaded.global_step, update=ckpt.get("update", 0),
                           trained_env=loaded.env_id, seed=args.get("seed"), command=command,
                           env_path=args.get("env_path"))  # fmt: skip
    policies = [game_policy(one.agent, one.normalizer, one.action_space, env_info, env_id=one.env_id, source=source,
                            where=where if name is None else f"{where} (policy {name!r})", policy_name=name)
                for name, one in agents.items()]  # fmt: skip
    return policies[0] if not named else policy_bundle(policies, env=policies[0]["env"], source=source)


def export_policy(src, out=None, env_info: Optional[dict] = None) -> Path:
    """Write the actor of a run folder / checkpoint file as a policy file; returns its path.

    Default output: ``<run>/policy.json`` for a run folder, ``<stem>.policy.json`` next to a checkpoint file.
    """
    checkpoint = resolve_checkpoint(src)
    out = Path(out) if out is not None else default_policy_path(src)
    return write_policy(out, policy_dict(checkpoint, env_info))


def export_onnx(src, out=None, env_info: Optional[dict] = None) -> Path:
    """Write a run folder's / checkpoint's actor, or a policy file, as an ONNX model in godot-rl's convention
    (onnx_policy.py); returns its path. Default output: ``<run>/policy.onnx``, else beside ``src``."""
    from python_trainer.engine.onnx_policy import write_onnx  # torch and onnx: only for this format

    src = Path(src)
    if src.suffix == ".json":
        policy = read_policy(src)
        default = src.with_suffix(".onnx")
    else:
        policy = policy_dict(resolve_checkpoint(src), env_info)
        default = default_policy_path(src).with_suffix(".onnx")
    if is_bundle(policy):  # an ONNX model is one network in godot-rl's convention: one policy at a time
        names = [entry["policy_name"] for entry in policy["policies"]]
        folder = (src if src.is_dir() else src.parent) / POLICIES_DIR
        raise PolicyFileError(f"{src} holds {len(names)} policies ({', '.join(names)}) and an ONNX model holds one: "
                              f"export each policy's own file, e.g. godot-ppo export-policy "
                              f"{folder / policy_file_name(names[0])} --format onnx")  # fmt: skip
    return write_onnx(Path(out) if out is not None else default, policy)


def policy_files(src) -> list[Path]:
    """The files of a --policy value: one path, or several separated by commas (each agent plays the network of its
    policy_name, docs/watching.md "Several policies in one game")."""
    return [Path(part) for part in str(src).split(",") if part.strip()]


def engine_policy_arg(src) -> str:
    """--policy's value for the game: each file's absolute path, separated by commas."""
    return ",".join(str(path.resolve()) for path in policy_files(src))


def ensure_policy(src):
    """A policy file for ``src``: the file itself (.json; several separated by commas: each), or the run's/checkpoint's
    policy file, (re-)exported when it is missing or older than the checkpoint."""
    if len(policy_files(src)) > 1:
        return ",".join(str(ensure_policy(part)) for part in policy_files(src))
    src = Path(src)
    if src.suffix == ".json":
        if not src.is_file():
            raise PlaybackError(f"policy file {src}: the file does not exist")
        return src
    checkpoint = resolve_checkpoint(src)
    policy = default_policy_path(src)
    if policy.is_file() and policy.stat().st_mtime >= checkpoint.stat().st_mtime:
        return policy
    print(f"exporting {checkpoint} -> {policy}", flush=True)
    return export_policy(src, policy)


def export_policy_main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="godot-ppo export-policy",
        description="Write a trained actor as a policy file the game runs by itself (--policy=FILE).",
    )
    parser.add_argument("src", metavar="RUN_DIR_OR_CHECKPOINT", help="a run folder (its model.pt, else checkpoint.pt) or a .pt file")
    parser.add_argument("-o", "--out", default=None, help="output file (default: RUN_DIR/policy.json, or <checkpoint stem>.policy.json)")
    parser.add_argument("--env-path", default=None, metavar="PATH",
                        help="read the action keys from this export's game instead of the checkpoint (default: the "
                             "checkpoint's own record, else the export it was trained with)")
    parser.add_argument("--env-id", "--env", dest="env_id", default=None, metavar="NAME",
                        help="the game that will play the policy: in --env-path's export, else in this repository's "
                             "(default: the one the checkpoint trained on). A policy trained on a gymnasium id plays "
                             "in a game with the same observations and actions, e.g. CartPole-v1's in cart_pole")
    parser.add_argument("--format", choices=["json", "onnx"], default=None,
                        help="json: the policy file the engine plays (--policy=FILE); onnx: the same network as an ONNX "
                             "model in godot-rl's convention, the normalisation folded in (docs/onnx.md). Default: onnx "
                             "when --out ends in .onnx, else json. A policy .json as the source converts it to ONNX")
    args = parser.parse_args(argv)
    fmt = args.format or ("onnx" if args.out and args.out.endswith(".onnx") else "json")
    try:
        env_info = None
        if args.env_path is not None and not args.src.endswith(".json"):
            from python_trainer.checkpoint import load_checkpoint  # torch: only for a checkpoint

            trained = args.env_id or load_checkpoint(resolve_checkpoint(args.src))["env_id"]
            env_info = game_env_info(godot_game(trained, args.env_path))
        elif args.env_id is not None:
            env_info = game_env_info(godot_game(args.env_id))
        if fmt == "onnx":
            out = export_onnx(args.src, args.out, env_info)
        else:
            out = export_policy(args.src, args.out, env_info)
            policy = read_policy(out)
    except (PlaybackError, InstanceStartError, ValueError) as e:
        print(f"godot-ppo export-policy: error: {e}", file=sys.stderr)
        return 2
    if fmt == "onnx":
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB): ONNX opset 17 in godot-rl's convention, inputs obs and "
              "state_ins, outputs output and state_outs (docs/onnx.md)")  # fmt: skip
        return 0
    for entry in policy_entries(policy):  # a bundle of several policies: a line for each
        n_params = sum(len(layer["bias"]) * (1 + len(layer["weight"][0])) for layer in entry["layers"])
        lstm = entry.get("lstm")
        if lstm:  # a recurrent policy: the LSTM's weights too
            n_params += 4 * lstm["hidden_size"] * (lstm["input_size"] + lstm["hidden_size"] + 1)
        actions = ", ".join(f"{k['key']} ({k['action_type']}, {k['size']})" for k in entry["action_keys"])
        named = f" policy {entry['policy_name']!r}:" if "policy_name" in entry else ""
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB): {entry['env']},{named} {entry['observation_size']} "
              f"observations -> {actions}, {n_params} parameters, global step {entry['source']['global_step']}")  # fmt: skip
    print(f"watch it: godot-ppo play {out}")
    return 0


def import_policy_main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="godot-ppo import-policy",
        description="Turn an ONNX MLP policy (godot-rl's export of SB3's or CleanRL's PPO, or godot-ppo's own) into a "
                    "policy file the game plays by itself (--policy=FILE): no C#, no Python, no ONNX runtime.",
    )
    parser.add_argument("model", metavar="MODEL.onnx", help="the ONNX model (godot-rl's convention: obs -> output)")
    parser.add_argument("-o", "--out", default=None, help="output policy file (default: MODEL with .json)")
    parser.add_argument("--env-path", default=None, metavar="PATH",
                        help="the export whose game the policy plays (default: this repository's)")
    parser.add_argument("--env-id", "--env", dest="env_id", default=None, metavar="NAME",
                        help="the game the policy plays: its action keys name the outputs, in godot-rl's order (needed "
                             "for SB3's and CleanRL's models; godot-ppo's own carry them)")
    parser.add_argument("--policy-name", default=None, metavar="NAME",
                        help="the agents' policy_name this network plays, in a game of several policies (default: none, "
                             "it plays every agent that no other --policy file names)")
    args = parser.parse_args(argv)
    try:
        from python_trainer.engine.onnx_policy import import_policy  # torch and onnx: only for this command

        env_info = None
        if args.env_id is not None or args.env_path is not None:
            env_info = game_env_info(godot_game(args.env_id, args.env_path))
        policy = import_policy(args.model, env_info, policy_name=args.policy_name)
        out = write_policy(Path(args.out) if args.out else Path(args.model).with_suffix(".json"), policy)
    except (PlaybackError, InstanceStartError, ValueError) as e:
        print(f"godot-ppo import-policy: error: {e}", file=sys.stderr)
        return 2
    actions = ", ".join(f"{k['key']} ({k['action_type']}, {k['size']})" for k in policy["action_keys"])
    print(f"wrote {out}: {policy['env']}, {policy['observation_size']} observations -> {actions}, "
          f"{len(policy['layers'])} layers{', observations normalised' if policy['obs_normalization'] else ''}")
    print(f"watch it: godot-ppo play {out}")
    return 0


# ======================================================================================================================
# Running the game with a policy
# ======================================================================================================================
def _xvfb() -> Xvfb:
    return Xvfb(Path(tempfile.gettempdir()) / f"godot-ppo-xvfb-{os.getpid()}.log")


def open_display(xvfb: "Xvfb", say=print, hint: str = "use --record FILE.gif to see it") -> str:
    """The user's $DISPLAY, or a fresh Xvfb's (started here and reported, with ``hint``)."""
    if os.environ.get("DISPLAY"):
        return os.environ["DISPLAY"]
    display = xvfb.start()
    say(f"no $DISPLAY: started Xvfb on {display} (pid {xvfb.proc.pid}); the window is not visible, {hint}")
    return display


def policy_game(policy_path, env_id: Optional[str] = None, env_path=None,
                timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> GodotGame:
    """The game a policy file plays: ``env_id`` (default: the game it was trained on) in ``env_path`` (default: the
    export it was trained with, when the file names one, else this repository's); ``timeout``: --connect-timeout.
    Several files (separated by commas): each is read, the first names the game."""
    policy = [read_policy(path) for path in policy_files(policy_path)][0]
    env_path = env_path or (policy.get("source") or {}).get("env_path")
    game = godot_game(env_id or policy["env"], env_path, timeout=timeout)
    game.require_addon("in-engine playback (play without --python, --record, in-engine evaluation)")
    return game


def _run_game(cmd: Sequence[str], timeout: float, env=None) -> subprocess.CompletedProcess:
    """Run a game process to the end (its own session, ended with its children on timeout / Ctrl-C)."""
    result = run_to_end(cmd, timeout, env=game_environ(env))
    if result.returncode is None:
        raise PlaybackError(f"`{' '.join(cmd)}` did not finish within {timeout:g} s; stderr:\n{result.stderr[-2000:]}")
    return result


def _json_line(stdout: str, key: str):
    for line in stdout.splitlines():
        if line.startswith("{") and f'"{key}"' in line[:20]:
            return json.loads(line)[key]
    return None


def _game_error(result: subprocess.CompletedProcess, what: str) -> PlaybackError:
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    detail = "\n".join(errors[-5:]) or result.stderr[-2000:] or result.stdout[-2000:]
    return PlaybackError(f"{what} failed (exit code {result.returncode}):\n{detail}")


def evaluate_in_engine(policy_path, env_id: Optional[str] = None, env_path=None, episodes: int = 32, seed: int = 0,
                       agents: Optional[int] = 16, timeout: float = DEFAULT_TIMEOUT_S,
                       max_episode_steps: Optional[int] = None, env_params: Optional[dict] = None) -> dict:  # fmt: skip
    """Play ``episodes`` episodes with the policy inside the headless game (no Python in the loop); each agent
    plays its share of them. ``policy_path`` "random": the game's random actions (the baseline; give ``env_id``).
    ``env_id`` / ``env_path``: default, the policy's own game (`policy_game`); ``agents``
    None: the game's own number; ``env_params``: name -> number, the game's environment parameters (--env_param).
    ``policy_path`` may be a bundle of several policies, or several files separated by commas (each agent plays the
    network of its policy_name). Returns the game's report: {"env", "policy", "seed", "episodes", "returns",
    "lengths", "mean_return", "info_means" (each numeric get_info() key's mean), "env_params"}, and with several
    policies "by_policy": {name: {"episodes", "returns", "lengths", "mean_return"}}.
    """
    if str(policy_path) == RANDOM_POLICY:  # the game's own random actions: any game's baseline
        game, policy_arg = godot_game(env_id, env_path), RANDOM_POLICY
    else:
        game, policy_arg = policy_game(policy_path, env_id, env_path), engine_policy_arg(policy_path)
    instance = GameInstance(game, agents=agents, seed=seed, max_episode_steps=max_episode_steps)
    params = [f"--env_param={name}={value:g}" for name, value in (env_params or {}).items()]
    result = _run_game(instance.command(f"--policy={policy_arg}", f"--eval_episodes={int(episodes)}", *params), timeout)
    report = _json_line(result.stdout, "eval")
    if result.returncode != 0 or report is None:
        raise _game_error(result, f"in-engine evaluation of {policy_path}")
    return report


MATCH_KEYWORDS = ("random", "scripted")  # what --policy and --opponent take besides files (agent_driver.gd)
HUMAN_OPPONENT = "human"  # --opponent=human: the keyboard, in a window only


def match_policy_arg(src, what: str) -> str:
    """The game's value for --policy / --opponent (``what``) in a match: a keyword as is, else the file(s), each
    checked (PolicyFileError) and given as an absolute path."""
    if str(src) in MATCH_KEYWORDS:
        return str(src)
    for path in policy_files(src):
        if path.suffix != ".json" and not path.exists():
            raise PlaybackError(f"{what} {src}: neither a policy file nor one of {', '.join(MATCH_KEYWORDS)}"
                                + (f" or {HUMAN_OPPONENT} (in a window: godot-ppo play)" if what == "opponent" else ""))
        read_policy(path)
    return engine_policy_arg(src)


def play_matches(policy_path, opponent, episodes: int = 100, env_id: Optional[str] = None, env_path=None,
                 seed: int = 0, agents: Optional[int] = 16, timeout: float = DEFAULT_TIMEOUT_S,
                 max_episode_steps: Optional[int] = None) -> dict:  # fmt: skip
    """Play ``episodes`` matches of a two-sided game (agents in teams 0 and 1) in the headless engine: the policy on
    one team, ``opponent`` on the other, each side for half of the matches (docs/binary.md, "Matches").

    ``policy_path``: a policy file (single or bundle; several separated by commas), or "random" / "scripted" (then
    give ``env_id``); ``opponent``: a policy file, "random" or "scripted". ``env_id`` / ``env_path``: default, the
    policy's own game. Returns the game's report, from the policy's side: {"wins", "losses", "draws", "episodes",
    "win_rate" (wins / decided matches, None when none was decided), "mean_return", "returns", "lengths",
    "by_team": {"0": {the same counts}, "1": {...}}, "env", "policy", "opponent", "seed"}.
    Raises PolicyFileError (= PlaybackError) for a bad file, a game without two teams, an opponent that does not fit
    its agents, or a game that fails or does not finish within ``timeout`` seconds.
    """
    if str(opponent) == HUMAN_OPPONENT:
        raise PlaybackError("opponent human plays with the keyboard in a window: godot-ppo play RUN --opponent human")
    policy_arg, opponent_arg = match_policy_arg(policy_path, "policy"), match_policy_arg(opponent, "opponent")
    if policy_arg in MATCH_KEYWORDS:
        game = godot_game(env_id, env_path)
    else:
        game = policy_game(policy_path, env_id, env_path)
    instance = GameInstance(game, agents=agents, seed=seed, max_episode_steps=max_episode_steps)
    result = _run_game(instance.command(f"--policy={policy_arg}", f"--opponent={opponent_arg}",
                                        f"--eval_episodes={int(episodes)}"), timeout)  # fmt: skip
    report = _json_line(result.stdout, "eval")
    if result.returncode != 0 or report is None:
        errors = [line[len("rl_sync: error: "):] for line in result.stderr.splitlines()
                  if line.startswith("rl_sync: error: ")]  # fmt: skip
        if result.returncode == 1 and errors:  # the game's one line: the problem and its fix
            raise PlaybackError(errors[-1])
        raise _game_error(result, f"matches of {policy_path} against {opponent}")
    return report


def policy_forward(policy_path, observations, env_path=None, timeout: float = 60.0, dones=None):
    """The GDScript forward pass on ``observations`` (n, obs_dim): (outputs ndarray (n, n_out), actions list).
    Any game of any export runs it (the network alone is checked); default: this repository's default game.
    A recurrent policy reads the observations as one agent's sequence, its memory reset where ``dones`` is true."""
    obs = np.asarray(observations, dtype=np.float64)
    if obs.ndim != 2:
        raise ValueError(f"observations must be a 2-D array (n, obs_dim), got shape {obs.shape}")
    with tempfile.TemporaryDirectory(prefix="godot-ppo-forward-") as tmp:
        inp = Path(tmp) / "observations.json"
        given = {"observations": obs.tolist()}
        if dones is not None:
            given["dones"] = [bool(d) for d in dones]
        inp.write_text(json.dumps(given))
        instance = GameInstance(godot_game(None, env_path), agents=1)
        result = _run_game(instance.command(f"--policy={Path(policy_path).resolve()}", f"--policy_forward={inp}"),
                           timeout)  # fmt: skip
    rows = _json_line(result.stdout, "forward")
    if result.returncode != 0 or rows is None:
        raise _game_error(result, f"--policy_forward with {policy_path}")
    outputs = np.array([r["outputs"] for r in rows], dtype=np.float64)
    return outputs, [r["action"] for r in rows]


# ---------------------------------------------------------------------------------------------- recording
def assemble_gif(frames: Sequence[Path], out: Path, fps: float = PLAY_FPS / RECORD_EVERY, width: int = GIF_WIDTH) -> None:
    """PNG frames -> an optimised, looping GIF ``width`` pixels wide (one shared palette, delta frames)."""
    from PIL import Image

    if not frames:
        raise PlaybackError("the recording produced no frames")
    images = []
    palette_src = None
    for f in frames:
        with Image.open(f) as im:
            im = im.convert("RGB")
            if im.width != width:
                im = im.resize((width, max(2, round(im.height * width / im.width))), Image.LANCZOS)
            if palette_src is None:  # one adaptive palette from the first frame keeps colours steady across frames
                palette_src = im.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
            images.append(im.quantize(palette=palette_src, dither=Image.Dither.NONE))
    out.parent.mkdir(parents=True, exist_ok=True)
    # GIF delays are whole centiseconds: alternate them (7, 7, 6, ...) so the clip keeps true speed at 15 fps.
    ticks = [round(100 * (i + 1) / fps) - round(100 * i / fps) for i in range(len(images))]
    images[0].save(out, save_all=True, append_images=images[1:], duration=[10 * t for t in ticks], loop=0,
                   optimize=True, disposal=1)  # fmt: skip


def ffmpeg_exe() -> str:
    """The ffmpeg binary that the imageio-ffmpeg wheel ships (a dependency: mp4 needs no system ffmpeg)."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise PlaybackError("an mp4 needs the Python package 'imageio-ffmpeg' (it ships ffmpeg), which is not "
                            "installed: pip install imageio-ffmpeg; or record a .gif") from None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as e:  # a wheel without a binary for this platform, and no ffmpeg on PATH
        raise PlaybackError(f"no ffmpeg for an mp4 ({e}); record a .gif") from None


def assemble_mp4(frame_dir: Path, out: Path, fps: float = PLAY_FPS / RECORD_EVERY, width: int = GIF_WIDTH) -> None:
    ffmpeg = ffmpeg_exe()
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [ffmpeg, "-y", "-loglevel", "error", "-framerate", f"{fps:g}", "-i", str(frame_dir / "frame_%05d.png"),
           "-vf", f"scale={width}:-2", "-pix_fmt", "yuv420p", "-c:v", "libx264", str(out)]  # fmt: skip
    result = run_to_end(cmd, timeout=FFMPEG_TIMEOUT_S)  # like every child: it ends when we do
    if result.returncode != 0:
        if "No space left on device" in (result.stderr or ""):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out))  # said as the disk it is
        why = f"did not finish within {FFMPEG_TIMEOUT_S:g} s" if result.returncode is None else "failed"
        raise PlaybackError(f"ffmpeg {why}: {one_line(Exception(result.stderr or 'nothing printed'))}")


def record(policy_path, out, game: GodotGame, agents: int = 4, seed: int = 0, seconds: float = 10.0, say=print,
           timeout: Optional[float] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
           extra_args=()) -> dict:  # fmt: skip
    """Record ``seconds`` of game time of the policy in the windowed game (under Xvfb without $DISPLAY) into a GIF
    (Pillow) or an MP4 (ffmpeg). Returns {"out", "frames", "run": the game's run report}. ``extra_args``: more of the
    game's flags (e.g. --env_param=NAME=VALUE).

    Before the game starts, ``out`` and the temporary frames' folder are checked (OutputError: a path under a file,
    a read-only place, no room for a rough size); the clip is written beside ``out`` and renamed, so a failure
    (OutputError for a full disk) leaves no partial file. The frames' folder is removed at the end, and the
    next recording removes those of a recording that was killed."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise PlaybackError(f"--record {out}: give a .gif or .mp4 file name")
    if suffix == ".mp4":
        ffmpeg_exe()  # its error before the game runs
    frames_total = max(RECORD_EVERY, int(round(PLAY_FPS * seconds)))
    n_frames = frames_total // RECORD_EVERY
    check_output(out, n_frames * ROUGH_FRAME_BYTES[suffix])
    with _xvfb() as xvfb, scratch_dir(RECORD_PREFIX) as tmp:
        try:
            check_output(tmp / "frame_00000.png", n_frames * ROUGH_FRAME_BYTES[".png"])
        except OutputError as e:
            raise OutputError(f"{e} (the recording's frames go to the temp dir: set TMPDIR to a folder with room)")
        instance = GameInstance(game, agents=agents, seed=seed, headless=False, display=open_display(xvfb, say),
                                extra_args=tuple(extra_args))  # fmt: skip
        cmd = instance.command(f"--policy={engine_policy_arg(policy_path)}", f"--record_dir={tmp}",
                               f"--record_every={RECORD_EVERY}", f"--quit_after_frames={frames_total}", "--no_vsync")
        say(f"recording {seconds:g} s of game time ({frames_total // RECORD_EVERY} frames at "
            f"{PLAY_FPS // RECORD_EVERY} fps) -> {out}")  # fmt: skip
        # the game's load (up to --connect-timeout), then about 2 s of wall time per second of game time at most
        result = _run_game(cmd, timeout or connect_timeout + 30 + 2 * seconds, env=instance.environ())
        if result.returncode != 0:
            raise _game_error(result, "the recording run")
        frames = sorted(tmp.glob("frame_*.png"))
        try:
            with atomic_output(out) as part:  # a temporary name beside out (same suffix), renamed when whole
                if suffix == ".gif":
                    assemble_gif(frames, part)
                else:
                    assemble_mp4(tmp, part)
        except OSError as e:
            raise write_error(out, e) from None
    return {"out": out, "frames": len(frames), "run": _json_line(result.stdout, "run")}


# ---------------------------------------------------------------------------------------------- watching
def _watch_in_engine(policy: Path, game: GodotGame, agents: int, seed: int, seconds: Optional[float], say=print,
                     opponent: Optional[str] = None, extra_args=()) -> int:  # fmt: skip
    """The windowed game with the policy inside, real time (vsync); ends on Ctrl-C, window closed or --seconds.

    --seconds S asks the game to quit after S seconds of wall time (--quit_after_seconds); should it not, it is
    ended a few seconds later. The game's output goes to a log file (capped: a game printing every frame cannot
    fill the disk); its rl_sync lines (errors) are shown.
    """
    log_path = Path(tempfile.gettempdir()) / f"godot-ppo-play-{os.getpid()}.log"
    log_path.unlink(missing_ok=True)
    with _xvfb() as xvfb, contextlib.closing(CappedLog(log_path)) as log:
        # Real time (no --fixed-fps): the window shows the game at the speed a person plays it.
        instance = GameInstance(game, agents=agents, seed=seed, headless=False, display=open_display(xvfb, say),
                                fixed_fps=None, extra_args=tuple(extra_args))  # fmt: skip
        mode_args = [f"--policy={engine_policy_arg(policy)}"]
        if opponent is not None:  # matches: the policy on one team, the opponent (human: the keyboard) on the other
            mode_args.append(f"--opponent={opponent}")
        if seconds is not None:
            mode_args.append(f"--quit_after_seconds={seconds:g}")
        cmd = instance.command(*mode_args)
        against = f" against {opponent}" if opponent is not None else ""
        keys = " (you: the keys of your side, pong: W/S left, arrows right)" if opponent == HUMAN_OPPONENT else ""
        say(f"playing {policy}{against} in {game.env} with {agents} agents{keys}"
            + (f" for {seconds:g} s" if seconds else "; Ctrl-C or close the window to stop"))  # fmt: skip
        proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=instance.environ())  # fmt: skip
        deadline = None if seconds is None else time.monotonic() + 1.5 * seconds + 5.0
        ended_by_us = False
        try:
            out_buf, err_buf = b"", b""
            streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
            while streams:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    ended_by_us = True  # the game did not end itself after --seconds
                    end_process_tree([proc.pid])
                    break
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
                            if line.startswith(b"rl_sync") or b"SCRIPT ERROR" in line:
                                print(line.decode(errors="replace"), file=sys.stderr, flush=True)
                    else:
                        out_buf += chunk
                        while b"\n" in out_buf:
                            line, out_buf = out_buf.split(b"\n", 1)
                            if line.startswith(b'{"run"'):
                                run = json.loads(line)["run"]
                                say(f"played {run['seconds']:.1f} s: {run['frames_drawn']} frames drawn, {run['fps']:.1f} fps")
            code = proc.wait(timeout=10)
        except KeyboardInterrupt:
            say("\ninterrupted: closing the game")
            code, ended_by_us = 0, True
        finally:
            if proc.poll() is None:
                end_process_tree([proc.pid])
                proc.wait()
    if code != 0 and not ended_by_us:
        say(f"godot-ppo play: error: the game exited with code {code}; its output is in {log_path}")
        return 1
    log_path.unlink(missing_ok=True)
    return 0


# ---------------------------------------------------------------------------------------------- watching training
WATCH_FPS = 30  # the watched window's frame cap: enough to follow the agents, little CPU taken from training
WATCH_NICE = 5  # its CPU priority (nice, of the process and of its session): training comes first
WATCH_AGENTS = 4
WATCH_LOG_NAME = "watch.log"
XVFB_WATCH_RESOLUTION = "640x360"
RELOAD_LINE = b"rl_sync: policy reloaded (global step "


class PolicyWatcher:
    """One windowed game playing a policy file and reloading it whenever the file changes (`start_policy_watcher`).

    Not part of any training batch: no trainer talks to it. Its output goes to ``log_path``; `reloads()` reads the
    reloads it reported there. `close()` ends it and its Xvfb (should we die first, both die with us: spawn)."""

    def __init__(self, proc: subprocess.Popen, xvfb: Xvfb, log: CappedLog, say=print):
        self.proc, self.xvfb, self.log, self.say = proc, xvfb, log, say
        self.log_path = log.path
        self._closing = False
        threading.Thread(target=self._report_end, name="godot-ppo watch", daemon=True).start()

    def _report_end(self) -> None:
        """Say once if the window ends by itself (closed by the user, or crashed): training goes on without it."""
        code = self.proc.wait()
        if self._closing:
            return
        if code == 0:
            self.say("godot-ppo: the --watch window was closed; training goes on")
        else:
            self.say(f"godot-ppo: warning: the --watch window ended ({describe_exit(code)}); training goes on "
                     f"(its output: {self.log_path})")  # fmt: skip

    def reloads(self) -> list:
        """[(global step, fps), ...] of each reload the game reported so far (global step None when unknown)."""
        found = []
        try:
            text = self.log_path.read_bytes()
        except OSError:
            return found
        for line in text.splitlines():
            if line.startswith(RELOAD_LINE):
                step, _, rest = line[len(RELOAD_LINE):].partition(b",")
                fps = rest.split(b"fps")[0].strip() if b"fps" in rest else b""
                found.append((int(step) if step.isdigit() else None, float(fps) if fps else None))
        return found

    def close(self) -> None:
        """End the game and its Xvfb; never raises."""
        self._closing = True
        try:
            if self.proc.poll() is None:
                end_process_tree([self.proc.pid])
            self.proc.wait(timeout=5)
        except Exception:
            pass
        self.xvfb.stop()
        self.log.close()


def _lower_group_priority(pid: int, niceness: int) -> None:
    """Lower the CPU priority of ``pid``'s session. With Linux's autogroups (sched_autogroup_enabled, the default on
    desktop kernels) the scheduler first shares the CPU equally between sessions, and a process's nice value only
    counts within its session; spawn gives every child a session of its own, so `nice` alone would change nothing
    and the window would take as much CPU as a training instance. Best effort: without autogroups, `nice` works."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(int(niceness)))
    except OSError:
        pass


def start_policy_watcher(policy_path, game: GodotGame, *, log_dir, agents: int = WATCH_AGENTS, seed: int = 0,
                         action_repeat: int = 1, fps: int = WATCH_FPS, niceness: int = WATCH_NICE,
                         say=print) -> Optional[PolicyWatcher]:  # fmt: skip
    """Open one window (Xvfb without $DISPLAY) in which ``agents`` agents play ``policy_path`` inside the engine, at
    real time with at most ``fps`` frames per second and at CPU priority ``niceness``, reloading the file whenever it
    changes (--policy_reload). For `godot-ppo train --watch`: the policy file must exist already. Watching is
    optional, so a window that cannot start is one warning line and None, never an error."""
    policy_path = Path(policy_path).resolve()
    log_dir = Path(log_dir)
    xvfb = Xvfb(log_dir / "xvfb_watch.log")
    log = None
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        display = open_display(xvfb, say, hint="but the policy it plays is reloaded all the same")
        # Real time. Under our own Xvfb nobody sees the window, and its software renderer pays per pixel: a small one.
        small = ("--resolution", XVFB_WATCH_RESOLUTION) if xvfb.proc is not None else ()
        instance = GameInstance(game, agents=agents, seed=seed, action_repeat=action_repeat, headless=False,
                                display=display, fixed_fps=None, extra_args=small)  # fmt: skip
        cmd = instance.command(f"--policy={policy_path}", "--policy_reload", f"--max_fps={int(fps)}")
        nice = shutil.which("nice")
        if niceness and nice:
            cmd = [nice, "-n", str(int(niceness))] + cmd  # nice execs the game: same pid, dies with us all the same
        log = CappedLog(log_dir / WATCH_LOG_NAME)
        log.write(f"# godot-ppo: watching {policy_path}: {' '.join(cmd)}\n".encode())
        out_r, out_w = os.pipe()
        try:
            proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=instance.environ())
        except BaseException:
            os.close(out_r)
            raise
        finally:
            os.close(out_w)
        log.follow(out_r)
        for pid in (proc.pid, xvfb.pid):
            if niceness and pid is not None:
                _lower_group_priority(pid, niceness)
    except (InstanceStartError, GameError, OSError) as e:
        xvfb.stop()
        if log is not None:
            log.close()
        say(f"godot-ppo: warning: --watch: the window did not start ({one_line(e)}); training goes on without it")
        return None
    except BaseException:
        xvfb.stop()
        if log is not None:
            log.close()
        raise
    say(f"watching: a window plays {policy_path} ({agents} agents, real time, at most {fps} fps), reloaded at every "
        f"checkpoint; its output: {log.path}")  # fmt: skip
    return PolicyWatcher(proc, xvfb, log, say)


def _watch_python(src, env_id: Optional[str], env_path, agents: int, seed: int, seconds: Optional[float],
                  say=print, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> int:  # fmt: skip
    """The windowed game driven step by step from Python by the PyTorch checkpoint, paced to 60 steps/s."""
    import torch

    from python_trainer.variants.trained_agent import load_agent  # torch: only when a checkpoint plays
    from python_trainer.envs.vec_env import make_vec_env

    torch.set_num_threads(1)  # a 64-64 MLP: more threads only add contention with the game

    if Path(src).suffix == ".json":
        raise PlaybackError("--python runs the PyTorch checkpoint: give a run folder or a .pt file, not a policy file")
    checkpoint = resolve_checkpoint(src)
    loaded = load_agent(checkpoint)
    game = godot_game(env_id or loaded.env_id, env_path or loaded.env_path, timeout=connect_timeout)
    with _xvfb() as xvfb:
        display = open_display(xvfb, say)
        envs = None
        try:
            envs = make_vec_env(game, num_instances=1, agents_per_instance=agents, headless=False, seed=seed,
                                max_restarts=0, display=display, connect_timeout=connect_timeout)  # fmt: skip
            say(f"playing {checkpoint} from Python in {game.env} with {agents} agents (60 steps/s)"
                + (f" for {seconds:g} s" if seconds else "; Ctrl-C or close the window to stop"))  # fmt: skip
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
                next_t += 1.0 / PLAY_FPS
                delay = next_t - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.25:  # fell behind (slow machine): do not race to catch up
                    next_t = time.monotonic()
        except KeyboardInterrupt:
            say("\ninterrupted: closing the game")
        except (InstanceCrashedError, GodotConnectionError) as e:
            inst = envs.launcher.instances[0] if envs is not None else None
            code = inst.proc.poll() if inst is not None else None
            if code == 0:
                say("the window was closed")
            else:
                say(f"godot-ppo play: error: {e}")
                return 1
        finally:
            if envs is not None:
                envs.close()
    return 0


def play_main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="godot-ppo play",
        description="Watch a trained policy play in the game window. By default the policy runs inside the engine "
        "(GDScript, no Python in the loop), in real time.",
    )
    parser.add_argument("src", metavar="RUN_DIR_OR_CHECKPOINT_OR_POLICY",
                        help="a run folder, a model.pt/checkpoint.pt (exported first if needed) or a policy .json "
                             "(several separated by commas: each agent plays the file of its policy_name)")  # fmt: skip
    parser.add_argument("--env-path", default=None, metavar="PATH",
                        help="the game's export, headless or windowed (default: the one the policy was trained with)")
    parser.add_argument("--env-id", "--env", dest="env_id", default=None, metavar="NAME",
                        help="the game in that export (default: the one the policy was trained on)")
    parser.add_argument("--agents", type=int, default=None,
                        help="arenas shown (default 4; 1 with --opponent human: one match, e.g. one pong court)")
    parser.add_argument("--seed", type=int, default=0, help="game seed")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default: until closed)")
    parser.add_argument("--python", action="store_true", help="drive the window from Python with the PyTorch checkpoint")
    parser.add_argument("--record", metavar="OUT.gif|OUT.mp4", default=None,
                        help="record the in-engine policy (game time, 15 fps) to a GIF (or MP4 with ffmpeg) instead of watching")  # fmt: skip
    parser.add_argument("--record-seconds", type=float, default=None, help="length of the recording (default: --seconds, else 10)")
    parser.add_argument("--opponent", default=None, metavar="human|random|scripted|FILE",
                        help="a two-sided game (agents in teams 0 and 1, e.g. pong): the policy plays one team and "
                             "this the other, the sides swapping after each match; human: you, with the keyboard "
                             "(pong: W/S on the left, the arrows on the right); scripted: the game's scripted "
                             "opponent; FILE: another policy file or run folder")  # fmt: skip
    parser.add_argument("--env-param", action="append", default=[], metavar="NAME=NUMBER",
                        help="one of the game's environment parameters (repeatable; docs/env_params.md)")
    add_connect_timeout(parser)
    args = parser.parse_args(argv)
    if args.opponent is not None and (args.python or args.record):
        parser.error("--opponent plays in the engine's window: drop --python and --record")
    if args.agents is None:
        args.agents = 1 if args.opponent == HUMAN_OPPONENT else 4
    if args.agents < 1 or (args.seconds is not None and args.seconds <= 0):
        parser.error("--agents must be >= 1 and --seconds > 0")
    say = lambda msg: print(msg, flush=True)  # noqa: E731
    # SIGTERM and SIGHUP (a closed terminal or SSH session) end `play` like Ctrl-C: the game and Xvfb are ended on
    # the way out (cli.py's policy; `godot-ppo` installed it already, this covers a direct call).
    with signal_policy():
        return _play(args, say)


def _env_param_flags(game: GodotGame, flags) -> list:
    """--env-param NAME=NUMBER flags checked against what the game declares, as the binary's --env_param flags."""
    values, where = {}, {}
    for text in flags:
        name, value = parse_flag(text)
        if value.kind != CONSTANT:
            raise PlaybackError(f"--env-param {text}: the game takes a number here (samplers are for training)")
        values[name], where[name] = [value], f"--env-param {text}"
    check_params(game, values, where)
    return [f"--env_param={name}={given[0].args[0]!r}" for name, given in values.items()]


def _play(args, say) -> int:
    try:
        if args.python:
            if args.record:
                raise PlaybackError("--record records the in-engine policy; drop --python")
            if args.env_param:
                raise PlaybackError("--env-param plays the policy inside the engine; drop --python")
            return _watch_python(args.src, args.env_id, args.env_path, args.agents, args.seed, args.seconds, say,
                                 args.connect_timeout)  # fmt: skip
        policy = ensure_policy(args.src)
        game = policy_game(policy, args.env_id, args.env_path, timeout=args.connect_timeout)
        extra = _env_param_flags(game, args.env_param)
        if args.record:
            seconds = args.record_seconds or args.seconds or 10.0
            result = record(policy, args.record, game, agents=args.agents, seed=args.seed, seconds=seconds, say=say,
                            connect_timeout=args.connect_timeout, extra_args=extra)  # fmt: skip
            size = result["out"].stat().st_size
            say(f"wrote {result['out']}: {result['frames']} frames, {size / 1024:.0f} KiB")
            return 0
        opponent = None
        if args.opponent is not None:
            opponent = (args.opponent if args.opponent in MATCH_KEYWORDS + (HUMAN_OPPONENT,)
                        else match_policy_arg(ensure_policy(args.opponent), "opponent"))  # fmt: skip
        return _watch_in_engine(policy, game, args.agents, args.seed, args.seconds, say, opponent, extra)
    except (PlaybackError, InstanceStartError, GameError, ValueError, OutputError) as e:
        print(f"godot-ppo play: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an output that failed past its checks (e.g. the disk filled up meanwhile)
        print(f"godot-ppo play: error: {write_error(getattr(e, 'filename', None) or args.record or '?', e)}",
              file=sys.stderr)  # fmt: skip
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 0
