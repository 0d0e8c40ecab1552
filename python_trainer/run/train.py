"""`godot-ppo train`: the command around ppo.py's loop. It composes the flags, checks them, makes or resumes the run
folder, seeds, chooses the rollouts (this machine's games, or Ray workers), fills the algorithm's slots (the agent,
the bonus), runs `ppo.iterations` and does what each update leaves to it: TensorBoard and episodes.csv, progress,
checkpoints with the in-engine policy file, the --watch window; then the final evaluation and --capture-video.

    godot-ppo train --env-id CartPole-v1 --total-timesteps 500000
    godot-ppo train --env-id ball_chase --num-instances 2          # 2 Godot instances x 16 agents
    godot-ppo train --help                                          # every flag, from the Args dataclasses' docstrings

Every flag is checked before any game starts (each flag's rule is stated next to it: flags.py); one process trains
in a run folder at a time (a lock). SIGINT, SIGTERM and SIGHUP (signals.py), a crashed instance, a closed stdout or
any other error once the agent exists all write the checkpoint of the last completed update and print the --resume
command; exit status 0, 1 (an error), 2 (bad input), 128 + N (signal N).
"""

from __future__ import annotations

import errno
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import tyro

from python_trainer.variants import cloning
from python_trainer.run import curriculum
from python_trainer import ppo
from python_trainer.agent import action_heads
from python_trainer.checkpoint import CHECKPOINT_NAME, MODEL_NAME, save_checkpoint, set_rng_state, space_to_dict
from python_trainer.run.curriculum import CurriculumArgs, Schedule
from python_trainer.demos import DemoError, load_demos, read_episodes
from python_trainer.envs.env_params import check_params
from python_trainer.base.errors import UserError, one_line, say
from python_trainer.base.files import OutputError, is_disk_full, write_atomic, write_error
from python_trainer.base.flags import (explicit_fields, 
    ACTION_REPEAT, AGENTS_PER_INSTANCE, CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_S, NUM_INSTANCES, SPEEDUP, agents_for,
    at_least, check_flags, flag, positive,
)
from python_trainer.envs.game import GameBugError, GameError, GodotGame, resolve_env
from python_trainer.envs.gym_env import DEFAULT_NUM_ENVS, MissingDependencyError, UnknownEnvError, UnsupportedSpaceError
from python_trainer.envs.launcher import DEFAULT_MAX_RESTARTS
from python_trainer.envs.failures import InstanceCrashedError, InstanceStartError, WorkerLostError
from python_trainer.normalization import NormArgs, Normalizer, bool_flag_aliases
from python_trainer.optimizer import Adam
from python_trainer.tools.playback import PlaybackError, record, start_policy_watcher
from python_trainer.variants.policies import Learner, PolicySet, lockstep
from python_trainer.engine.policy_file import (
    POLICY_NAME, game_policy, policy_source, write_policies_or_warn, write_policy_or_warn,
)
from python_trainer.envs.protocol import DEFAULT_TIMEOUT_S, GodotConnectionError
from python_trainer.variants.ray_rollouts import RayArgs, RayRollouts
from python_trainer.variants.recurrent import LSTMArgs
from python_trainer.variants.rnd import RND, RNDArgs
from python_trainer.rollout import LocalRollouts, NonFiniteEnvData, RolloutArgs, RolloutBuffer, eval_seed
from python_trainer.variants.self_play import SelfPlayArgs, self_play_rollouts
from python_trainer.run.run_folder import (
    RunLock, RunLog, TrainError, discard_if_unused, new_run_dir, prepare_run, train_command,
    write_args_json,
)
from python_trainer.base.signals import hold_signals, signal_policy, signals_deferred, signum_of
from python_trainer.variants.trained_agent import LoadedAgent, make_agent
from python_trainer.envs.vec_env import agent_policy_names, make_vec_env

VIDEO_DIR = "videos"  # --capture-video's folder in the run folder, as CleanRL's videos/<run_name>
FINAL_VIDEO_SECONDS = 10.0
DEFAULT_ENV_ID = "CartPole-v1"  # CleanRL's default, when neither --env-id nor --env-path is given
RAY_ONLY = ("ray_workers", "ray_cpus_per_worker", "ray_max_restarts")
SELF_PLAY_ONLY = tuple(f for f in SelfPlayArgs.__dataclass_fields__ if f != "self_play")


# ======================================================================================================================
# The flags: the run's own, the environment's, then the algorithm's and its variants' (each from its module)
# ======================================================================================================================
@dataclass
class ExperimentArgs:
    exp_name: str = "ppo"
    """the name of this experiment (part of the run folder name)"""
    seed: int = 1
    """seed of the experiment (python, numpy, torch, envs)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    torch_threads: int = flag(1, at_least(1, "an integer >= 1", "1"))
    """torch CPU threads; 1 is fastest for these small networks"""
    run_dir_root: str = "runs"
    """the run folder is RUN_DIR_ROOT/<env>__<exp>__<seed>__<time>/"""
    resume: Optional[str] = None
    """continue the run in this folder from its last checkpoint (flags not given are taken from its args.json)"""
    checkpoint_every: int = flag(10, at_least(0, "an integer >= 0 (0: only at the end and on a stop)", "10"))
    """write RUN_DIR/checkpoint.pt every this many updates (0: only at the end, and when stopped by SIGINT/SIGTERM/SIGHUP
    or an error)"""
    eval_episodes: int = flag(10, at_least(0, "an integer >= 0 (0: skip)", "10"))
    """after training, evaluate the deterministic policy (argmax / mean action) over this many episodes (0: skip)"""
    capture_video: bool = False
    """record videos into RUN_DIR/videos/ (mp4): gymnasium ids, the first env's episodes during training with
    gymnasium's RecordVideo (CleanRL's schedule: episodes 0, 1, 8, 27, ..., 1000, then every 1000th); Godot games, the
    final policy playing in the windowed export after training (final.mp4, 10 s of game time)"""


@dataclass
class EnvArgs:
    env_id: Optional[str] = None
    """the id of the environment: a gymnasium id, or a game in --env-path's binary (default: CartPole-v1 without
    --env-path; the binary's default game with it; ball_chase is a game of this repository's export)"""
    env_path: Optional[str] = None
    """Godot games: an exported binary (headless or windowed) of any Godot 3 project that uses the rl_sync addon
    (default: this repository's exports/headless/rl_games.x86_64)"""
    num_envs: Optional[int] = flag(None, at_least(1, "an integer >= 1", "4"))
    """the number of parallel environments (default: 4 for gymnasium ids; for Godot games the agents the instances
    report, num-instances x the game's agents per instance)"""
    num_instances: int = flag(1, NUM_INSTANCES)
    """Godot games: how many game processes to launch"""
    agents_per_instance: Optional[int] = flag(None, AGENTS_PER_INSTANCE)
    """Godot games: agents each process is asked to simulate (--agents; default: the game's own choice, which a
    game with a fixed number of agents keeps whatever is asked)"""
    speedup: Optional[float] = flag(None, SPEEDUP)
    """Godot games: engine time scale (default: the Godot env's)"""
    action_repeat: Optional[int] = flag(None, ACTION_REPEAT)
    """Godot games: physics frames per decision step (default: the Godot env's)"""
    window: bool = False
    """Godot games: show the game windows instead of running headless"""
    watch: bool = False
    """Godot games: open one more window, outside the training batch, in which the policy plays inside the engine at
    real time from RUN_DIR/policy.json, reloaded at every checkpoint (Xvfb without $DISPLAY)"""
    watch_fps: int = flag(30, at_least(1, "an integer >= 1 (frames per second)", "30"))
    """with --watch: the window's frame cap (it also runs at a lower CPU priority, so training keeps the CPU)"""
    max_restarts: int = flag(DEFAULT_MAX_RESTARTS, at_least(0, "an integer >= 0", "3"))
    """Godot games: how many times each instance may be restarted after a crash or a hang before training stops
    (with a checkpoint)"""
    step_timeout: float = flag(DEFAULT_TIMEOUT_S, positive("60", "a number of seconds > 0"))
    """Godot games: seconds an instance may take to answer one step before it counts as hung (and is restarted)"""
    allow_script_errors: bool = False
    """Godot games: train on even when a game keeps raising script errors (Godot's SCRIPT ERROR lines, after its
    handshake); the first one is shown either way. Without it a run stops, with a checkpoint, once an instance has
    raised 10"""
    connect_timeout: float = flag(DEFAULT_CONNECT_TIMEOUT_S, CONNECT_TIMEOUT)
    """Godot games: seconds a game may take to load, list its games and connect; raise it for a game that loads
    slowly"""


@dataclass
class Args(cloning.CloningArgs, SelfPlayArgs, RayArgs, RolloutArgs, RNDArgs, LSTMArgs, NormArgs, ppo.Args,
           CurriculumArgs, EnvArgs, ExperimentArgs):
    """Every flag of `godot-ppo train` (the fields of the bases, in --help's order: ExperimentArgs first)."""


# ======================================================================================================================
# Checks that need more than one flag, the game, or the checkpoint
# ======================================================================================================================
def check_sizes(args, num_envs):
    """(batch_size, minibatch_size), or a TrainError naming the sizes that do not fit together."""
    batch_size = num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        divisors = sorted(
            (d for d in range(1, batch_size + 1) if batch_size % d == 0), key=lambda d: abs(d - args.num_minibatches)
        )
        raise TrainError(
            f"the batch (--num-envs {num_envs} x --num-steps {args.num_steps} = {batch_size}) is not divisible by "
            f"--num-minibatches {args.num_minibatches}: use a --num-minibatches that divides {batch_size} "
            f"(the nearest: {', '.join(map(str, sorted(divisors[:3])))}) or change --num-steps"
        )
    if args.lstm and num_envs % args.num_minibatches:
        raise TrainError(
            f"--lstm minibatches hold whole envs: {num_envs} envs do not split into --num-minibatches "
            f"{args.num_minibatches}; use a --num-minibatches that divides {num_envs}"
        )
    if args.total_timesteps < batch_size and not (args.total_timesteps == 0 and args.demos):
        raise TrainError(
            f"--total-timesteps {args.total_timesteps} is less than one batch ({num_envs} envs x {args.num_steps} "
            f"steps = {batch_size}): raise --total-timesteps or lower --num-steps"
        )
    return batch_size, batch_size // args.num_minibatches


def update_budget(total_timesteps: int, batch_size: int, global_step: int) -> tuple[int, int]:
    """(the update to continue after, the last update) for a run at ``global_step`` with this batch size.

    The updates left are the batches that fit in the steps left, so a run resumed with another number of envs
    (changed --num-instances / --agents-per-instance / --num-envs, a Ray run resumed here or the reverse) still ends
    within one batch of --total-timesteps; the steps done, counted in batches of this size, number the updates, so
    the learning rate's annealing goes on from the share of the budget already spent. With the batch size of the
    checkpoint's run this is its own update index and ``total_timesteps // batch_size``."""
    start = global_step // batch_size
    return start, start + max(0, total_timesteps - global_step) // batch_size


def _check_spaces(obs_space, act_space, ckpt, args, run_dir):
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise TrainError(f"unsupported observation space {obs_space}: the MLP agent needs flat Box observations")
    try:
        action_heads(act_space)
    except ValueError as e:
        raise TrainError(
            f"unsupported action space {act_space} ({e}): the agent handles Discrete, 1-D Box, MultiDiscrete and a "
            "Dict of 1-D Box and Discrete keys; wrap the env to expose one of those (e.g. MultiBinary(n) as MultiDiscrete)"
        ) from None
    if ckpt and (
        ckpt["observation_space"] != space_to_dict(obs_space) or ckpt["action_space"] != space_to_dict(act_space)
    ):
        raise TrainError(
            f"--resume {run_dir}: the checkpoint's spaces ({ckpt['observation_space']['shape']}, "
            f"{ckpt['action_space']}) differ from {args.env_id}'s now ({obs_space}, {act_space}); start a new run"
        )


def _check_resumed_model(args, ckpt):
    """--lstm / --lstm-size / --rnd must describe the model a resumed checkpoint holds."""
    if not ckpt:
        return
    saved = ckpt.get("args") or {}
    where = f"--resume {args.resume}"
    if bool(saved.get("lstm")) != args.lstm:
        had, has = ("an LSTM (--lstm)", "without --lstm") if saved.get("lstm") else ("no LSTM", "with --lstm")
        raise TrainError(f"{where}: the checkpoint's agent has {had}, and this run asks for one {has}: resume with the "
                         "run's own setting (drop the flag) or start a new run")  # fmt: skip
    if args.lstm and int(saved.get("lstm_size", args.lstm_size)) != args.lstm_size:
        raise TrainError(f"{where}: the checkpoint's LSTM has --lstm-size {saved.get('lstm_size')}, not "
                         f"{args.lstm_size}: drop --lstm-size or start a new run")  # fmt: skip
    if bool(saved.get("rnd")) != args.rnd or (args.rnd and not ckpt.get("rnd")):
        had = "was trained with --rnd" if saved.get("rnd") else "was trained without --rnd (no RND networks or statistics)"
        raise TrainError(f"{where}: the checkpoint {had}, and this run asks for {'--rnd' if args.rnd else '--no-rnd'}: "
                         "resume with the run's own setting (drop the flag) or start a new run")  # fmt: skip


def _declared_actions(env_info):
    """A Godot game's action space as its agents declare it (their key order is the demonstrations'), else None."""
    spaces = (env_info or {}).get("action_space")
    return spaces[0] if isinstance(spaces, list) and spaces else spaces


def _resolve_env(args):
    """A gymnasium id, or the `GodotGame` that --env-path / --env-id name (game.resolve_env decides which)."""
    env_id = args.env_id if args.env_id is not None or args.env_path is not None else DEFAULT_ENV_ID
    return resolve_env(env_id, args.env_path, args.connect_timeout)


def _check_args(args, explicit, ckpt):
    """Every check that needs no game: each flag's own rule, then the rules between flags."""
    check_flags(args)
    _check_resumed_model(args, ckpt)
    if args.total_timesteps == 0 and not args.demos:
        raise TrainError("--total-timesteps 0 trains nothing: give --demos FILE [FILE...] (the cloned policy alone) or "
                         "a budget >= 1, e.g. --total-timesteps 500000")
    for path in args.demos or ():  # a missing, empty or damaged file: said before any game starts
        read_episodes(path)
    bc_flags = sorted(f for f in explicit if f.startswith("bc_"))
    if bc_flags and not args.demos:
        raise TrainError(f"--{bc_flags[0].replace('_', '-')} is for behavioural cloning: add --demos FILE [FILE...] "
                         "or drop it")
    ray_flags = sorted(set(explicit) & set(RAY_ONLY))
    if args.ray_address is None and ray_flags:
        raise TrainError(f"--{ray_flags[0].replace('_', '-')} is for Ray rollout workers: add --ray-address local (this "
                         "machine) or --ray-address HOST:PORT (a cluster), or drop it")  # fmt: skip
    self_play_flags = sorted(set(explicit) & set(SELF_PLAY_ONLY))
    if not args.self_play and self_play_flags:
        raise TrainError(f"--{self_play_flags[0].replace('_', '-')} sets up self-play: add --self-play, or drop it")
    if args.self_play and args.ray_address is not None:
        raise TrainError("--self-play runs on this machine's games: Ray workers do not play against a pool yet; drop "
                         "--ray-address")  # fmt: skip
    saved = (ckpt or {}).get("args") or {}
    if ckpt and bool(saved.get("self_play")) != args.self_play:
        raise TrainError(f"--resume {args.resume}: the run was trained {'with' if saved.get('self_play') else 'without'} "
                         f"--self-play: resume with the run's own setting (drop the flag) or start a new run")  # fmt: skip


# ======================================================================================================================
# The rollouts and the run's outputs
# ======================================================================================================================
def _env_kwargs(args, game, global_step, run_dir):
    """make_vec_env's options: every env gets num_envs/seed/run_dir, Godot games the instance options."""
    env_kwargs = {"num_envs": args.num_envs, "seed": args.seed + global_step, "run_dir": str(run_dir)}
    if args.capture_video and not isinstance(game, GodotGame):
        env_kwargs["video_dir"] = str(Path(run_dir) / VIDEO_DIR)
    if isinstance(game, GodotGame):
        env_kwargs.update(
            num_instances=args.num_instances, agents_per_instance=args.agents_per_instance, headless=not args.window
        )
        if args.speedup is not None:
            env_kwargs["speedup"] = args.speedup
        if args.action_repeat is not None:
            env_kwargs["action_repeat"] = args.action_repeat
        env_kwargs.update(max_restarts=args.max_restarts, step_timeout=args.step_timeout,
                          allow_script_errors=args.allow_script_errors, connect_timeout=args.connect_timeout)  # fmt: skip
    return env_kwargs


def make_rollouts(args, game, global_step, run_dir):
    """This machine's envs (LocalRollouts), or --ray-workers Ray workers with their own games (RayRollouts)."""
    env_kwargs = _env_kwargs(args, game, global_step, run_dir)
    if args.ray_address is not None:
        return RayRollouts(game, args, run_dir, env_kwargs, say)
    rollouts = LocalRollouts(make_vec_env(game, **env_kwargs), args.pipeline)
    if not args.self_play:
        return rollouts
    try:  # the learning team against snapshots of its past policy (self_play.py)
        return self_play_rollouts(rollouts, args, run_dir)
    except BaseException:
        rollouts.close()
        raise


# ======================================================================================================================
# Several policies: one learner each (policies.py)
# ======================================================================================================================
def _policy_set(rollouts, args) -> Optional[PolicySet]:
    """A PolicySet for a game whose agents carry several policy names, None for one policy; the sizes of each
    policy's batch are checked like the run's."""
    names = list(dict.fromkeys(agent_policy_names(rollouts.env_info))) if rollouts.env_info else []
    if len(names) < 2:
        return None
    if args.ray_address is not None:
        raise TrainError(f"{args.env_id} has several policies ({', '.join(names)}): training several policies on Ray "
                         "workers is not supported yet; drop --ray-address to train them on this machine")  # fmt: skip
    policy_set = PolicySet(rollouts)
    for view in policy_set.views:
        try:
            check_sizes(args, view.num_envs)
        except TrainError as e:
            raise TrainError(f"the policy {view.name!r} has {view.num_envs} of the {rollouts.num_envs} agents: {e}") from None
    return policy_set


def _check_policies(views, policy_set, ckpt, args, run_dir) -> None:
    """Each policy's spaces are ones the agent handles, and a resumed checkpoint holds the same policies."""
    saved = (ckpt or {}).get("policies")
    where = f"--resume {run_dir}"
    if ckpt and (saved is None) != (policy_set is None):
        had = f"the policies {sorted(saved)}" if saved else "one policy"
        has = f"the policies {policy_set.names}" if policy_set else "one policy"
        raise TrainError(f"{where}: the checkpoint holds {had}, and {args.env_id} now has {has}: start a new run")
    if saved is not None and sorted(saved) != sorted(policy_set.names):
        raise TrainError(f"{where}: the checkpoint holds the policies {sorted(saved)}, and {args.env_id} now has "
                         f"{sorted(policy_set.names)}: start a new run (or give the agents their old policy names)")  # fmt: skip
    for view in views:
        entry = saved[view.name] if saved is not None else ckpt
        try:
            _check_spaces(view.single_observation_space, view.single_action_space, entry, args, run_dir)
        except TrainError as e:
            raise TrainError(f"the policy {view.name!r}: {e}" if policy_set is not None else str(e)) from None


def _saved_policy(ckpt, view, policy_set) -> Optional[dict]:
    """The checkpoint's part for ``view``'s policy: the whole checkpoint for a game with one policy."""
    if not ckpt:
        return None
    return ckpt if policy_set is None else ckpt["policies"][view.name]


def _make_learner(view, args, saved, policy_set) -> Learner:
    """The slots of ppo.iterations for one policy: its agent (MLP or --lstm), its bonus (--rnd: RND, whose predictor
    trains with it), its optimizer and normaliser (from ``saved`` when resuming) and its rollout buffer."""
    obs_dim = view.single_observation_space.shape[0]
    agent = make_agent(obs_dim, view.single_action_space, asdict(args))
    bonus = RND(obs_dim, args.rnd_ext_coef, args.rnd_coef) if args.rnd else None
    continuous = agent.n_continuous > 0  # the normalisation defaults: CleanRL's continuous-action script
    norm_obs = continuous if args.norm_obs is None else args.norm_obs
    norm_reward = continuous if args.norm_reward is None else args.norm_reward
    # torch's fused Adam kernel (optimizer.py): the same update as torch.optim.Adam(fused=True), without its costs
    params = list(agent.parameters()) + (list(bonus.predictor.parameters()) if bonus else [])
    optimizer = Adam(params, lr=args.learning_rate, eps=1e-5)
    normalizer = Normalizer(obs_dim, view.num_envs, args.gamma, norm_obs, norm_reward)
    if saved:
        agent.load_state_dict(saved["model"])
        if bonus is not None:
            bonus.load_state_dict(saved["rnd"]["model"])
            bonus.load_stats_state_dict(saved["rnd"]["stats"])
        optimizer.load_state_dict(saved["optimizer"])
        normalizer.load_state_dict(saved["normalizer"])
    name = getattr(view, "name", None)
    learner = Learner(name, view, agent, bonus, optimizer, normalizer, tag="" if policy_set is None else f"{name}/")
    learner.buf = RolloutBuffer(args.num_steps, view.num_envs, obs_dim, agent, bonus)
    return learner


def _policy_state(learner) -> dict:
    """A learner's part of a checkpoint of several policies (what _saved_policy gives back)."""
    rnd = learner.bonus
    return {"model": learner.agent.state_dict(), "optimizer": learner.optimizer.state_dict(),
            "normalizer": learner.normalizer.state_dict(),
            "observation_space": space_to_dict(learner.rollouts.single_observation_space),
            "action_space": space_to_dict(learner.rollouts.single_action_space),
            "rnd": None if rnd is None else {"model": rnd.state_dict(), "stats": rnd.stats_state_dict()}}  # fmt: skip


def _policy_table(learners, policy_set) -> dict:
    """The hyperparameters' rows of a game with several policies: each policy's agents and normalisation."""
    if policy_set is None:
        return {}
    return {f"policy {ln.name}": f"{ln.num_envs} agents, norm_obs={ln.normalizer.norm_obs}, "
                                 f"norm_reward={ln.normalizer.norm_reward}" for ln in learners}  # fmt: skip


def _perf_scalars(its) -> dict:
    """The update's perf/* tags: the rollout (collected once, by the first policy's iteration) and each policy's
    update, summed over the policies."""
    perf = {k: v for k, v in its[0].scalars.items() if k.startswith("perf/")}
    for it in its[1:]:
        perf["perf/rollout_s"] += it.scalars["perf/rollout_s"]
        perf["perf/update_s"] += it.scalars["perf/update_s"]
    return perf


def _evaluate(learners, policy_set, rollouts, args, global_step, writer) -> Optional[float]:
    """The deterministic policy (argmax / mean action) over --eval-episodes episodes, said and logged; with several
    policies, every policy plays and each one's episodes are counted apart. Returns the mean return of a game of one
    policy."""
    acts = {ln.name: LoadedAgent(ln.agent, ln.normalizer, ln.rollouts.single_observation_space,
                                 ln.rollouts.single_action_space, args.env_id, global_step).act for ln in learners}  # fmt: skip
    if policy_set is None:
        results = {None: rollouts.evaluate(acts[None], args.eval_episodes, seed=eval_seed(args.seed))}
    else:
        results = policy_set.evaluate(acts, args.eval_episodes, seed=eval_seed(args.seed))
    means = {}
    for ln in learners:
        returns = results[ln.name]
        if not returns:
            continue
        mean = means[ln.name] = float(np.mean(returns))
        writer.add_scalar(f"{ln.tag}eval/episodic_return", mean, global_step)
        who = "deterministic policy" if policy_set is None else f"policy {ln.name!r}, deterministic"
        print(f"eval: {who}, {len(returns)} episodes: mean return {mean:.2f} +- "
              f"{np.std(returns):.2f} (min {min(returns):.1f}, max {max(returns):.1f})")  # fmt: skip
    return means.get(None)  # the learning curve's line: a game of one policy only


def _record_final_video(run_dir, game, seed, connect_timeout=DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """--capture-video of a Godot game: the run's policy.json played in the windowed export, as RUN_DIR/videos/final.mp4
    (a failed recording is reported; the trained model is saved already)."""
    out = Path(run_dir) / VIDEO_DIR / "final.mp4"
    try:
        record(Path(run_dir) / POLICY_NAME, out, game, seed=seed, seconds=FINAL_VIDEO_SECONDS,
               connect_timeout=connect_timeout)  # fmt: skip
    except (PlaybackError, GameError, InstanceStartError, OutputError) as e:
        say(f"warning: --capture-video: no video ({one_line(e)})")
    except OSError as e:
        say(f"warning: --capture-video: no video ({write_error(out, e)})")


# ======================================================================================================================
# Training
# ======================================================================================================================
def train(args: Args, explicit=frozenset()) -> int:
    args, run_dir, ckpt = prepare_run(args, set(explicit))  # --resume: flags not given come from its args.json
    _check_args(args, explicit, ckpt)  # every flag that can be checked without a game: before any game starts
    if args.curriculum is not None:  # absolute in args.json: a resume from another folder finds it
        args = replace(args, curriculum=str(Path(args.curriculum).resolve()))
    params, params_where = curriculum.read(args.env_param, args.curriculum)  # a bad flag or file: before any game
    game = _resolve_env(args)  # an unknown id or a bad --env-path: the clear error, before any folder exists
    check_params(game, {n: [lesson.value for lesson in ls] for n, ls in params.items()}, params_where)
    if isinstance(game, GodotGame):
        # The game's name as the binary reports it, and its export's absolute path (a resume or `play` from another
        # folder finds it).
        args = replace(args, env_id=game.env, env_path=game.env_path if args.env_path is not None else None)
        agents_for(args.num_envs, args.num_instances, args.agents_per_instance, as_flags=True)  # before any game
        if args.watch:
            game.require_addon("--watch")
    elif args.watch:
        raise TrainError(f"--watch shows a Godot game's window; {args.env_id} is a gymnasium env: drop --watch")
    if args.num_envs is not None or not isinstance(game, GodotGame):
        check_sizes(args, args.num_envs or DEFAULT_NUM_ENVS)  # what can be checked before any game starts
    fresh = run_dir is None
    run_dir = run_dir or new_run_dir(args.run_dir_root, args.env_id, args.exp_name, args.seed)  # made exclusively
    global_step = ckpt["global_step"] if ckpt else 0

    # Seeding (and, when resuming, the RNG streams exactly where the checkpoint left them)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(max(1, args.torch_threads))
    if ckpt:
        set_rng_state(ckpt["rng"])

    # The rollouts: a Godot game says how many agents each instance simulates, and so how many envs there are
    rollouts = lock = None
    try:
        lock = RunLock(run_dir, prefix="--resume " if ckpt else "")  # one training per run folder, until we end
        rollouts = make_rollouts(args, game, global_step, run_dir)
        num_envs = rollouts.num_envs
        policy_set = _policy_set(rollouts, args)  # a game with several policies: each one's batch must split too
        if ckpt and args.self_play:  # the pool, the ratings and the sides where the checkpoint left them
            rollouts.load_state_dict(ckpt.get("rollouts"))
        batch_size, minibatch_size = check_sizes(args, num_envs)
        schedule = Schedule(params, num_envs, args.total_timesteps, say) if params else None
        if schedule is not None:  # the lesson in force (a resumed run's own), from each agent's next episode
            if ckpt and ckpt.get("curriculum"):
                schedule.load_state_dict(ckpt["curriculum"], f"--resume {run_dir}")
            rollouts.set_env_params(schedule.message())
    except BaseException as e:
        if rollouts is not None:
            rollouts.close()
        if fresh:  # a game's own bug or a setting it cannot take is named in full by its one line: its logs go too
            discard_if_unused(run_dir, logs_too=isinstance(e, (GameBugError, UserError)))
        if lock is not None:
            lock.release()
        raise
    log = watcher = None
    ready = False  # set once the agent exists: from then on a stop or a crash saves a checkpoint
    try:
        start_update, num_iterations = update_budget(args.total_timesteps, batch_size, global_step)
        if args.agents_per_instance is not None and rollouts.agents_per_instance not in (None, args.agents_per_instance):
            say(f"note: {args.env_id} simulates {rollouts.agents_per_instance} agents per instance whatever "
                f"--agents-per-instance says; training {num_envs} envs")  # fmt: skip
        if rollouts.startup_line() is not None:
            print(rollouts.startup_line(), flush=True)
        game_settings = rollouts.game_settings  # Godot games: what the instances were given
        command = train_command(asdict(args), Args)
        write_args_json(run_dir, args, {"num_envs_resolved": num_envs, "batch_size": batch_size,
                                        "minibatch_size": minibatch_size, "num_iterations": num_iterations,
                                        **({"game_settings": game_settings} if game_settings else {}),
                                        "command": command})  # fmt: skip
        # The algorithm's slots, filled once per policy (a game with several policies trains one network each, as
        # learners whose rollouts policies.PolicySet routes): the agent (MLP or --lstm), the bonus (--rnd), the
        # optimizer and the normaliser
        views = policy_set.views if policy_set is not None else [rollouts]
        _check_policies(views, policy_set, ckpt, args, run_dir)
        learners = [_make_learner(view, args, _saved_policy(ckpt, view, policy_set), policy_set) for view in views]
        if policy_set is not None:
            policy_set.bind(learners)
        first = learners[0]
        obs_space, act_space = rollouts.single_observation_space, rollouts.single_action_space
        aux, fit = None, {}
        if args.demos:  # behavioural cloning (cloning.py): pre-training (not on --resume), then PPO's auxiliary loss
            if policy_set is not None:
                raise TrainError(f"--demos clones one policy; {args.env_id}'s agents play {len(learners)} "
                                 f"({', '.join(policy_set.names)}): drop --demos")  # fmt: skip
            demos = load_demos(args.demos, first.agent.obs_dim, act_space, _declared_actions(rollouts.env_info),
                               args.env_id)  # fmt: skip
            print(f"demonstrations: {demos.summary()}", flush=True)
            if not ckpt:
                cloning.seed_normalizer(first.normalizer, demos)
                fit = cloning.pretrain(first.agent, first.normalizer, demos, args, args.seed)
                print("behavioural cloning: " + ", ".join(f"{k.split('/')[1]} {v:.3f}" for k, v in fit.items()))
            if args.bc_coef > 0:
                aux = cloning.CloningLoss(first.agent, first.normalizer, demos, args, args.seed)

        # TensorBoard, episodes.csv, progress (a resumed run drops what was logged after its checkpoint)
        log = RunLog(run_dir, global_step, resumed=bool(ckpt), hyperparameters={**asdict(args), "num_envs": num_envs,
                     "batch_size": batch_size, "minibatch_size": minibatch_size, "norm_obs": first.normalizer.norm_obs,
                     "norm_reward": first.normalizer.norm_reward, **_policy_table(learners, policy_set)},
                     policies=None if policy_set is None else policy_set.names,
                     columns=schedule.columns() if schedule else ())  # fmt: skip
        writer = log.writer
        for tag, value in fit.items():  # the clone's fit to the demonstrations, before PPO
            writer.add_scalar(tag, value, global_step)
        env_info = rollouts.env_info  # Godot games: the in-engine player's policy.json goes with each checkpoint

        def checkpoint(path, step, update):
            with signals_deferred():  # a signal during torch.save is raised after it (torch would garble it)
                curriculum_state = schedule.state_dict() if schedule else None
                if policy_set is None:
                    save_checkpoint(path, agent=first.agent, optimizer=first.optimizer, normalizer=first.normalizer,
                                    args=args, global_step=step, update=update, observation_space=obs_space,
                                    action_space=act_space, env_info=env_info, rnd=first.bonus,
                                    batch_size=batch_size, rollouts=rollouts.state_dict() if args.self_play else None,
                                    curriculum=curriculum_state)  # fmt: skip
                else:
                    save_checkpoint(path, agent=None, optimizer=None, normalizer=None, args=args, global_step=step,
                                    update=update, observation_space=None, action_space=None, env_info=env_info,
                                    batch_size=batch_size, policies={ln.name: _policy_state(ln) for ln in learners},
                                    curriculum=curriculum_state)  # fmt: skip
            if env_info is not None:  # keep RUN_DIR/policy.json (the in-engine player's weights) up to date
                write_policy(path, step, update)

        def write_policy(path, step, update):
            source = policy_source(path, global_step=step, update=update, trained_env=args.env_id, seed=args.seed,
                                   command=command, env_path=args.env_path)  # fmt: skip
            if policy_set is None:
                write_policy_or_warn(run_dir / POLICY_NAME, lambda: game_policy(
                    first.agent, first.normalizer, act_space, env_info, env_id=args.env_id, source=source,
                    where=str(path)))  # fmt: skip
                return
            # RUN_DIR/policy.json, the bundle of every policy (play, --watch), and RUN_DIR/policies/<name>.json each
            write_policies_or_warn(run_dir, lambda: [game_policy(
                ln.agent, ln.normalizer, ln.rollouts.single_action_space, ln.rollouts.env_info, env_id=args.env_id,
                source=source, where=f"{path} (policy {ln.name!r})", policy_name=ln.name) for ln in learners])

        saved_step = global_step if ckpt else None  # the global step of the newest checkpoint on disk

        def checkpoint_note():
            if saved_step is None:
                return "no checkpoint was written yet"
            return f"the last checkpoint {run_dir / CHECKPOINT_NAME} (global step {saved_step}) is intact"

        if args.watch:  # a window plays RUN_DIR/policy.json, reloaded at each checkpoint; now: the actor as it starts
            write_policy(run_dir / CHECKPOINT_NAME, global_step, start_update)
            watcher = start_policy_watcher(run_dir / POLICY_NAME, game, log_dir=run_dir / "logs", seed=args.seed,
                                           action_repeat=args.action_repeat or 1, fps=args.watch_fps, say=say)
        done_step, done_update = global_step, start_update  # the last completed update (what Ctrl-C saves)
        start_time, start_step = time.time(), global_step
        if args.rnd and not ckpt:  # RND whitens observations with statistics of random play (the paper's)
            if policy_set is None:
                rollouts.warm_up(first.bonus, args.rnd_warmup_steps, args.seed + global_step)
            else:
                policy_set.warm_up(args.rnd_warmup_steps, args.seed + global_step)
        if policy_set is None:
            rollouts.reset(first.normalizer, first.buf, seed=args.seed + global_step)  # (Ray workers reset their own)
        else:
            policy_set.reset(seed=args.seed + global_step)
        log.start_progress(total=num_iterations * batch_size, initial=global_step, desc=f"{args.env_id}",
                           num_iterations=num_iterations)  # fmt: skip
        ready = True
        if ckpt:
            print(f"resuming {run_dir} at global step {global_step} (update {start_update}/{num_iterations})",
                  flush=True)  # fmt: skip
            saved_batch = ckpt.get("batch_size") or (global_step // ckpt["update"] if ckpt["update"] else None)
            if saved_batch not in (None, batch_size):
                say(f"note: the checkpoint's run collected {saved_batch} steps per update, this one {batch_size} "
                    f"({num_envs} envs x {args.num_steps} steps): the {num_iterations - start_update} updates left "
                    f"end at global step {global_step + (num_iterations - start_update) * batch_size} of "
                    f"--total-timesteps {args.total_timesteps}")  # fmt: skip

        updates = lockstep([ppo.iterations(args, ln.agent, ln.optimizer, ln.rollouts, ln.buf, ln.normalizer, ln.bonus,
                                           aux if ln is first else None, num_iterations=num_iterations,
                                           start=start_update, global_step=global_step)
                            for ln in learners])  # fmt: skip
        timing, since = TimeShares(), time.perf_counter()
        try:
            for its in updates:
                global_step += batch_size
                for ln in learners:  # episodic return/length -> TensorBoard and episodes.csv
                    for t, infos in ln.buf.episodes:
                        log.record_episodes(infos, global_step - batch_size + (t + 1) * num_envs, ln.tag,
                                            schedule.episodes(infos) if schedule else None)  # fmt: skip
                if schedule is not None:  # the curriculum: a lesson whose criterion is met moves on
                    changes = schedule.advance(global_step)
                    for line in changes:
                        print(line, flush=True)
                    if changes:
                        rollouts.set_env_params(schedule.message())
                sps = int((global_step - start_step) / max(time.time() - start_time, 1e-9))
                perf = _perf_scalars(its)
                since, other_s = time.perf_counter(), timing.add(perf, time.perf_counter() - since, first.buf)
                tags = {**perf, "perf/other_s": other_s, "charts/SPS": sps, **rollouts.scalars(),
                        **(schedule.scalars() if schedule else {})}  # fmt: skip
                for ln, it in zip(learners, its):  # each policy's own numbers, under its name when there are several
                    tags.update({ln.tag + k: v for k, v in it.scalars.items() if not k.startswith("perf/")})
                for tag, value in tags.items():
                    writer.add_scalar(tag, value, global_step)

                # ---- CHECKPOINT (episodes.csv flushed first) and progress ------------------------------------------
                done_step, done_update = global_step, its[0].iteration
                log.flush_episodes()
                if args.checkpoint_every and done_update % args.checkpoint_every == 0:
                    writer.flush()
                    checkpoint(run_dir / CHECKPOINT_NAME, global_step, done_update)
                    saved_step = global_step
                log.progress(global_step, done_update, sps)
        except NonFiniteEnvData as e:
            raise TrainError(
                f"{args.env_id} returned NaN/inf {e.what} at global step "
                f"{done_step + (e.t + 1) * num_envs}: fix the env's observation/reward code ({checkpoint_note()})"
            ) from None
        except ppo.NonFiniteLoss as e:
            raise TrainError(
                f"the loss became NaN/inf at global step {done_step + batch_size} (policy {e.pg_loss:.3g}, value "
                f"{e.v_loss:.3g}); {checkpoint_note()}. Lower --learning-rate, turn on --norm-obs / --norm-reward or "
                "check the env's reward scale, then --resume"
            ) from None

        # ---- the end: final checkpoint + model, deterministic evaluation, learning curve ----------------------------
        log.close_progress()
        if timing.updates:
            print(timing.summary(batch_size, num_envs // max(1, first.buf.group_steps // args.num_steps)), flush=True)
        checkpoint(run_dir / CHECKPOINT_NAME, global_step, done_update)
        saved_step = global_step
        checkpoint(run_dir / MODEL_NAME, global_step, done_update)
        eval_mean = None
        if args.eval_episodes:
            eval_mean = _evaluate(learners, policy_set, rollouts, args, global_step, writer)
        log.plot(eval_mean)
        if args.capture_video and isinstance(game, GodotGame):
            _record_final_video(run_dir, game, args.seed, args.connect_timeout)
        print(f"run folder: {run_dir}  (model: {run_dir / MODEL_NAME}; tensorboard --logdir {run_dir.parent})")
        return 0
    except (TrainError, DemoError):
        raise  # NaN observations or loss: its message names the last checkpoint (the model may be diverging)
    except (KeyboardInterrupt, Exception) as e:
        # Ctrl-C, SIGTERM, SIGHUP (signals.Interrupted), an instance out of restarts, a closed stdout (`| head`), a
        # bug: the model in memory is intact, so the last completed update is saved first, with a second signal held.
        with hold_signals():
            saved, save_error = False, None
            if ready and is_disk_full(e) and saved_step == done_step:
                saved = True  # the checkpoint on disk is of the last completed update: nothing to write on a full disk
            elif ready:
                try:
                    checkpoint(run_dir / CHECKPOINT_NAME, done_step, done_update)
                    saved = True
                except Exception as error:  # a full disk, most likely: said with what was kept, below
                    save_error = error
            _quiet_closed_stdout()
            if log is not None:
                _best_effort(log.close_progress)
                if saved:
                    _best_effort(log.plot)
            full = next((x for x in (e, save_error) if is_disk_full(x)), None)
            if isinstance(e, KeyboardInterrupt):
                status, head = 128 + signum_of(e), f"\ninterrupted by {signal.Signals(signum_of(e)).name}: "
            elif full is not None:  # one line: no traceback to keep (error.log would not fit either)
                status, head = 1, f"godot-ppo train: error: the disk is full ({_os_error(full)}): "
            else:
                status, head = 1, f"godot-ppo train: error: {_describe_crash(e, run_dir)}\n"
            if saved:
                say(f"{head}checkpoint at global step {done_step} (the last completed update) in "
                    f"{run_dir / CHECKPOINT_NAME}; continue with: godot-ppo train --resume {run_dir}")  # fmt: skip
            elif save_error is not None:  # what was kept, what was lost, in the same line
                why = "" if full is not None else f" ({one_line(save_error)})"
                if saved_step is None:
                    kept = f"no checkpoint was written yet: the {done_step} steps trained are lost"
                else:
                    kept = (f"the checkpoint at step {saved_step} is intact ({run_dir / CHECKPOINT_NAME}); the "
                            f"{done_step - saved_step} steps trained after it are lost; "
                            f"{'free some space, then ' if full is not None else ''}continue from it with: "
                            f"godot-ppo train --resume {run_dir}")  # fmt: skip
                say(f"{head}could not write the checkpoint of step {done_step}{why}: {kept}")
            else:
                kept = f"; {run_dir / CHECKPOINT_NAME} is unchanged" if ckpt else ""
                say(f"{head}{'nothing saved' if ready else 'training had not started: nothing to save'}{kept}")
            return status
    finally:
        if watcher is not None:
            watcher.close()
        if log is not None:
            log.close()
        rollouts.close()
        lock.release()


class TimeShares:
    """Where the updates' wall-clock time went (the perf/* tags, summed): the rollout (of which acting and waiting
    for the games), the update epochs, and everything else (GAE, logging, checkpoints)."""

    def __init__(self):
        self.updates, self.group_steps = 0, 0
        self.seconds = dict.fromkeys(("rollout", "policy", "env_wait", "update", "other"), 0.0)

    def add(self, scalars: dict, wall_s: float, buf) -> float:
        """One update's perf/* scalars and its wall-clock time; returns its perf/other_s."""
        other = max(0.0, wall_s - scalars["perf/rollout_s"] - scalars["perf/update_s"])
        for name in ("rollout", "policy", "env_wait", "update"):
            self.seconds[name] += scalars[f"perf/{name}_s"]
        self.seconds["other"] += other
        self.updates, self.group_steps = self.updates + 1, self.group_steps + buf.group_steps
        return other

    def summary(self, batch_size: int, group_size: int) -> str:
        s, total = self.seconds, sum(self.seconds[k] for k in ("rollout", "update", "other")) or 1e-9
        acting_us = 1e6 * s["policy"] / max(1, self.group_steps)
        return (f"time: rollout {s['rollout'] / total:.0%} (acting {s['policy'] / total:.0%}, waiting for the envs "
                f"{s['env_wait'] / total:.0%}), update {s['update'] / total:.0%}, other {s['other'] / total:.0%} of "
                f"{total:.1f} s; acting {acting_us:.0f} us per step of {group_size} envs, update "
                f"{1e3 * s['update'] / self.updates:.0f} ms per {batch_size} samples")


# ======================================================================================================================
# Stopping early: what is said, and saying it when the terminal or a pipe is gone
# ======================================================================================================================
def _best_effort(fn):
    try:
        fn()
    except Exception:
        pass


def _quiet_closed_stdout():
    """When stdout is a closed pipe (`| head`), point it at /dev/null: nothing more fails, and Python's own flush at
    exit prints no 'Exception ignored ... BrokenPipeError'."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def _describe_crash(e, run_dir):
    """One line for an error that ended training once the agent existed (the traceback of an unexpected one goes to
    RUN_DIR/error.log)."""
    if isinstance(e, BrokenPipeError):
        return "an output of the trainer was closed under it (broken pipe, e.g. `godot-ppo train ... | head`)"
    if isinstance(e, InstanceCrashedError):
        return f"{one_line(e)} (--max-restarts allows more restarts)"
    if isinstance(e, (InstanceStartError, GodotConnectionError, GameError, WorkerLostError)):
        return one_line(e)
    try:  # whole or not there: a disk that fills up meanwhile leaves no empty error.log
        write_atomic(run_dir / "error.log", "".join(traceback.format_exception(e)))
        return f"{type(e).__name__}: {one_line(e)} (traceback in {run_dir / 'error.log'})"
    except OSError:
        return f"{type(e).__name__}: {one_line(e)}"


def _os_error(e: OSError) -> str:
    return e.strerror + (f": {e.filename}" if e.filename else "") if e.strerror else one_line(e)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with signal_policy():  # SIGINT, SIGTERM and SIGHUP stop training like Ctrl-C (signals.py)
        try:
            args = tyro.cli(Args, args=bool_flag_aliases(argv), prog="godot-ppo train",
                            description=ppo.__doc__.split("\n\n")[0])  # fmt: skip
        except SystemExit as e:  # --help, or a bad flag (tyro printed why)
            return e.code if isinstance(e.code, int) else 0
        try:
            return train(args, explicit_fields(argv, Args))
        except (UserError, UnknownEnvError, UnsupportedSpaceError, MissingDependencyError, GameError) as e:
            say(f"godot-ppo train: error: {e}")
            return 2
        except (InstanceStartError, InstanceCrashedError, GodotConnectionError, OSError) as e:  # before training
            _quiet_closed_stdout()
            if getattr(e, "errno", None) == errno.EADDRINUSE:  # the launcher binds port 0: no free local port left
                e = f"{e} (while opening a local port for a game instance: are the ephemeral ports used up?)"
            say(f"godot-ppo train: error: {e}")
            return 1
        except KeyboardInterrupt as e:  # before training started (e.g. while the Godot instances were launching)
            say(f"\ngodot-ppo train: interrupted by {signal.Signals(signum_of(e)).name}")
            return 128 + signum_of(e)


if __name__ == "__main__":
    sys.exit(main())
