"""`godot-ppo train`: the command and its flags (Args: the run's own, the environment's, then the algorithm's and its
variants', each from its module). The run itself, in phases (prepare, build the learners, the loop over ppo.iterations,
finish, on a crash), is training.py's `TrainingRun`.

    godot-ppo train --env-id CartPole-v1 --total-timesteps 500000
    godot-ppo train --env-id ball_chase --num-instances 2          # 2 Godot instances x 16 agents
    godot-ppo train --help                                          # every flag, from the Args dataclasses' docstrings

Every flag is checked before any game starts (each flag's rule is stated next to it: flags.py); one process trains
in a run folder at a time (a lock). SIGINT, SIGTERM and SIGHUP (signals.py), a crashed instance, a closed stdout or
any other error once the agent exists all write the checkpoint of the last completed update and print the --resume
command; exit status 0, 1 (an error), 2 (bad input), 128 + N (signal N). A problem is raised as a UserError (a Fault
if it happened while running), which the command line (cli.py) prints as the command's one error line, its exit
status the error's kind's.
"""

from __future__ import annotations

import errno
import signal
import sys
from dataclasses import dataclass
from typing import Optional

from python_trainer import ppo
from python_trainer.base.errors import Fault, say
from python_trainer.base.flags import (
    ACTION_REPEAT, AGENTS_FLAG, CONNECT_TIMEOUT_FLAG, COPIES, DEFAULT_CONNECT_TIMEOUT_S, ENV_ID_FLAG, ENV_PATH_FLAG,
    INSTANCES_FLAG, SEED_FLAG, SPEEDUP, GoesWith, at_least, explicit_fields, flag, in_range, parse_flags, seconds_rule,
)
from python_trainer.base.signals import signal_policy, signum_of
from python_trainer.engine.watcher import WATCH_FPS
from python_trainer.envs.editor import DEFAULT_EDITOR_PORT
from python_trainer.envs.frame_stack import FrameStackArgs
from python_trainer.envs.launcher import DEFAULT_MAX_RESTARTS
from python_trainer.envs.protocol import DEFAULT_TIMEOUT_S
from python_trainer.normalization import NormArgs, bool_flag_aliases
from python_trainer.rollout import RolloutArgs
from python_trainer.run.clock import MAX_SECONDS
from python_trainer.run.config_file import CONFIG_HELP, config_argv
from python_trainer.run.crash import quiet_closed_stdout
from python_trainer.run.curriculum import CurriculumArgs
from python_trainer.run.evaluation import EvalArgs
from python_trainer.run.tracking import TrackArgs
from python_trainer.run.training import TrainingRun
from python_trainer.variants.async_rollouts import AsyncArgs
from python_trainer.variants.cloning import CloningArgs
from python_trainer.variants.cnn_agent import CnnArgs
from python_trainer.variants.engine_actors import EngineActorArgs
from python_trainer.variants.ray_rollouts import RayArgs
from python_trainer.variants.recurrent import LSTMArgs
from python_trainer.variants.rnd import RNDArgs
from python_trainer.variants.self_play import SelfPlayArgs


# ======================================================================================================================
# The flags: the run's own, the environment's, then the algorithm's and its variants' (each from its module)
# ======================================================================================================================
@dataclass
class ExperimentArgs:
    exp_name: str = "ppo"
    """the name of this experiment (part of the run folder name)"""
    seed: SEED_FLAG.type(" of the experiment (python, numpy, torch, envs)") = SEED_FLAG.default(1)
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    torch_threads: int = flag(1, at_least(1, "an integer >= 1", "1"))
    """torch CPU threads; 1 is fastest for these small networks"""
    run_dir_root: str = "runs"
    """the run folder is RUN_DIR_ROOT/<env>__<exp>__<seed>__<time>/"""
    resume: Optional[str] = None
    """continue the run in this folder from its last checkpoint (flags not given are taken from its args.json)"""
    max_seconds: Optional[float] = flag(None, MAX_SECONDS)
    """a wall-clock budget of training, in seconds, beside --total-timesteps: the learning rate anneals by the larger
    share spent of the two, and the run ends at the first one spent, with its final checkpoint and evaluation
    (--resume counts the seconds already trained)"""
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
    env_id: ENV_ID_FLAG.type(", or a gymnasium id (default: CartPole-v1 without --env-path; the binary's default game "
                             "with it; ball_chase is a game of this repository's export)") = ENV_ID_FLAG.default(None)
    env_path: ENV_PATH_FLAG.type(" once Godot's editor has imported its assets (Godot games; default: this "
                                 "repository's exports/headless/rl_games.x86_64)") = ENV_PATH_FLAG.default(None)
    num_envs: Optional[int] = flag(None, at_least(1, "an integer >= 1", "4"))
    """the number of parallel environments (default: 4 for gymnasium ids; for Godot games the agents the instances
    report, num-instances x the game's agents per instance)"""
    num_instances: INSTANCES_FLAG.type(" (Godot games)") = INSTANCES_FLAG.default(1)
    agents_per_instance: AGENTS_FLAG.type(" (Godot games; each copy of the scene, with --copies; default: the game's "
                                          "own choice, which a game with a fixed number of agents keeps whatever is "
                                          "asked)") = AGENTS_FLAG.default(None)
    copies: int = flag(1, COPIES)
    """Godot games: copies of the game's scene each instance runs, each in its own Viewport and World (ML-Agents'
    training areas; the addon checks the game's scripts for what the copies would share, see docs/own_game.md):
    each instance then simulates copies x agents-per-instance agents"""
    speedup: Optional[float] = flag(None, SPEEDUP)
    """Godot games: engine time scale (default: the Godot env's)"""
    action_repeat: Optional[int] = flag(None, ACTION_REPEAT)
    """Godot games: physics frames per decision step (default: the Godot env's)"""
    window: bool = False
    """Godot games: show the game windows instead of running headless"""
    watch: bool = False
    """Godot games: open one more window, outside the training batch, in which the policy plays inside the engine at
    real time from RUN_DIR/policy.json, reloaded at every checkpoint (Xvfb without $DISPLAY)"""
    watch_fps: int = flag(WATCH_FPS, at_least(1, "an integer >= 1 (frames per second)", str(WATCH_FPS)),
                          goes_with=GoesWith("watch", "the window that watches the policy", "--watch"))
    """with --watch: the window's frame cap (it also runs at a lower CPU priority, so training keeps the CPU)"""
    max_restarts: int = flag(DEFAULT_MAX_RESTARTS, at_least(0, "an integer >= 0", "3"))
    """Godot games: how many times each instance may be restarted after a crash or a hang before training stops
    (with a checkpoint)"""
    step_timeout: float = flag(DEFAULT_TIMEOUT_S, seconds_rule("60", "how long one step may take"))
    """Godot games: seconds an instance may take to answer one step before it counts as hung (and is restarted)"""
    allow_script_errors: bool = False
    """Godot games: train on even when a game keeps raising script errors (Godot's SCRIPT ERROR lines, after its
    handshake); the first one is shown either way. Without it a run stops, with a checkpoint, once an instance has
    raised 10"""
    connect_timeout: CONNECT_TIMEOUT_FLAG.type(" (Godot games)") = CONNECT_TIMEOUT_FLAG.default(
        DEFAULT_CONNECT_TIMEOUT_S)
    editor: bool = False
    """train the game a person starts with Play in the Godot editor: the trainer listens on --port and waits; Ctrl-C,
    or closing the game, stops training with a checkpoint"""
    port: int = flag(DEFAULT_EDITOR_PORT, in_range(1, 65535, "a TCP port from 1 to 65535", str(DEFAULT_EDITOR_PORT)),
                     goes_with=GoesWith("editor", "training from the Godot editor", "--editor"))
    """with --editor: the port the trainer listens on (godot-rl's default); the game connects to its project setting
    rl_sync/editor_port, or $RL_SYNC_EDITOR_PORT, or that default"""


@dataclass
class Args(CloningArgs, SelfPlayArgs, RayArgs, AsyncArgs, EngineActorArgs, RolloutArgs, RNDArgs, LSTMArgs, CnnArgs, NormArgs, ppo.Args,
           CurriculumArgs, FrameStackArgs, EnvArgs, TrackArgs, EvalArgs, ExperimentArgs):
    """Every flag of `godot-ppo train` (the fields of the bases, in --help's order: ExperimentArgs first)."""


def main(argv=None) -> int:
    """`godot-ppo train ARGV`: 0 once trained, 128 + N after signal N; a problem raises UserError (cli.py says it):
    status 2 for a bad flag, game or run folder, 1 for a game that would not start or a crash once training started."""
    argv = config_argv(list(sys.argv[1:] if argv is None else argv), Args)  # --config FILE: its flags first
    with signal_policy():  # SIGINT, SIGTERM and SIGHUP stop training like Ctrl-C (signals.py)
        try:
            # checked once --resume has filled in the run's own flags (checks.check_args), not before
            args = parse_flags(Args, bool_flag_aliases(argv), "godot-ppo train",
                               ppo.__doc__.split("\n\n")[0] + CONFIG_HELP, check=False)
        except SystemExit as e:  # --help, or a bad flag (tyro printed why)
            return e.code if isinstance(e.code, int) else 0
        try:
            return TrainingRun(args, explicit_fields(argv, Args), Args).run()
        except (Fault, OSError) as e:  # a game that did not start, a lost worker, an OSError: before training
            quiet_closed_stdout()
            if isinstance(e, Fault):
                raise
            if e.errno == errno.EADDRINUSE:  # the launcher binds port 0: no free local port left
                e = f"{e} (while opening a local port for a game instance: are the ephemeral ports used up?)"
            raise Fault(str(e)) from None
        except KeyboardInterrupt as e:  # before training started (e.g. while the Godot instances were launching)
            say(f"\ngodot-ppo train: interrupted by {signal.Signals(signum_of(e)).name}")
            return 128 + signum_of(e)


if __name__ == "__main__":
    sys.exit(main())
