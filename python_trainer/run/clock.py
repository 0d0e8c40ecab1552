"""The run's wall clock: where each update's time went (the perf/* tags summed, the run's closing "time:" line), and
--max-seconds, a wall-clock budget beside --total-timesteps' steps: the share of it spent (the learning rate anneals
by the larger of the two shares), when it is spent, and the seconds a checkpoint keeps for --resume.

The budget's rule, stated once (docs/training.md, "A wall-clock budget"): the seconds count the training itself, from
the games' first reset to the end of each update, summed over every session of a resumed run (the start-up before and
the final checkpoint and evaluation after are not counted). Before each update the learning rate is
``(1 - max(steps share, time share)) * --learning-rate``. The run ends at the first of the two budgets: the steps'
when no whole batch fits in the steps left (checks.update_budget), the time's after the update that leaves less time
than that update took, so that a run goes past neither; it then ends as any run does, with its final checkpoint,
model.pt and evaluation.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from python_trainer.base.flags import positive

# A budget of seconds: any positive number (a week of training is 604800; unlike --step-timeout, no cap of a day).
MAX_SECONDS = positive("3600", "a number of seconds > 0 (the training's wall-clock budget)")


class Clock:
    """The training's seconds and the --max-seconds budget (``max_seconds`` None: no budget, a share of 0).
    ``saved``: a resumed checkpoint's "clock" (state_dict: the seconds of the sessions before, and the last update's);
    ``now``: the clock (monotonic)."""

    def __init__(self, max_seconds: Optional[float], saved: Optional[dict] = None,
                 now: Callable[[], float] = time.monotonic):
        self.max_seconds, self.now = max_seconds, now
        saved = saved or {}
        self.before, self.took = float(saved.get("seconds", 0.0)), float(saved.get("update_seconds", 0.0))
        self.started = self.mark = now()
        self.done = self.before  # the seconds at the end of the last completed update: what a checkpoint keeps

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the seconds up to the last completed update, and that update's."""
        return {"seconds": self.done, "update_seconds": self.took}

    def seconds(self) -> float:
        """The training's seconds so far, the sessions before this one's included."""
        return self.before + self.now() - self.started

    def share(self) -> float:
        """The share of --max-seconds spent, at most 1 (0 without a budget): ppo.iterations' ``time_share``."""
        return 0.0 if self.max_seconds is None else min(1.0, self.seconds() / self.max_seconds)

    def run_share(self, update: int, last_update: int) -> float:
        """The share of the run done after ``update`` of ``last_update``: the larger of the updates' and the time's."""
        return max(update / max(1, last_update), self.share())

    def spent(self) -> bool:
        """Whether a resumed run's budget was spent already, by the same rule (its last update's seconds)."""
        return self.max_seconds is not None and self.before + self.took >= self.max_seconds

    def update_done(self) -> bool:
        """At the end of each update: records its seconds; True when the time left is less than that update took
        (the run ends there)."""
        now = self.now()
        self.took, self.mark = now - self.mark, now
        self.done = self.seconds()
        return self.max_seconds is not None and self.done + self.took >= self.max_seconds

    def end_line(self, global_step: int, total_timesteps: int) -> str:
        """What is said when the time budget ends a run."""
        return (f"--max-seconds {self.max_seconds:g}: the time budget is spent ({self.done:.1f} s of training) at "
                f"global step {global_step} of --total-timesteps {total_timesteps}: the final checkpoint and evaluation "
                "follow")


def perf_scalars(its) -> dict:
    """The update's perf/* tags: the rollout (collected once, by the first policy's iteration) and each policy's
    update, summed over the policies."""
    perf = {k: v for k, v in its[0].scalars.items() if k.startswith("perf/")}
    for it in its[1:]:
        perf["perf/rollout_s"] += it.scalars["perf/rollout_s"]
        perf["perf/update_s"] += it.scalars["perf/update_s"]
    return perf


class TimeShares:
    """Where the updates' wall-clock time went (the perf/* tags, summed): the rollout (of which acting and waiting
    for the games), the update epochs, and everything else (GAE, logging, checkpoints). With --async the rollout is
    the learner's wait for a collection that ran beside its update: acting and waiting for the games are then
    shares of the collection's own time (buf.beside_s), as they are not parts of the learner's."""

    def __init__(self):
        self.updates, self.group_steps = 0, 0
        self.seconds = dict.fromkeys(("rollout", "policy", "env_wait", "update", "other", "beside"), 0.0)

    def add(self, scalars: dict, wall_s: float, buf) -> float:
        """One update's perf/* scalars and its wall-clock time; returns its perf/other_s."""
        other = max(0.0, wall_s - scalars["perf/rollout_s"] - scalars["perf/update_s"])
        for name in ("rollout", "policy", "env_wait", "update"):
            self.seconds[name] += scalars[f"perf/{name}_s"]
        self.seconds["other"] += other
        self.seconds["beside"] += buf.beside_s
        self.updates, self.group_steps = self.updates + 1, self.group_steps + buf.group_steps
        return other

    def summary(self, batch_size: int, group_size: int) -> str:
        s, total = self.seconds, sum(self.seconds[k] for k in ("rollout", "update", "other")) or 1e-9
        acting_us = 1e6 * s["policy"] / max(1, self.group_steps)
        per_step = (f"acting {acting_us:.0f} us per step of {group_size} envs, update "
                    f"{1e3 * s['update'] / self.updates:.0f} ms per {batch_size} samples")
        if s["beside"]:
            return (f"time: waiting for the collection {s['rollout'] / total:.0%}, update {s['update'] / total:.0%}, "
                    f"other {s['other'] / total:.0%} of {total:.1f} s; the collection, beside them: acting "
                    f"{s['policy'] / s['beside']:.0%}, waiting for the envs {s['env_wait'] / s['beside']:.0%} of its "
                    f"{s['beside']:.1f} s; {per_step}")
        return (f"time: rollout {s['rollout'] / total:.0%} (acting {s['policy'] / total:.0%}, waiting for the envs "
                f"{s['env_wait'] / total:.0%}), update {s['update'] / total:.0%}, other {s['other'] / total:.0%} of "
                f"{total:.1f} s; {per_step}")
