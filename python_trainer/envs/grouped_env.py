"""The interface the rollout steps every vector env through: groups of envs, each stepped on its own.

Both vector envs declare it (vec_env.GodotVecEnv, gym_env.GymVecEnv). ``groups`` lists the envs of each group as a
contiguous slice of the batch; ``step_async(actions, group)`` sends a group's actions (its size first) and returns,
``step_wait(group)`` returns ``step``'s tuple for the group's envs (same-step autoreset, ``final_obs`` /
``final_info``, episode statistics). A Godot env with two or more instances has two groups (the first half of its
instances and the rest), so one group simulates while the trainer chooses the other's actions (rollout.py); a
gymnasium env, or one instance, has one.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]  # obs, reward, terminated, truncated, infos


@runtime_checkable
class GroupedVecEnv(Protocol):
    num_envs: int
    groups: list[slice]

    def step_async(self, actions: Any, group: int) -> None:
        """Send the actions of ``group``'s envs; returns at once."""
        ...

    def step_wait(self, group: int) -> StepResult:
        """``step``'s tuple for ``group``'s envs, for the actions step_async sent."""
        ...
