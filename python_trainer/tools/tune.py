"""`godot-ppo tune`: a hyperparameter search on the user's own game (Optuna: a TPE sampler, a median pruner on the
evaluation each trial reports), each trial a `godot-ppo train` child of its own, one at a time.

    godot-ppo tune --env-path my_game/exports/headless/game.x86_64 --out tune_runs --n-trials 30 --trial-steps 300000
    godot-ppo tune --env-id CartPole-v1 --out cartpole_tune --n-trials 20 --timeout 3600
    godot-ppo train --config tune_runs/best.toml --total-timesteps 3000000     # the best config, trained long

DIR (--out) holds study.db (the study, SQLite: run the same command again and an interrupted search goes on from
it), trials/trial_NNNN/ (each trial's run folder and its output, train.log) and best.toml (the best trial's flags,
the only TOML file tune writes; `train --config` reads it). Each trial trains --trial-steps learner steps and reports
its evaluations to the pruner as it goes (`train --eval-every`: --evaluations per trial, the in-engine evaluation's
eval/random/mean_return, or eval/scripted/win_rate in a two-team game with a scripted opponent; a gymnasium id, or
--evaluations 0: the training episodes' mean return of the progress line); the pruner stops a trial whose result is
below the median of the trials before it at the same evaluation (SIGINT, as Ctrl-C stops train). The trial's value
is its last report. docs/tune.md has the search space and its file (tune_space.py).
"""

from __future__ import annotations

import collections
import math
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from python_trainer.base.errors import Fault, UserError, say
from python_trainer.base.files import check_output
from python_trainer.base.flags import ENV_ID_FLAG, ENV_PATH_FLAG, SEED_FLAG, at_least, flag, parse_flags, positive
from python_trainer.base.processes import end_process_tree, spawn
from python_trainer.envs.game import GodotGame, resolve_env
from python_trainer.envs.gym_env import DEFAULT_NUM_ENVS
from python_trainer.run.config_file import config_to_argv, write_config
from python_trainer.run.train import Args as TrainArgs
from python_trainer.tools.tune_space import Rejected, Space, batch_of, load_space, trial_flags

STUDY_DB, TRIALS, BEST = "study.db", "trials", "best.toml"
STOP_WAIT_S = 60.0  # a pruned or interrupted trial's train, after SIGINT, has this long to write its checkpoint
HEARTBEAT_S = 60  # an RDB study's running trial beats this often; one silent for 3 beats was cut short (failed)
MAX_FAILURES_IN_A_ROW = 3  # trials whose train failed, one after another: the search stops, naming the last error
MIN_PRUNE_REPORTS = 2  # the pruner leaves a trial's first evaluation alone (a policy barely trained)


@dataclass
class TuneArgs:
    out: str
    """the search's folder: study.db, trials/, best.toml (an existing one goes on with its study)"""
    env_id: ENV_ID_FLAG.type(", or a gymnasium id: the game every trial trains (train's --env-id)"
                             ) = ENV_ID_FLAG.default(None)
    env_path: ENV_PATH_FLAG.type(": the game every trial trains (train's --env-path)") = ENV_PATH_FLAG.default(None)
    space: Optional[str] = None
    """a TOML file that narrows or widens the search space, and fixes flags every trial gets (docs/tune.md)"""
    n_trials: int = flag(20, at_least(1, "an integer >= 1", "20"))
    """trials the study should have finished (completed or pruned), counting those of an earlier run of the same
    --out: an interrupted search run again goes on to this many"""
    timeout: Optional[float] = flag(None, positive("3600", "a number of seconds > 0"))
    """seconds for the search: no trial starts after it, and a trial still running then is stopped (pruned)"""
    trial_steps: int = flag(100000, at_least(2, "an integer >= 2 (learner steps)", "100000"))
    """learner steps each trial trains (its --total-timesteps); each trial's batch (envs x --num-steps) is at most
    half of it"""
    evaluations: int = flag(4, at_least(0, "an integer >= 0 (0: the training episodes' mean return)", "4"))
    """evaluations per trial (train --eval-every trial_steps / N; Godot games with the rl_sync addon): what each trial
    reports to the pruner. 0, or a gymnasium id: the training episodes' mean return, from train's progress line"""
    seed: SEED_FLAG.type(" of the sampler (the same seed, the same trials asked) and each trial's --seed"
                         ) = SEED_FLAG.default(1)
    startup_trials: int = flag(5, at_least(0, "an integer >= 0", "5"))
    """trials sampled at random before TPE models the results, and before the pruner stops any"""
    storage: Optional[str] = None
    """an Optuna storage URL in place of DIR/study.db (e.g. postgresql://host/db), so several machines share one
    search"""
    study_name: str = "tune"
    """the study's name in the storage"""


class TrialFailed(Exception):
    """A trial's train failed (its last error line is the message); the search goes on."""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_flags(TuneArgs, argv, "godot-ppo tune", __doc__.split("\n\n")[0])
    try:
        import optuna
    except ModuleNotFoundError:
        raise UserError("godot-ppo tune needs Optuna: pip install optuna (pyproject.toml pins the version)") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # tune says what happens, in its own lines
    try:  # the game, the space and its envs per instance first: a refused start makes no folder
        game = resolve_env(args.env_id or (None if args.env_path else "CartPole-v1"), args.env_path)
        gym_id = isinstance(game, str)
        space = load_space(args.space, gym_id, TrainArgs)
        per = DEFAULT_NUM_ENVS if gym_id else _agents_per_instance(game, space)
    except Fault as e:  # a game that would not start or crashed, said with what it was started for
        raise Fault(f"the game's first instance (counting its agents): {e}") from None
    game_flags = ({"env_id": game} if gym_id else
                  {"env_id": game.env, "env_path": game.env_path if args.env_path else None})
    evaluations = 0 if gym_id or not game.rl_sync else args.evaluations
    out = check_output(Path(args.out), folder=True)
    study = _study(optuna, args, out)
    _same_search(study, args, game_flags)
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                       optuna.trial.TrialState.PRUNED)]
    left = max(0, args.n_trials - len(finished))
    print(f"godot-ppo tune: {game_flags['env_id']}, study {args.storage or out / STUDY_DB} ({len(finished)} trials "
          f"finished, {left} to run, one at a time), {args.trial_steps} steps a trial, reporting "
          f"{f'{evaluations} evaluations' if evaluations else 'the training episodes mean return'}; the space:",
          flush=True)
    print("\n".join(space.table()), flush=True)
    runner = TrialRunner(args, out, space, game_flags, per, evaluations)
    try:
        if left:
            study.optimize(runner.objective, n_trials=left, timeout=args.timeout, catch=(TrialFailed,))
    except KeyboardInterrupt as e:
        say(f"\ngodot-ppo tune: interrupted by {signal.Signals(getattr(e, 'signum', signal.SIGINT)).name}: the study is "
            f"in {args.storage or out / STUDY_DB}; the same command goes on with it")
        _report_best(optuna, study, out, game_flags, args)
        return 128 + getattr(e, "signum", signal.SIGINT)
    return 0 if _report_best(optuna, study, out, game_flags, args) else 1


def _study(optuna, args: TuneArgs, out: Path):
    url = args.storage or f"sqlite:///{(out / STUDY_DB).resolve()}"
    sampler = optuna.samplers.TPESampler(seed=args.seed, n_startup_trials=args.startup_trials)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=args.startup_trials, n_warmup_steps=MIN_PRUNE_REPORTS)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # the RDB heartbeat's
    try:
        storage = url
        if url.split(":", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql", "mysql"):
            # a trial whose tune was killed stops beating: the next run marks it failed, and runs it again
            storage = optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=3 * HEARTBEAT_S)
        return optuna.create_study(storage=storage, sampler=sampler, pruner=pruner, study_name=args.study_name,
                                   direction="maximize", load_if_exists=True)
    except Exception as e:  # a storage URL Optuna cannot open
        raise UserError(f"--storage {url}: Optuna cannot open it ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
                        ) from None


def _same_search(study, args: TuneArgs, game_flags: dict) -> None:
    """A study goes on only with the game and trial budget it started with (its trials would not compare)."""
    settings = {"game": game_flags, "trial_steps": args.trial_steps}
    saved = study.user_attrs.get("settings")
    if saved is None:
        study.set_user_attr("settings", settings)
    elif saved != settings:
        raise UserError(f"the study {args.study_name!r} in {args.storage or Path(args.out) / STUDY_DB} searched "
                        f"{saved['game']['env_id']} with --trial-steps {saved['trial_steps']}; this run asks for "
                        f"{game_flags['env_id']} with --trial-steps {args.trial_steps}: give the same, or another "
                        "--out")


def _agents_per_instance(game: GodotGame, space: Space) -> int:
    """A Godot game's agents in one copy of its scene: --agents-per-instance when fixed, else what one instance of
    the game simulates when left to choose (started once, with the fixed flags, and closed)."""
    if space.fixed.get("agents_per_instance"):
        return int(space.fixed["agents_per_instance"])
    from python_trainer.envs.vec_env import make_vec_env
    from python_trainer.run.learners import env_kwargs

    fixed = {k: v for k, v in space.fixed.items() if k not in ("num_instances", "copies", "num_envs")}
    probe_args = TrainArgs(**{**fixed, "num_instances": 1})
    with tempfile.TemporaryDirectory(prefix="godot-ppo-tune-") as folder:
        env = make_vec_env(game, **env_kwargs(probe_args, game, 0, folder))
        try:
            return int(env.num_envs)
        finally:
            env.close()


# ======================================================================================================================
# One trial: a `godot-ppo train` child, its reports read line by line
# ======================================================================================================================
# What a trial reports, best first: the deterministic win rate against the scripted opponent (a two-team game that has
# one), against random play (two teams), else the mean return (train's evaluation.py keeps the best snapshot alike).
EVAL_TAGS = ("eval/scripted/win_rate", "eval/random/win_rate", "eval/random/mean_return")
NUMBER = r"(-?\d+(?:\.\d*)?(?:e[-+]?\d+)?)"
EVAL_LINE = re.compile(r"global_step[=: ]\s*(\d+)")  # a line of train's own evaluation: global_step=N eval/...=V
PROGRESS_EVAL = re.compile(r"eval\(step (\d+)\)")  # the progress line's last evaluation: eval(step N) random=V
PROGRESS_RETURN = re.compile(r"global_step=(\d+) .*mean_return\(last 100\)=" + NUMBER)


def read_measure(line: str, evaluations: int):
    """(global_step, value) that a line of train's output reports, or None: with ``evaluations``, an evaluation (its
    own line, or the last one the progress line appends: its step, so a repeat is seen as one); else the progress
    line's mean return of the last 100 training episodes."""
    if not evaluations:
        m = PROGRESS_RETURN.search(line)
        return (int(m.group(1)), float(m.group(2))) if m else None
    appended = PROGRESS_EVAL.search(line)
    if appended is not None:
        found = re.findall(r"(\w+)=" + NUMBER + r"(%?)", line[appended.end():])
        words = {name: float(v) / (100 if pct else 1) for name, v, pct in found}
        for name in ("scripted", "random"):
            if name in words:
                return int(appended.group(1)), words[name]
        return None
    step = EVAL_LINE.search(line)
    for tag in EVAL_TAGS if step else ():
        m = re.search(re.escape(tag) + r"[=: ]\s*" + NUMBER, line)
        if m:
            return int(step.group(1)), float(m.group(1))
    return None


def logged_evaluations(run_dir) -> list:
    """[(global_step, value)] of a finished trial's evaluations, from its TensorBoard events (the first of EVAL_TAGS
    it logged)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if run_dir is None:
        return []
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    tags = set(acc.Tags().get("scalars", []))
    for tag in EVAL_TAGS:
        if tag in tags:
            return [(e.step, e.value) for e in acc.Scalars(tag)]
    return []


class TrialRunner:
    def __init__(self, args: TuneArgs, out: Path, space: Space, game_flags: dict, per: int, evaluations: int):
        self.args, self.out, self.space, self.game_flags, self.per = args, out, space, game_flags, per
        self.evaluations = evaluations
        self.deadline = time.monotonic() + args.timeout if args.timeout else None
        self.failures = 0

    def command(self, flags: dict, root: Path, number: int) -> list:
        a = self.args
        own = {"total_timesteps": a.trial_steps, "seed": a.seed, "run_dir_root": str(root), "exp_name": f"trial{number}",
               "checkpoint_every": 0, "eval_episodes": 0}
        if self.evaluations:
            own["eval_every"] = max(1, a.trial_steps // self.evaluations)
        return [sys.executable, "-m", "python_trainer", "train",
                *config_to_argv({**{k: v for k, v in self.game_flags.items() if v is not None}, **flags, **own},
                                TrainArgs)]

    def objective(self, trial) -> float:
        import optuna

        try:
            flags = trial_flags(trial, self.space, self.args.trial_steps, self.per)
        except Rejected as e:
            trial.set_user_attr("rejected", str(e))
            print(f"trial {trial.number}: not trained: {e}", flush=True)
            raise optuna.TrialPruned(str(e)) from None
        trial.set_user_attr("flags", flags)
        root = self.out / TRIALS / f"trial_{trial.number:04d}"
        root.mkdir(parents=True, exist_ok=True)
        print(f"trial {trial.number}: {_flags_text(flags)} (batch {batch_of(flags, self.per)})", flush=True)
        value = self._run(trial, self.command(flags, root, trial.number), root)
        print(f"trial {trial.number}: {value:.4g}", flush=True)
        return value

    def _run(self, trial, cmd: list, root: Path) -> float:
        import optuna

        lines: queue.SimpleQueue = queue.SimpleQueue()
        proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = threading.Thread(target=_read_lines, args=(proc, root / "train.log", lines), daemon=True)
        reader.start()
        reported, last, said = set(), None, collections.deque(maxlen=200)  # said: the output's tail
        try:
            while True:
                wait = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
                try:
                    line = lines.get(timeout=wait)
                except queue.Empty:  # --timeout spent while the trial runs: it stops, pruned at its last report
                    _stop(proc)
                    raise optuna.TrialPruned("stopped at --timeout") from None
                if line is None:
                    break
                said.append(line)
                measure = read_measure(line, self.evaluations)
                if measure is None:
                    continue
                last = measure[1]
                if self._report(trial, *measure, reported, root) and trial.should_prune():
                    _stop(proc)
                    print(f"trial {trial.number}: pruned at step {measure[0]} ({last:.4g})", flush=True)
                    raise optuna.TrialPruned(f"pruned at step {measure[0]}")
            code = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        trial.set_user_attr("run_dir", _run_dir(root))
        if code == 0 and self.evaluations:  # the evaluations the lines did not show (the final one), from its events
            logged = logged_evaluations(_run_dir(root))
            for step, value in logged:
                self._report(trial, step, value, reported, root)
            last = logged[-1][1] if logged else None
        if code != 0 or last is None or not math.isfinite(last):
            error = next((s for s in reversed(said) if "error" in s), said[-1] if said else "no output")
            nothing = "evaluation (--evaluations 0 reports the training return)" if self.evaluations else "episode"
            why = f"train exited {code}: {error.strip()[:300]}" if code != 0 else f"train logged no {nothing}"
            print(f"trial {trial.number}: failed: {why} (its output: {root / 'train.log'})", flush=True)
            trial.set_user_attr("failed", why)
            self.failures += 1
            if self.failures >= MAX_FAILURES_IN_A_ROW:  # what every trial meets (a flag of [fixed], the game): stop
                raise Fault(f"{self.failures} trials in a row failed, the last: {why} (its output: "
                            f"{root / 'train.log'}); fix that and run the same command again")
            raise TrialFailed(why)
        self.failures = 0
        return last

    def _report(self, trial, step: int, value: float, reported: set, root: Path) -> bool:
        """Report an evaluation to the pruner, once per index (_report_index); whether it was new."""
        index = self._report_index(step)
        if index in reported or not math.isfinite(value):
            return False
        reported.add(index)
        trial.report(value, index)
        trial.set_user_attr("run_dir", _run_dir(root))
        return True

    def _report_index(self, step: int) -> int:
        """The evaluation a report is (1, 2, ...): the same index at the same share of every trial's budget."""
        parts = self.evaluations or 10
        return max(1, round(step * parts / self.args.trial_steps))


def _read_lines(proc, log: Path, lines) -> None:
    with open(log, "w") as f:
        for raw in proc.stdout:
            text = raw.decode(errors="replace")
            f.write(text)
            f.flush()
            lines.put(text)
    lines.put(None)


def _stop(proc) -> None:
    """train stopped as Ctrl-C stops it (its checkpoint written), then ended if it has not within STOP_WAIT_S."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        end_process_tree([proc.pid])
        proc.wait()


def _run_dir(root: Path) -> Optional[str]:
    found = sorted(p for p in root.iterdir() if p.is_dir())
    return str(found[0]) if found else None


def _flags_text(flags: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in flags.items())


# ======================================================================================================================
# The result
# ======================================================================================================================
def _report_best(optuna, study, out: Path, game_flags: dict, args: TuneArgs) -> bool:
    """Print the trials and the best one as a train command, and write DIR/best.toml; False when none completed."""
    trials = [t for t in study.trials if t.state != optuna.trial.TrialState.RUNNING]
    print("\ntrial  state     value     flags")
    for t in trials:
        value = f"{t.value:.4g}" if t.value is not None else "-"
        print(f"{t.number:>5}  {t.state.name.lower():<8}  {value:<8}  {_flags_text(t.user_attrs.get('flags', {}))}")
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        say("godot-ppo tune: no trial completed yet: no best.toml")
        return False
    best = study.best_trial
    config = {**{k: v for k, v in game_flags.items() if v is not None}, **best.user_attrs["flags"]}
    command = " ".join(["godot-ppo", "train", *config_to_argv(config, TrainArgs)])
    header = (f"godot-ppo tune's best trial: {best.number} of study {args.study_name!r}, value {best.value:.6g} after "
              f"{args.trial_steps} steps\n{command}\nuse: godot-ppo train --config best.toml --total-timesteps N")
    write_config(out / BEST, config, header)
    print(f"\nbest: trial {best.number}, value {best.value:.4g} ({out / BEST}):\n{command}", flush=True)
    return True
