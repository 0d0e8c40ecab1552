"""--eval-every N: the policy evaluated while it trains, in a headless game of its own, against fixed yardsticks
(random play; in a game of two teams also the game's scripted opponent and the self-play pool's oldest and newest
snapshots), one evaluation at a time on a thread beside training, and RUN_DIR/best/, the snapshot with the best
deterministic result.

Every N learner steps the run writes the policy as it is (RUN_DIR/eval/pending/: model.pt and policy.json) and the
engine plays it (engine/in_engine.py: evaluate_in_engine, play_matches) on held-out seeds, the same ones each time.
An evaluation still running when the next is due delays it; the run's end waits for it, then evaluates the final
policy. Tags: ``eval/<yardstick>/mean_return`` (the policy's mean return with that yardstick on the other side; a game
of one team: its own return, random play's beside it as ``eval/random/baseline_return``), and in a game of two teams
``eval/<yardstick>/win_rate`` (wins over decided matches) and ``eval/<yardstick>/decided``. ``Evaluations.history``
is every result, [(global_step, {tag: value})], oldest first (diagnosis.py reads it).
"""

from __future__ import annotations

import copy
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from python_trainer.base.contract import arg
from python_trainer.base.errors import one_line
from python_trainer.base.files import write_atomic
from python_trainer.base.flags import GoesWith, at_least, flag
from python_trainer.base.processes import descendants, end_process_tree
from python_trainer.engine.in_engine import (
    RANDOM_POLICY, PlaybackError, evaluate_in_engine, play_matches, trained_env_params,
)
from python_trainer.checkpoint import MODEL_NAME
from python_trainer.engine.policy_file import POLICY_NAME, game_policy, write_policy
from python_trainer.run.run_folder import TrainError

EVAL_DIR = "eval"  # RUN_DIR/eval/pending/: the snapshot under evaluation; RUN_DIR/eval/pool_*.json: pool yardsticks
BEST_DIR = "best"  # RUN_DIR/best/: model.pt, policy.json and evaluation.json (the result that made it the best)
BEST_RESULT = "evaluation.json"
SCRIPTED = "scripted"
EVAL_SEED_OFFSET = 50_000  # the periodic evaluations' seeds: held out from training's and the final evaluation's
# The most agents an evaluation's game plays at once: one for each episode (two for each match), so that the episodes
# run side by side in one round (a game of fixed agents keeps its own number).
ENGINE_AGENTS = 64


_WITH_EVAL = GoesWith("eval_every", "the evaluations while training", "--eval-every N")


@dataclass
class EvalArgs:
    eval_every: int = flag(0, at_least(0, "an integer >= 0 (learner steps; 0: no evaluation while training)", "100000"))
    """Godot games: evaluate the policy every this many learner steps (global_step) and once at the end, in a headless
    game of its own beside training, against random play (two teams: also the scripted opponent and the self-play
    pool's oldest and newest snapshots); tags eval/<yardstick>/..., the best snapshot in RUN_DIR/best/ (0: off)"""
    eval_every_episodes: int = flag(20, at_least(1, "an integer >= 1", "20"), goes_with=_WITH_EVAL)
    """with --eval-every: episodes (matches) per yardstick of each evaluation, on held-out seeds"""
    eval_sample: bool = flag(False, goes_with=_WITH_EVAL)
    """with --eval-every: also evaluate the sampled policy (actions drawn from its distributions: the engine's
    --policy_sample), as eval_sampled/<yardstick>/...; the deterministic one (argmax / mean) is always played"""
    eval_noop_max: int = flag(0, at_least(0, "an integer >= 0 (decisions)", "30"), goes_with=_WITH_EVAL)
    """with --eval-every: randomised starts for a deterministic game: each evaluated episode begins with a number of
    decisions drawn from its seed in [0, K], played with the controller's get_noop_action() (random actions without
    one)"""


def two_teams(env_info: Optional[dict]) -> bool:
    """A game whose agents are split into teams 0 and 1 (matches: play_matches)."""
    teams = (env_info or {}).get("agent_teams")
    return isinstance(teams, list) and sorted(set(teams)) == [0, 1]


class Evaluations:
    """The periodic evaluations of one run. ``snapshot(folder)`` writes the policy as it is now into ``folder``
    (model.pt and policy.json): the run's checkpoint function."""

    def __init__(self, run, say: Callable):
        args = self.args = run.args
        self.env_info, self.run_dir, self.writer, self.say = run.env_info, Path(run.run_dir), run.writer, say
        self.snapshot = lambda folder: run.checkpoint(folder / MODEL_NAME, run.done_step, run.done_update, folder)
        self.pool, self.like = (run.rollouts if args.self_play else None), run.first.agent
        self.every = args.eval_every
        if self.every and (self.env_info is None or run.policy_set is not None):
            raise TrainError("--eval-every plays the policy in the game's engine: a Godot game of one policy only "
                            f"({args.env_id} is not); drop --eval-every and use --eval-episodes")
        self.next_step = (run.global_step // self.every + 1) * self.every if self.every else None
        self.history: list = []  # [(global_step, {tag: value})], oldest first
        self.seconds = 0.0  # wall-clock time the evaluations took (beside training)
        self.teams = two_teams(self.env_info)
        self.yardsticks = [RANDOM_POLICY, SCRIPTED] if self.teams else [RANDOM_POLICY]
        self.baseline: Optional[float] = None  # random play's return (one team), played once
        self.pending = self.run_dir / EVAL_DIR / "pending"
        self._thread: Optional[threading.Thread] = None
        self._result = None  # (global_step, tags, seconds) or (global_step, exception, seconds), set by the thread
        self._stop = False
        self.best_score = _saved_best(self.run_dir / BEST_DIR / BEST_RESULT)
        self.env_params = trained_env_params(self.run_dir)  # the run's --env-param constants (its args.json)

    # ---- while training -----------------------------------------------------------------------------------------------
    def after_update(self, global_step: int, tags: dict) -> str:
        """Called after each update (``tags``: its scalars): a finished evaluation is logged; a due one starts when none
        is running. Returns what the progress line appends: the last evaluation and the self-play Elo (``progress``)."""
        self.collect()
        if self.every and global_step >= self.next_step and self._thread is None:
            self.next_step = (global_step // self.every + 1) * self.every
            self.start(global_step)
        return self.progress(tags.get("self_play/elo"))

    def start(self, global_step: int) -> None:
        if self.pending.exists():
            shutil.rmtree(self.pending, ignore_errors=True)
        self.pending.mkdir(parents=True, exist_ok=True)
        self.snapshot(self.pending)
        opponents = {y: y for y in self.yardsticks}
        opponents.update(self._pool_policies())
        self._thread = threading.Thread(target=self._run, args=(global_step, opponents), daemon=True,
                                        name="godot-ppo-evaluation")
        self._thread.start()

    def _pool_policies(self) -> dict:
        """Self-play: the pool's oldest and newest snapshots as policy files (yardsticks pool_oldest, pool_newest)."""
        import torch

        from python_trainer.normalization import Normalizer

        entries = list(getattr(self.pool, "pool", None) or [])
        if not self.teams or not entries or self.like is None:
            return {}
        out = {}
        for name, entry in (("pool_oldest", entries[0]), ("pool_newest", entries[-1])):
            path = self.run_dir / EVAL_DIR / f"{name}.json"
            try:
                state = torch.load(self.pool.pool_dir / entry["file"], map_location="cpu", weights_only=True)
                agent = copy.deepcopy(self.like)
                agent.load_state_dict(state["model"])
                normalizer = Normalizer.frozen(state["normalizer"])
                write_policy(path, game_policy(agent, normalizer, self.pool.single_action_space, self.env_info,
                                               env_id=self.args.env_id, source={"pool": entry["file"]},
                                               where=entry["file"]))
                out[name] = str(path)
            except Exception as e:  # a snapshot gone or unreadable: that yardstick sits this evaluation out
                self.say(f"godot-ppo: warning: --eval-every: the pool's {entry['file']} not evaluated ({one_line(e)})")
        return out

    def _run(self, global_step: int, opponents: dict) -> None:
        begun = time.perf_counter()
        try:
            tags = self.play(self.pending / POLICY_NAME, opponents)
            self._result = (global_step, tags, time.perf_counter() - begun)
        except Exception as e:
            self._result = (global_step, e, time.perf_counter() - begun)

    def play(self, policy: Path, opponents: dict) -> dict:
        """One evaluation: {tag: value}. The deterministic policy, and with --eval-sample the sampled one too."""
        args, tags = self.args, {}
        for sample in (False, True) if args.eval_sample else (False,):
            prefix = "eval_sampled/" if sample else "eval/"
            agents = min(ENGINE_AGENTS, args.eval_every_episodes * (2 if self.teams else 1))
            common = dict(episodes=args.eval_every_episodes, seed=args.seed + EVAL_SEED_OFFSET, agents=agents,
                          sample=sample, noop_max=args.eval_noop_max)
            if not self.teams:
                report = evaluate_in_engine(policy, env_params=self.env_params, **common)
                tags[prefix + "random/mean_return"] = float(report["mean_return"])
                if self.baseline is None:
                    base = evaluate_in_engine(RANDOM_POLICY, env_id=report["env"], env_path=_env_path(policy),
                                              env_params=self.env_params, **common)
                    self.baseline = float(base["mean_return"])
                tags[prefix + "random/baseline_return"] = self.baseline
                continue
            for name, opponent in list(opponents.items()):
                if self._stop:
                    break
                try:
                    report = play_matches(policy, opponent, **common)
                except PlaybackError as e:
                    if name == SCRIPTED and "scripted opponent" in str(e):  # the game has no get_scripted_action()
                        self.yardsticks.remove(SCRIPTED)
                        opponents.pop(name)
                        continue
                    raise
                decided = int(report["wins"]) + int(report["losses"])
                tags[f"{prefix}{name}/mean_return"] = float(report["mean_return"])
                tags[f"{prefix}{name}/decided"] = decided
                if decided:
                    tags[f"{prefix}{name}/win_rate"] = int(report["wins"]) / decided
        return tags

    def collect(self, wait: bool = False) -> None:
        """Log the evaluation that finished (``wait``: wait for the one running first)."""
        if self._thread is None or (self._thread.is_alive() and not wait):
            return
        self._thread.join()
        self._thread = None
        step, tags, seconds = self._result
        self.seconds += seconds
        if isinstance(tags, Exception):
            self.say(f"godot-ppo: warning: --eval-every: the evaluation at global step {step} failed: {one_line(tags)}")
            return
        for tag, value in tags.items():
            self.writer.add_scalar(tag, value, step)
        # one line a program can read (tune's pruner does): the step, then every tag=value of this evaluation
        print(f"evaluation: global_step={step} " + " ".join(f"{tag}={value:.6g}" for tag, value in tags.items()),
              flush=True)
        self.history.append((step, tags))
        score = self.score(tags)
        if score is not None and (self.best_score is None or score > self.best_score):
            self.best_score = score
            self._keep_best(step, tags, score)

    def score(self, tags: dict) -> Optional[float]:
        """What makes a snapshot the best: its deterministic win rate against the scripted opponent where the game has
        one, else its mean return (against random play)."""
        for tag in (f"eval/{SCRIPTED}/win_rate", f"eval/{RANDOM_POLICY}/mean_return"):
            if tag in tags:
                return float(tags[tag])
        return None

    def _keep_best(self, step: int, tags: dict, score: float) -> None:
        best, old = self.run_dir / BEST_DIR, self.run_dir / EVAL_DIR / "previous_best"
        write_atomic(self.pending / BEST_RESULT, json.dumps({"global_step": step, "score": score, "tags": tags}) + "\n")
        shutil.rmtree(old, ignore_errors=True)
        if best.exists():
            best.rename(old)
        self.pending.rename(best)
        shutil.rmtree(old, ignore_errors=True)

    # ---- the end ------------------------------------------------------------------------------------------------------
    def finish(self, global_step: int) -> None:
        """The run's end: the running evaluation waited for, then the final policy's (unless it was just evaluated)."""
        if not self.every:
            return
        self.collect(wait=True)
        if not self.history or self.history[-1][0] != global_step:
            self.start(global_step)
            self.collect(wait=True)
        shutil.rmtree(self.run_dir / EVAL_DIR, ignore_errors=True)

    def progress(self, elo: Optional[float] = None) -> str:
        """The last evaluation and the self-play Elo, for the progress line: ``eval(step N) scripted=W% elo=E``."""
        words = [] if elo is None else [f"elo={elo:.0f}"]
        if not self.history:
            return " ".join(words)
        step, tags = self.history[-1]
        for name in [RANDOM_POLICY, SCRIPTED, "pool_oldest", "pool_newest"]:
            if f"eval/{name}/win_rate" in tags:
                words.append(f"{name}={tags[f'eval/{name}/win_rate']:.0%}")
            elif f"eval/{name}/mean_return" in tags and not self.teams:
                words.append(f"{name}={tags[f'eval/{name}/mean_return']:.2f}")
        return f"eval(step {step}) " + " ".join(words[1:] + words[:1] if elo is not None else words)

    def say_share(self, run_seconds: float) -> None:
        """With --eval-every, the run's last line: how many evaluations, their time and its share of the run's."""
        if self.every:
            print(self.share_line(run_seconds), flush=True)

    def share_line(self, run_seconds: float) -> str:
        share = self.seconds / max(run_seconds, 1e-9)
        return (f"evaluations: {len(self.history)} in {self.seconds:.1f} s beside training, {share:.0%} of the run's"
                f" {run_seconds:.1f} s wall time; best: {self.run_dir / BEST_DIR}")

    def close(self) -> None:
        """A run stopped early: the evaluation's game is ended, its thread joined."""
        self._stop = True
        if self._thread is not None:
            games = [p.pid for p in descendants() if _mentions(p, arg("eval_episodes", ""))]  # only evaluations pass it
            end_process_tree(games)
            self._thread.join(timeout=10)


def _mentions(process, text: str) -> bool:
    try:
        return any(text in arg for arg in process.cmdline())
    except Exception:
        return False


def _env_path(policy: Path) -> Optional[str]:
    try:
        return (json.loads(Path(policy).read_text()).get("source") or {}).get("env_path")
    except (OSError, ValueError):
        return None


def _saved_best(path: Path) -> Optional[float]:
    """A resumed run's best score so far (RUN_DIR/best/evaluation.json), or None."""
    try:
        return float(json.loads(path.read_text())["score"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
