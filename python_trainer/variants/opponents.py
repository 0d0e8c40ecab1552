"""--opponents KIND:SHARE[,KIND:SHARE...]: the kinds of opponent --self-play draws at each swap, and their shares.

KIND is ``pool`` (the snapshots of the learner's past policy, self_play.py), ``scripted`` (the game's controllers'
get_scripted_action()), ``random`` (random actions) or ``file=PATH`` (a policy file, run by the game; a path without
commas, repeat ``file=`` for several). SHARE is a number >= 0; the shares are normalised. All but ``pool`` are played
by the game itself (envs/drivers.py), so a game refuses ``scripted`` when its controllers have no scripted opponent.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from python_trainer.base.combinations import refusal
from python_trainer.base.errors import UserError
from python_trainer.base.flags import Rule
from python_trainer.envs.drivers import POLICY, RANDOM, SCRIPTED, SCRIPTED_KEY

POOL, FILE = "pool", "file="
KINDS = (POOL, SCRIPTED, RANDOM)  # and FILE + PATH


def _split(text: str) -> list:
    """[(kind, path or None, share)], the shares as given; ValueError saying what is wrong."""
    out = []
    for part in str(text).split(","):
        kind, sep, share = part.strip().rpartition(":")
        if not sep or not kind:
            raise ValueError(f"{part.strip()!r} has no :SHARE")
        try:
            value = float(share)
        except ValueError:
            raise ValueError(f"{part.strip()!r}'s share is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{part.strip()!r}'s share is not a number >= 0")
        if kind.startswith(FILE) and kind[len(FILE):].strip():
            out.append((POLICY, kind[len(FILE):].strip(), value))
        elif kind in KINDS:
            out.append((kind, None, value))
        else:
            raise ValueError(f"{kind!r} is not a kind of opponent")
    if sum(s for _, _, s in out) <= 0:
        raise ValueError("the shares sum to 0")
    return out


def _parses(text) -> bool:
    try:
        _split(text)
    except ValueError:
        return False
    return True


OPPONENTS_RULE = Rule(_parses, "KIND:SHARE[,KIND:SHARE...] with KIND pool, scripted, random or file=PATH and shares >= 0, "
                               "not all 0", "scripted:0.2,pool:0.8")


def parse_opponents(text: str) -> list:
    """[(kind, path or None, share)], the shares normalised to sum to 1 (kind: pool, scripted, random, or
    drivers.POLICY for file=PATH)."""
    parts = _split(text)
    total = sum(s for _, _, s in parts)
    return [(kind, path, share / total) for kind, path, share in parts if share > 0]


def draw_opponent(opponents: list, rng: np.random.Generator) -> tuple:
    """(kind, path) drawn by the shares; with one kind, that kind, and ``rng`` untouched (so that --self-play alone
    draws its snapshots as it always did)."""
    if len(opponents) == 1:
        return opponents[0][:2]
    u, acc = rng.random(), 0.0
    for kind, path, share in opponents:
        acc += share
        if u < acc:
            return kind, path
    return opponents[-1][:2]


def check_opponents(opponents: list, info: dict, env_id: str) -> None:
    """A UserError, in one line, when the game cannot play an opponent of ``opponents`` (``info``: every instance's
    env_info, self_play.agents_info)."""
    kinds = {kind for kind, _, _ in opponents}
    if kinds == {POOL}:
        return
    scripted = info.get(SCRIPTED_KEY)
    if not isinstance(scripted, list):
        raise UserError(refusal("opponents/godot_rl", kinds="/".join(sorted(kinds - {POOL})), env_id=env_id))
    if SCRIPTED in kinds and not all(scripted):
        raise UserError(refusal("opponents/no_scripted", env_id=env_id))
    for kind, path, _ in opponents:
        if kind == POLICY and not Path(path).is_file():
            raise UserError(f"--opponents file={path}: no such policy file: give the policy.json of a run of {env_id} "
                            "(RUN_DIR/policy.json)")

