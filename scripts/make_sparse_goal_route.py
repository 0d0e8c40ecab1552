"""Writes exports/policies/sparse_goal_route.json: a hand-written driver for sparse_goal that the engine runs as a
policy file (--policy=FILE), the committed driver scripts/bench_demos.py records its demonstrations from.

It is a lookup table, not a trained network: one linear layer from the observation's one-hot grid cell (8 x 8 over
the room, observation values 10..73) to the five moves, argmax. The route (room.gd): in the bottom half go right
to the last column, up that column through the gap at the right end of the dividing wall into the top row, then left
along the top row, which passes the goal in the top-left corner (the top row keeps clear of the pillar by the goal).

    python scripts/make_sparse_goal_route.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "exports" / "policies" / "sparse_goal_route.json"
GRID, FIRST_CELL, OBS_SIZE = 8, 10, 74
STAY, UP, DOWN, LEFT, RIGHT = range(5)


def move(row: int, column: int) -> int:
    if row == 0:
        return LEFT
    if row >= 4 and column < GRID - 1:
        return RIGHT
    return UP


def main() -> None:
    weight = [[0.0] * OBS_SIZE for _ in range(5)]
    for row in range(GRID):
        for column in range(GRID):
            weight[move(row, column)][FIRST_CELL + row * GRID + column] = 1.0
    policy = {
        "format": "godot-ppo-policy", "version": 1, "env": "sparse_goal", "observation_size": OBS_SIZE,
        "action_keys": [{"key": "move", "action_type": "discrete", "size": 5}], "action_rule": "argmax",
        "obs_normalization": None,
        "layers": [{"weight": weight, "bias": [0.0] * 5, "activation": "linear"}],
        "lstm": None,
        "source": {"hand_written": "scripts/make_sparse_goal_route.py: right, up through the gap, left along the top"},
    }
    OUT.write_text(json.dumps(policy, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
