"""A policy run inside the headless game binary, no Python in the loop: in-engine evaluation, matches of a two-sided
game, the GDScript forward pass, and the --policy values the game is given.

    report = evaluate_in_engine("runs/ball_chase__ppo__1__1700000000/policy.json", episodes=32)  # the run's --env-param
    report = play_matches("runs/pong__ppo__1__1700000000/policy.json", "scripted", episodes=100)
    outputs, actions = policy_forward("exports/policies/ball_chase.json", observations)

The policy file's format is described in policy_file.py (and docs/watching.md, "The policy file"); the game's flags
in docs/binary.md.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from python_trainer.base.contract import EVAL_REPORT, arg, flag
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S
from python_trainer.base.inputs import read_text
from python_trainer.base.paths import ARGS_JSON
from python_trainer.base.processes import run_to_end
from python_trainer.engine.policy_file import PolicyFileError, read_policy
from python_trainer.envs.env_params import CONSTANT, EnvParamError, binary_flags, parse_flag
from python_trainer.envs.game import NO_RENDER_LOOP, GameInstance, GodotGame, game_environ, godot_game
from python_trainer.envs.logs import first_script_error, shown_lines

# A problem the user can fix, raised for the command line to print. One class with the policy file's errors
# (policy_file.PolicyFileError), so `except PlaybackError` also catches a bad or unplayable policy file.
PlaybackError = PolicyFileError

# How long one headless run of the game (an evaluation, matches) may take before it is ended: its load, then the
# episodes at the CPU's speed. Not the wire protocol's step timeout (protocol.DEFAULT_TIMEOUT_S).
ENGINE_RUN_TIMEOUT_S = 120.0
RANDOM_POLICY = "random"  # --policy=random: the game plays random actions (policy_mode.gd)
MATCH_KEYWORDS = ("random", "scripted")  # what --policy and --opponent take besides files (agent_driver.gd)
HUMAN_OPPONENT = "human"  # --opponent=human: the keyboard, in a window only
# The binary's flags of the runs the engine plays by itself, which name the run in an error (the first one given).
RUN_MODES = tuple(flag(name) for name in ("eval_episodes", "benchmark_steps", "policy_forward", "policy"))
# Given with a run that reports numbers, it tells the game that its output is read here for script errors, so it does
# not run itself again as a child to read them (addons/rl_sync/error_watch.gd's WATCHED_FLAG).
WATCHED_FLAG = flag("rl_sync_watched")


# ---------------------------------------------------------------------------------------------- the game's flags
def policy_files(src) -> list[Path]:
    """The files of a --policy value: one path, or several separated by commas (each agent plays the network of its
    policy_name, docs/watching.md "Several policies in one game")."""
    return [Path(part) for part in str(src).split(",") if part.strip()]


def engine_policy_arg(src) -> str:
    """--policy's value for the game: each file's absolute path, separated by commas."""
    return ",".join(str(path.resolve()) for path in policy_files(src))


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


def trained_env_params(src) -> dict:
    """The --env-param constants (name -> number) of the run that ``src`` came from: a run folder, or a file in one
    (its policy.json, model.pt, a file of its policies/), read from its args.json; {} without one (a policy file
    elsewhere). A parameter the run drew from a sampler is left out: the game's default stands for it."""
    src = Path(str(src).split(",")[0])
    for folder in ([src] if src.is_dir() else []) + [src.parent, src.parent.parent]:
        if (folder / ARGS_JSON).is_file():
            try:
                flags = json.loads(read_text(folder / ARGS_JSON, str(folder / ARGS_JSON))).get("env_param") or ()
                given = [parse_flag(text) for text in flags]
            except (ValueError, AttributeError, TypeError, EnvParamError):  # not a run's args.json: nothing to reuse
                return {}
            return {name: value.args[0] for name, value in given if value.kind == CONSTANT}
    return {}


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


# ---------------------------------------------------------------------------------------------- the game's output
def run_game(cmd: Sequence[str], timeout: float, env=None) -> subprocess.CompletedProcess:
    """Run a game process to the end (its own session, ended with its children on timeout / Ctrl-C). A script
    error is a PlaybackError with its line, whatever the game's exit code: Godot goes on after one (the function
    stops there), so a run of broken episodes would otherwise report their numbers as the policy's."""
    result = run_to_end([*cmd, WATCHED_FLAG], timeout, env=game_environ(env))
    if result.returncode is None:
        raise PlaybackError(f"`{' '.join(cmd)}` did not finish within {timeout:g} s; stderr:\n{result.stderr[-2000:]}")
    error = first_script_error(result.stderr + "\n" + result.stdout)
    if error is not None:
        mode = next((m for m in RUN_MODES if any(arg.startswith(m + "=") for arg in cmd)), "the game's run")
        raise PlaybackError(f"{mode}: the game raised a script error, so its results are not the policy's: {error} "
                            "(fix the game's script; the game's own output shows every error)")
    return result


def sample_flags(sample: bool, noop_max: int) -> list:
    """The game's flags of a sampled evaluation and of randomised starts (docs/binary.md)."""
    return ([flag("policy_sample")] if sample else []) + ([arg("policy_noop_max", int(noop_max))] if noop_max else [])


def json_line(stdout: str, key: str):
    """The value of the game's one-line JSON report ``{"key": ...}`` in its output, or None."""
    for line in stdout.splitlines():
        if line.startswith("{") and f'"{key}"' in line[:20]:
            return json.loads(line)[key]
    return None


def addon_error(line: str) -> Optional[str]:
    """The message of one of the addon's error lines (``rl_sync``, then the level ``error``, then the message, each
    after a colon), else None."""
    source, _, rest = line.partition(": ")
    level, _, message = rest.partition(": ")
    return message if source == "rl_sync" and level == "error" else None


def game_error(result: subprocess.CompletedProcess, what: str) -> PlaybackError:
    """The error of a game run that failed: its last error lines, else the end of its output."""
    stderr = "\n".join(shown_lines(result.stderr))
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    detail = "\n".join(errors[-5:]) or stderr[-2000:] or result.stdout[-2000:]
    return PlaybackError(f"{what} failed (exit code {result.returncode}):\n{detail}")


# ---------------------------------------------------------------------------------------------- the runs
def evaluate_in_engine(policy_path, env_id: Optional[str] = None, env_path=None, episodes: int = 32, seed: int = 0,
                       agents: Optional[int] = 16, timeout: float = ENGINE_RUN_TIMEOUT_S,
                       max_episode_steps: Optional[int] = None, env_params: Optional[dict] = None,
                       display: Optional[str] = None, sample: bool = False, noop_max: int = 0) -> dict:
    """Play ``episodes`` episodes with the policy inside the headless game (no Python in the loop); each agent
    plays its share of them. ``display`` (":N"): the windowed game on that X display instead, its window not drawn
    (--disable-render-loop; cameras still render), for a game whose agents see through cameras. ``policy_path`` "random": the game's random actions (the baseline; give ``env_id``).
    ``env_id`` / ``env_path``: default, the policy's own game (`policy_game`); ``agents``
    None: the game's own number; ``env_params``: name -> number, the game's environment parameters (--env_param;
    None: the constants of the run the policy came from, `trained_env_params`).
    ``policy_path`` may be a bundle of several policies, or several files separated by commas (each agent plays the
    network of its policy_name). ``sample``: actions drawn from the policy's distributions (--policy_sample), not its
    argmax / mean; ``noop_max`` K: each episode starts with 0 to K no-op decisions (--policy_noop_max). Returns the game's report: {"env", "policy", "seed", "episodes", "returns",
    "lengths", "mean_return", "info_means" (each numeric get_info() key's mean), "env_params"}, and with several
    policies "by_policy": {name: {"episodes", "returns", "lengths", "mean_return"}}.
    """
    if str(policy_path) == RANDOM_POLICY:  # the game's own random actions: any game's baseline
        game, policy_arg = godot_game(env_id, env_path), RANDOM_POLICY
    else:
        game, policy_arg = policy_game(policy_path, env_id, env_path), engine_policy_arg(policy_path)
        env_params = trained_env_params(policy_path) if env_params is None else env_params
    instance = GameInstance(game, agents=agents, seed=seed, max_episode_steps=max_episode_steps,
                            headless=display is None, display=display)
    params = binary_flags(env_params or {})
    params += [] if display is None else [NO_RENDER_LOOP]
    params += sample_flags(sample, noop_max)
    result = run_game(instance.command(arg("policy", policy_arg), arg("eval_episodes", int(episodes)), *params), timeout,
                      env=instance.environ())
    report = json_line(result.stdout, EVAL_REPORT)
    if result.returncode != 0 or report is None:
        raise game_error(result, f"in-engine evaluation of {policy_path}")
    return report


def play_matches(policy_path, opponent, episodes: int = 100, env_id: Optional[str] = None, env_path=None,
                 seed: int = 0, agents: Optional[int] = 16, timeout: float = ENGINE_RUN_TIMEOUT_S,
                 max_episode_steps: Optional[int] = None, sample: bool = False, noop_max: int = 0) -> dict:
    """Play ``episodes`` matches of a two-sided game (agents in teams 0 and 1) in the headless engine: the policy on
    one team, ``opponent`` on the other, each side for half of the matches (docs/binary.md, "Matches").

    ``policy_path``: a policy file (single or bundle; several separated by commas), or "random" / "scripted" (then
    give ``env_id``); ``opponent``: a policy file, "random" or "scripted". ``env_id`` / ``env_path``: default, the
    policy's own game; ``sample``, ``noop_max``: as evaluate_in_engine's. Returns the game's report, from the policy's side: {"wins", "losses", "draws", "episodes",
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
    result = run_game(instance.command(arg("policy", policy_arg), arg("opponent", opponent_arg),
                                       arg("eval_episodes", int(episodes)), *sample_flags(sample, noop_max)),
                               timeout)
    report = json_line(result.stdout, EVAL_REPORT)
    if result.returncode != 0 or report is None:
        errors = [message for message in map(addon_error, result.stderr.splitlines()) if message is not None]
        if result.returncode == 1 and errors:  # the game's one line: the problem and its fix
            raise PlaybackError(errors[-1])
        raise game_error(result, f"matches of {policy_path} against {opponent}")
    return report


def policy_forward(policy_path, observations, env_path=None, timeout: float = 60.0, dones=None, sample: bool = False):
    """The GDScript forward pass on ``observations`` (n, obs_dim): (outputs ndarray (n, n_out), actions list).
    Any game of any export runs it (the network alone is checked); default: this repository's default game.
    ``sample``: the actions drawn from the outputs' distributions (--policy_sample), not the file's rule.
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
        result = run_game(instance.command(arg("policy", Path(policy_path).resolve()), arg("policy_forward", inp),
                                           *sample_flags(sample, 0)), timeout)
    rows = json_line(result.stdout, "forward")
    if result.returncode != 0 or rows is None:
        raise game_error(result, f"--policy_forward with {policy_path}")
    outputs = np.array([r["outputs"] for r in rows], dtype=np.float64)
    return outputs, [r["action"] for r in rows]
