"""A training run's folder: its name, --resume (arguments merged from args.json), args.json, episodes.csv, the
TensorBoard writer and progress output (RunLog), and the learning curve.

    RUN_DIR/args.json  episodes.csv  events.out.tfevents.*  checkpoint.pt  model.pt  policy.json  learning_curve.png
            train.lock (while a process trains in the folder)

Works on any arguments dataclass (the train command's Args; the dataclass, or its class, is passed in).
"""

from __future__ import annotations

import csv
import fcntl
import json
import math
import os
import re
import shlex
import shutil
import time
from collections import deque
from dataclasses import MISSING, asdict, fields
from pathlib import Path

import numpy as np

from python_trainer.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from python_trainer.base.errors import UserError
from python_trainer.base.files import atomic_output, write_atomic
from python_trainer.base.paths import ARGS_JSON  # args.json: its name is base's, so the tools read it without torch
from python_trainer.run.crash import ERROR_LOG

EPISODES_CSV = "episodes.csv"
LOCK_NAME = "train.lock"


class TrainError(UserError):
    """A problem the user can fix, raised before or instead of training; the command line says it in one line and exits 2."""


# ======================================================================================================================
# Arguments: what the command line gave, --resume, args.json
# ======================================================================================================================
def _flag(name):
    return "--" + name.replace("_", "-")


def new_run_dir(root, env_id, exp_name, seed) -> Path:
    """Create ROOT/<env>__<exp>__<seed>__<time> (with _2, _3... appended if that exists already) and return it; a
    TrainError naming --run-dir-root when ROOT cannot hold it (read-only, full).

    Each candidate is created with an exclusive mkdir, so two runs started in the same second get two folders."""
    root = Path(root)
    run_name = f"{env_id}__{exp_name}__{seed}__{int(time.time())}"
    k = 1
    try:
        root.mkdir(parents=True, exist_ok=True)
        while True:
            run_dir = root / (run_name if k == 1 else f"{run_name}_{k}")
            try:
                run_dir.mkdir()
                return run_dir
            except FileExistsError:
                k += 1
    except OSError as e:  # a read-only folder, a full disk, a file in the way: said before any game starts
        raise TrainError(f"cannot make the run folder in {root.absolute()} ({e.strerror or e}): give --run-dir-root a "
                         "folder you can write to") from None


class RunLock:
    """One training per run folder: an exclusive ``flock`` on RUN_DIR/train.lock, held from the folder's creation
    (or --resume) to the end of the training, when the file is removed (finished, Ctrl-C, a crash). The kernel drops
    the lock when the process ends, however it ends: after SIGKILL the file stays, but locks nothing, and the next
    training of the folder takes it. The file holds the holder's pid for the error message. ``prefix`` starts that
    message."""

    def __init__(self, run_dir, prefix=""):
        path = self.path = Path(run_dir) / LOCK_NAME
        while True:
            try:
                self.file = open(path, "a+")  # not inherited by the game processes (O_CLOEXEC), so it dies with us
            except OSError as e:
                raise TrainError(f"{prefix}{run_dir}: cannot create its lock file {LOCK_NAME} ({e})") from None
            try:
                fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.file.seek(0)
                holder = self.file.read().strip() or "?"
                self.file.close()
                raise TrainError(
                    f"{prefix}{run_dir} is still being trained by process {holder} (it holds {path}): stop that "
                    f"process first (Ctrl-C or `kill {holder}` writes its checkpoint) or wait for it to end"
                ) from None
            if self._holds_the_path():
                break
            self.file.close()  # the file we locked was removed by its holder as it ended: lock the one there now
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"{os.getpid()}\n")
        self.file.flush()

    def _holds_the_path(self) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(self.file.fileno()).st_ino
        except FileNotFoundError:
            return False

    def release(self):
        """Remove the file, then drop the lock (in that order: a training that opened the file meanwhile finds it
        gone once it holds it, and tries again)."""
        if not self.file.closed:
            self.path.unlink(missing_ok=True)
            self.file.close()


def prepare_run(args, explicit):
    """(args, run_dir, checkpoint or None). With --resume, unspecified flags come from the run's args.json."""
    if args.resume is None:
        return args, None, None  # train() names the folder (new_run_dir) once it knows which game runs
    run_dir = Path(args.resume)
    ckpt_path = run_dir / CHECKPOINT_NAME
    if not run_dir.is_dir():
        raise TrainError(
            f"--resume {run_dir}: no such folder (give a run folder such as runs/CartPole-v1__ppo__1__1700000000)"
        )
    if not ckpt_path.is_file():
        raise TrainError(
            f"--resume {run_dir}: there is no {CHECKPOINT_NAME} in it (the run stopped before its first checkpoint); "
            "start a new run instead, with a smaller --checkpoint-every if runs get interrupted early"
        )
    try:
        ckpt = load_checkpoint(ckpt_path)
    except CheckpointError as e:  # empty, truncated, foreign file
        raise TrainError(f"--resume {run_dir}: {e}; start a new run instead") from None
    saved = ckpt["args"]
    if "env_id" in explicit and args.env_id != ckpt["env_id"]:
        raise TrainError(
            f"--resume {run_dir}: that run trained {ckpt['env_id']!r}, not {args.env_id!r}; "
            f"drop --env-id (or pass --env-id {ckpt['env_id']}) or start a new run"
        )
    merged = {
        f.name: (getattr(args, f.name) if f.name in explicit else saved.get(f.name, getattr(args, f.name)))
        for f in fields(args)
    }
    merged["resume"] = str(run_dir)
    return type(args)(**merged), run_dir, ckpt


def write_args_json(run_dir, args, extra):
    """RUN_DIR/args.json: every flag, then ``extra`` (what the run resolved: num_envs, batch size, the command...)."""
    write_atomic(Path(run_dir) / ARGS_JSON, json.dumps({**asdict(args), **extra}, indent=2))


def recorded_command(run_dir) -> str | None:
    """The `godot-ppo train` command that args.json recorded for the run (None: no such record)."""
    try:
        return json.loads((Path(run_dir) / ARGS_JSON).read_text()).get("command")
    except (OSError, ValueError, AttributeError):
        return None


def discard_new_run(run_dir, *errors: BaseException | None) -> None:
    """Remove a new run's folder after a refused or failed start, or a stop before its training began: nothing in it
    is worth keeping (the error quotes its games' logs), unless it holds error.log, the traceback of a bug that the
    error names. The messages of ``errors`` then name the files that went by their names alone (`gone_from`)."""
    run_dir = Path(run_dir)
    if (run_dir / ERROR_LOG).exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    for error in errors:
        if error is not None and len(error.args) == 1 and isinstance(error.args[0], str):
            error.args = (gone_from(run_dir, error.args[0]),)


def gone_from(run_dir, text: str) -> str:
    """``text`` with each path inside the removed folder ``run_dir`` (a game's log) named by its file name, said gone."""
    return re.sub(re.escape(str(run_dir)) + r"/(?:[^\s/]+/)*([^\s/:;,)]+)", r"\1 (removed with its run folder)", text)


def train_command(args: dict, args_class=None) -> str:
    """The `godot-ppo train` command line that reproduces a run's saved args: the flags that differ from the
    defaults of ``args_class`` (plus --env-id and --seed), or without it every flag that has a value."""
    parts = ["godot-ppo", "train"]
    names = [f.name for f in fields(args_class)] if args_class is not None else list(args)
    defaults = {f.name: f.default for f in fields(args_class) if f.default is not MISSING} if args_class else {}
    for name in names:
        if name not in args or name == "resume":
            continue
        value = args[name]
        if args_class is not None and value == defaults.get(name) and name not in ("env_id", "seed"):
            continue
        flag = _flag(name)
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):  # a repeatable flag (--env-param), once per value
            for item in value:
                parts += [flag, shlex.quote(str(item))]
        elif value is not None:
            parts += [flag, str(value)]
    return " ".join(parts)


# ======================================================================================================================
# Episodes, TensorBoard, progress
# ======================================================================================================================
def episode_rows(run_dir, up_to_step=None) -> list[dict]:
    """The one reader of RUN_DIR/episodes.csv: its rows as dicts of the header's columns (strings), up to global step
    ``up_to_step`` when given (a resumed run drops those after its checkpoint); none when there is no file yet."""
    path = Path(run_dir) / EPISODES_CSV
    if not path.is_file():
        return []
    with open(path) as f:
        return [row for row in csv.DictReader(f) if up_to_step is None or int(row["global_step"]) <= up_to_step]


def read_episodes(run_dir, up_to_step=None):
    """Episodes logged so far (global_step, return, length, policy: "" for a game of one policy), up to
    ``up_to_step``."""
    return [_episode(row) for row in episode_rows(run_dir, up_to_step)]


def _episode(row: dict) -> tuple:
    return int(row["global_step"]), float(row["return"]), int(row["length"]), row.get("policy") or ""


class RunLog:
    """What a run records besides its checkpoints: TensorBoard events (``writer``), episodes.csv, the mean return
    of the last 100 episodes, and progress (a tqdm bar on a terminal, else a status line every 1/20 of the run).

    ``global_step``: where the run starts (a resumed run drops the events and episodes logged after it);
    ``hyperparameters``: the table logged as text at the start of a new run; ``policies``: a game with several
    policies, whose episodes are logged apart (TensorBoard tags under each name, a "policy" column in episodes.csv);
    ``columns``: episodes.csv's columns after those (e.g. the curriculum's lesson and parameter values).
    """

    def __init__(self, run_dir, global_step, resumed, hyperparameters, policies=None, columns=()):
        from torch.utils.tensorboard import SummaryWriter

        self.run_dir = Path(run_dir)
        self.pbar = self.episodes_file = None
        _quiet_event_writer_thread()
        # resuming: hide the events the interrupted process logged after the checkpoint (steps > global_step)
        self.writer = SummaryWriter(str(run_dir), purge_step=global_step + 1 if resumed else None)
        try:
            if not resumed:
                self.writer.add_text(
                    "hyperparameters",
                    "|param|value|\n|-|-|\n%s" % "\n".join(f"|{k}|{v}|" for k, v in hyperparameters.items()),
                )
            rows = episode_rows(self.run_dir, global_step)
            episodes = [_episode(row) for row in rows]
            self.policies = list(policies or [])
            header = ("global_step", "return", "length", *(("policy",) if self.policies else ()), *columns)
            kept = [[row.get(name) or "" for name in header] for row in rows]  # empty where a row has no such column
            # rewritten without rows past the checkpoint, atomically: a full disk keeps the previous file
            with atomic_output(self.run_dir / EPISODES_CSV) as tmp, open(tmp, "w", newline="") as f:
                csv.writer(f).writerows([header, *kept])
            self.episodes_file = open(self.run_dir / EPISODES_CSV, "a", newline="")
            self.episodes_csv = csv.writer(self.episodes_file)
            self.recent = {name: deque((r[1] for r in episodes if r[3] == name), maxlen=100)
                           for name in self.policies or [""]}
        except BaseException:
            self.close()
            raise

    def start_progress(self, total, initial, desc, num_iterations):
        from tqdm import tqdm

        self.pbar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, desc=desc, disable=None)
        self.status_every = max(1, num_iterations // 20)
        self.num_iterations = num_iterations

    def record_episodes(self, infos, global_step, tag="", extra=None):
        """The episodes that ended at this step (gymnasium's infos["episode"] / infos["_episode"]), and the numeric
        values of their final infos (a Godot controller's get_info(), e.g. a success flag) as episode_info/<key>.
        ``tag``: "<policy>/" for one policy's episodes in a game of several ("" otherwise); ``extra``: each episode's
        values of the extra columns, in the order of its ended episodes."""
        if "_final_info" in infos:
            for i in np.flatnonzero(infos["_final_info"]):
                for key, value in (infos["final_info"][i] or {}).items():
                    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value):
                        self.writer.add_scalar(f"{tag}episode_info/{key}", float(value), global_step)
        if "_episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                ep_r, ep_l = float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])
                self.writer.add_scalar(f"{tag}charts/episodic_return", ep_r, global_step)
                self.writer.add_scalar(f"{tag}charts/episodic_length", ep_l, global_step)
                policy = tag[:-1]
                self.episodes_csv.writerow((global_step, ep_r, ep_l, *((policy,) if self.policies else ()),
                                            *(extra.pop(0) if extra else ())))
                self.recent[policy].append(ep_r)

    def flush_episodes(self):
        self.episodes_file.flush()

    def progress(self, global_step, iteration, sps, extra=""):  # extra: appended (the last evaluation, the Elo)
        means = {name: float(np.mean(r)) if r else float("nan") for name, r in self.recent.items()}
        self.pbar.update(global_step - self.pbar.n)
        if not self.policies:
            self.pbar.set_postfix(SPS=sps, ret100=f"{means['']:.1f}", refresh=False)
        else:
            self.pbar.set_postfix(SPS=sps, **{f"ret100_{name}": f"{m:.2f}" for name, m in means.items()}, refresh=False)
        if self.pbar.disable and (iteration % self.status_every == 0 or iteration == self.num_iterations):
            returns = (f"mean_return(last 100)={means['']:.1f}" if not self.policies else
                       " ".join(f"mean_return_{name}(last 100)={m:.2f}" for name, m in means.items()))
            print(f"global_step={global_step} SPS={sps} {returns}{' ' + extra if extra else ''}", flush=True)

    def close_progress(self):
        if self.pbar is not None:
            self.pbar.close()

    def plot(self, eval_return=None):
        """learning_curve.png from episodes.csv (flushed first)."""
        self.episodes_file.flush()
        plot_learning_curve(self.run_dir, eval_return, title=self.run_dir.name)

    def close(self):
        """Close episodes.csv and the TensorBoard writer; a full disk's error here was met (and said) already."""
        for close in ((self.episodes_file.close if self.episodes_file is not None else None), self.writer.close):
            try:
                if close is not None:
                    close()
            except OSError:
                pass


def _quiet_event_writer_thread():
    """TensorBoard's SummaryWriter writes its events from a thread of its own. An OSError there (a full disk) is
    raised again in the training thread by its next add_scalar / flush, where training stops with one line; Python's
    default hook would also print the writer thread's traceback, so that one is dropped. Installed once."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "godot_ppo", False):
        return

    def hook(args):
        if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
            return  # tensorboard's writer thread: its error reaches the training thread
        previous(args)

    hook.godot_ppo = True
    threading.excepthook = hook


def plot_learning_curve(run_dir, eval_return=None, title=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_episodes(run_dir)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if rows:
        for policy in dict.fromkeys(r[3] for r in rows):  # a game with several policies: one curve each
            mine = [r for r in rows if r[3] == policy]
            steps, rets = np.array([r[0] for r in mine]), np.array([r[1] for r in mine])
            name = f"{policy}: " if policy else ""
            ax.plot(steps, rets, ".", alpha=0.25, markersize=3, label=f"{name}episodic return")
            window = min(100, len(rets))
            trailing = np.convolve(rets, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1 :], trailing, "-", label=f"{name}mean of last {window}")
    if eval_return is not None:
        ax.axhline(eval_return, color="k", ls="--", lw=1, label=f"deterministic eval: {eval_return:.1f}")
    ax.set_xlabel("global step")
    ax.set_ylabel("episodic return")
    ax.set_title(title or Path(run_dir).name, fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a run too short to finish an episode has nothing to label
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    try:
        with atomic_output(Path(run_dir) / "learning_curve.png") as tmp:  # keeps the suffix: matplotlib's format
            fig.savefig(tmp, dpi=100)
    finally:
        plt.close(fig)
