"""When it does not learn, the trainer says so: a one-line warning, each at most once a run, when the critic predicts
nothing, the updates hardly move the policy, the entropy collapsed or climbed back, the evaluation stopped improving, the deterministic policy plays far
below its training episodes (a stuck argmax), or the returns are far outside the reward scale. Each names the likely
cause and the flag to try.

The rules are pure functions over the history the run logs already (each update's losses/explained_variance and
losses/entropy, the last 100 episodes' returns, the evaluations); their thresholds are the constants below, which
docs/training.md ("When it does not learn") states and tests/test_diagnosis.py holds it to. A `Diagnosis` per policy
keeps that history and says each warning once; the run's logging calls it with the numbers it has computed, so the
step loop does no extra work. A resumed run's session starts the history again.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

# The critic: the explained variance's median over the last EV_UPDATES updates is <= 0 (at least half of them finite:
# a rollout whose returns are all equal has none), and so is its median over the whole run so far (a critic that had
# learned and then sees returns that hardly vary, as cart_pole's at its time limit, is not blind).
EV_UPDATES = 50
# Timid updates: over the last KL_UPDATES updates, within the first TIMID_BEFORE of the run (the learning rate's
# annealing makes every late update small), the median of losses/approx_kl is below KL_TINY and that of
# losses/clipfrac below CLIPFRAC_TINY: PPO's clip, made for changes of about 0.01-0.02 nats, never acts. Dodge the
# Creeps at train's defaults: approx_kl 0.0015 and clipfrac 0 for 1,000 updates, its policy fixed on a corner.
KL_UPDATES = 50
KL_TINY = 0.002
CLIPFRAC_TINY = 0.01
TIMID_BEFORE = 0.5
# The entropy, read as the means of ENTROPY_WINDOW updates (its start: the first window's). A collapse: the last
# window's mean is below COLLAPSE_SHARE of the start's (a start > 0) while at most COLLAPSE_BEFORE of the run is done.
# A climb back: after a fall of at least REBOUND_FALL nats from the start to the lowest window, the last window is
# back up by at least REBOUND_SHARE of that fall.
ENTROPY_WINDOW = 10
COLLAPSE_SHARE = 0.1
COLLAPSE_BEFORE = 0.25
REBOUND_FALL = 0.2
REBOUND_SHARE = 1 / 3
# The evaluation: with at least EVAL_MIN evaluations, the best of those in the last STALL_SHARE of the run's steps so
# far (at least 2) is no better than the best before them (unless they all equal it: a policy at its ceiling).
EVAL_MIN = 6
STALL_SHARE = 1 / 3
# A stuck argmax: the deterministic evaluation's mean return is below the training episodes' (at least
# MIN_EPISODES of the last 100) by more than ARGMAX_GAP of their mean's size and more than their standard deviation
# (or below the sampled evaluation's by ARGMAX_GAP of its size, when the run evaluates both).
ARGMAX_GAP = 0.5
MIN_EPISODES = 20
# The reward scale: the mean size of the last 100 episodes' returns (at least MIN_EPISODES) above RETURN_HIGH, or
# not 0 and below RETURN_LOW, without --norm-reward.
RETURN_HIGH = 1000.0
RETURN_LOW = 0.01

PAGE = 'docs/training.md, "When it does not learn"'


def critic_blind(explained: Sequence[float]) -> Optional[float]:
    """The explained variance's median over the last EV_UPDATES updates when it and the whole run's are <= 0, else
    None."""
    every = np.asarray(explained, np.float64)
    recent = every[-EV_UPDATES:]
    finite = recent[np.isfinite(recent)]
    if len(recent) < EV_UPDATES or 2 * len(finite) < EV_UPDATES:
        return None
    median = float(np.median(finite))
    return median if median <= 0 and np.median(every[np.isfinite(every)]) <= 0 else None


def timid_updates(kl: Sequence[float], clipfrac: Sequence[float], run_share: float) -> Optional[tuple[float, float]]:
    """(approx_kl's median, clipfrac's) over the last KL_UPDATES updates when both are tiny early in the run, else
    None."""
    if run_share > TIMID_BEFORE or len(kl) < KL_UPDATES or len(clipfrac) < KL_UPDATES:
        return None
    median_kl, median_clip = float(np.median(kl[-KL_UPDATES:])), float(np.median(clipfrac[-KL_UPDATES:]))
    return (median_kl, median_clip) if median_kl < KL_TINY and median_clip < CLIPFRAC_TINY else None


def _windows(entropy: Sequence[float]) -> np.ndarray:
    """The means of consecutive windows of ENTROPY_WINDOW updates (the last, partial one left out)."""
    n = len(entropy) // ENTROPY_WINDOW * ENTROPY_WINDOW
    return np.asarray(entropy[:n], np.float64).reshape(-1, ENTROPY_WINDOW).mean(axis=1)


def entropy_collapse(entropy: Sequence[float], run_share: float) -> Optional[tuple[float, float]]:
    """(the start's entropy, the last window's) when the entropy collapsed early in the run (``run_share``: the share
    of the run done), else None."""
    if run_share > COLLAPSE_BEFORE or len(entropy) < 2 * ENTROPY_WINDOW:
        return None
    means = _windows(entropy[: 2 * ENTROPY_WINDOW])
    if means[0] <= 0:
        return None
    start, now = float(means[0]), float(np.mean(entropy[-ENTROPY_WINDOW:]))
    return (start, now) if now < COLLAPSE_SHARE * start else None


def entropy_rebound(entropy: Sequence[float]) -> Optional[tuple[float, float, float]]:
    """(the start's entropy, the lowest window's, the last window's) when it climbed back after falling, else None."""
    means = _windows(entropy)
    if len(means) < 3:
        return None
    start, low, now = float(means[0]), float(means[:-1].min()), float(means[-1])
    fall = start - low
    return (start, low, now) if fall >= REBOUND_FALL and now - low >= REBOUND_SHARE * fall else None


def evaluation_stalled(scores: Sequence[tuple[int, float]]) -> Optional[tuple[float, float]]:
    """(the best score before the last third of the run, the best in it) when the evaluations have not improved over
    the last STALL_SHARE of the run so far, else None. ``scores``: [(global_step, score)], oldest first, a score per
    evaluation (evaluation.py's: the win rate against the scripted opponent, else the mean return)."""
    if len(scores) < EVAL_MIN:
        return None
    steps, values = np.array([s for s, _ in scores], np.float64), np.array([v for _, v in scores], np.float64)
    last = steps > (1 - STALL_SHARE) * steps[-1]
    if last.sum() < 2 or last.all():
        return None
    before, recent = float(values[~last].max()), values[last]
    if recent.max() > before or np.all(recent == before):
        return None
    return before, float(recent.max())


def stuck_argmax(deterministic: float, returns: Sequence[float], sampled: Optional[float] = None) -> Optional[float]:
    """The return the deterministic mean is far below (the sampled evaluation's when given, else the training
    episodes' mean), or None."""
    if sampled is not None:
        return sampled if sampled - deterministic > ARGMAX_GAP * abs(sampled) else None
    if len(returns) < MIN_EPISODES:
        return None
    mean, std = float(np.mean(returns)), float(np.std(returns))
    gap = mean - deterministic
    if max(ARGMAX_GAP * abs(mean), std) == 0:
        return None  # no scale to judge by
    return mean if gap > ARGMAX_GAP * abs(mean) and gap > std else None


def off_scale(returns: Sequence[float]) -> Optional[float]:
    """The mean size of the returns when it is far outside the reward scale, else None."""
    if len(returns) < MIN_EPISODES:
        return None
    size = float(np.mean(np.abs(returns)))
    return size if size > RETURN_HIGH or 0 < size < RETURN_LOW else None


class Diagnosis:
    """One policy's history and its warnings, each said at most once (``say``). ``tag``: "" for a game's only
    policy, "<policy>/" otherwise; ``ent_coef``: the run's, named in the entropy's warnings; ``norm_reward``:
    whether rewards are scaled (then the returns' size does not matter to the critic); ``returns``: the last
    episodes' returns, as the run's log keeps them (RunLog.recent's, which it fills); ``learning_rate`` and
    ``update_epochs``: the run's, named in the timid updates' warning."""

    def __init__(self, tag: str = "", say: Optional[Callable[[str], None]] = None, ent_coef: float = 0.01,
                 norm_reward: bool = False, returns: Sequence[float] = (), learning_rate: float = 2.5e-4,
                 update_epochs: int = 4):
        self.whose = f"policy {tag[:-1]!r}: " if tag else ""
        self.say, self.ent_coef, self.norm_reward, self.returns = say, ent_coef, norm_reward, returns
        self.learning_rate, self.update_epochs = learning_rate, update_epochs
        self.explained: list = []
        self.entropy: list = []
        self.kl: list = []
        self.clipfrac: list = []
        self.said: set = set()
        self.evaluations = 0  # how many of the run's evaluations were read

    def warn(self, kind: str, line: str) -> None:
        if kind not in self.said:
            self.said.add(kind)
            if self.say is not None:
                self.say(f"warning: {self.whose}{line}: {PAGE}")

    def update(self, scalars: dict, run_share: float) -> None:
        """After each update: its scalars (ppo.Iteration.scalars) and the share of the run done (clock.py's
        run_share)."""
        returns = self.returns
        self.explained.append(scalars.get("losses/explained_variance", np.nan))
        self.entropy.append(scalars["losses/entropy"])
        self.kl.append(scalars.get("losses/approx_kl", np.nan))
        self.clipfrac.append(scalars.get("losses/clipfrac", np.nan))
        every_window = len(self.entropy) % ENTROPY_WINDOW == 0  # the rules over the whole history: once a window
        if "critic" not in self.said and every_window and (median := critic_blind(self.explained)) is not None:
            self.warn("critic", f"the explained variance has a median of {median:.2f} over the last {EV_UPDATES} "
                      "updates (losses/explained_variance): the critic predicts nothing of the returns. Likely rewards "
                      "of the wrong scale (try --norm-reward), observations that miss what the reward depends on, or a "
                      "game that needs memory (try --lstm)")
        if "timid" not in self.said and (small := timid_updates(self.kl, self.clipfrac, run_share)) is not None:
            self.warn("timid", f"the updates hardly move the policy: losses/approx_kl has a median of {small[0]:.4f} "
                      f"and losses/clipfrac {small[1]:.3f} over the last {KL_UPDATES} updates, where PPO's clip acts "
                      "at about 0.01-0.02; a policy that cannot change fast enough keeps its first habit. Raise "
                      f"--learning-rate (now {self.learning_rate:g}) or --update-epochs (now {self.update_epochs})")
        if "collapse" not in self.said and (fell := entropy_collapse(self.entropy, run_share)) is not None:
            self.warn("collapse", f"the policy's entropy fell from {fell[0]:.2f} to {fell[1]:.2f} in the first "
                      f"{run_share:.0%} of the run (losses/entropy): it stopped exploring before it learned; raise "
                      f"--ent-coef (now {self.ent_coef:g})")
        if "rebound" not in self.said and every_window:
            rose = entropy_rebound(self.entropy)
            if rose is not None:
                self.warn("rebound", f"the policy's entropy climbed back to {rose[2]:.2f} after falling from "
                          f"{rose[0]:.2f} to {rose[1]:.2f} (losses/entropy): its updates no longer agree on what to "
                          f"do, and the entropy bonus pulls it back; lower --ent-coef (now {self.ent_coef:g}), or give "
                          "each update more steps (--num-steps)")
        if "scale" not in self.said and not self.norm_reward and (size := off_scale(returns)) is not None:
            self.warn("scale", f"the episodes' returns are {size:.3g} in size on average (the last {len(returns)}): "
                      "far outside the scale the critic learns well, a success of about 1. Try --norm-reward, or "
                      "scale the game's rewards")

    def evaluated(self, deterministic: float, sampled: Optional[float] = None, where: str = "eval/episodic_return"):
        """A deterministic evaluation's mean return (``where``: its tag) against the training episodes' returns (or
        the sampled evaluation's mean)."""
        returns = self.returns
        if "argmax" in self.said or (against := stuck_argmax(deterministic, returns, sampled)) is None:
            return
        what = "the sampled policy's" if sampled is not None else f"its training episodes' (the last {len(returns)})"
        self.warn("argmax", f"the deterministic policy's mean return {deterministic:.3g} ({where}) is far below "
                  f"{what} {against:.3g}: its most likely action is not the one that works (a stuck argmax; a "
                  "deterministic game replays it every episode). Evaluate it sampled (--eval-sample) and with "
                  "randomised starts (--eval-noop-max), or train on so that it commits (a lower --ent-coef, "
                  f"now {self.ent_coef:g})")

    def evaluations_so_far(self, history: list, score: Callable[[dict], Optional[float]]) -> None:
        """The run's periodic evaluations (evaluation.py's ``history``: [(global_step, {tag: value})], oldest first,
        and its ``score``): a stall over the last third of the run, and each new one-team evaluation's deterministic
        return against the training episodes' (or the sampled evaluation's)."""
        if len(history) == self.evaluations:
            return
        for step, tags in history[self.evaluations :]:
            if "eval/random/baseline_return" in tags:  # a game of one team: the policy's own return
                self.evaluated(tags["eval/random/mean_return"], tags.get("eval_sampled/random/mean_return"),
                               "eval/random/mean_return")
        self.evaluations = len(history)
        scores = [(step, s) for step, tags in history if (s := score(tags)) is not None]
        if "stall" not in self.said and (stall := evaluation_stalled(scores)) is not None:
            self.warn("stall", f"the evaluation has not improved over the last third of the run: its best there is "
                      f"{stall[1]:.3g}, against {stall[0]:.3g} before: a plateau, where more of the same buys little. "
                      "Try more steps per update (--num-steps), more exploration (--ent-coef), a lower "
                      "--learning-rate when losses/approx_kl is large (a higher one when it is tiny), or stop the run")
