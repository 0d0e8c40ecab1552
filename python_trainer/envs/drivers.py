"""Who acts for which agents of a Godot game while it trains: the trainer, or the game itself (its scripted opponent, random actions, or a policy file it runs): our "drivers" message, the trainer's side.

The trainer sends each instance {"type": "drivers", "agents": [its agent indices], "driver": D, "path": FILE,
"seed": S}; from then on the game acts for those agents itself (D "scripted", "random", or "policy" with the policy
file FILE), or leaves them to the trainer again (D "trainer"). The trainer goes on sending an action for every agent;
the game overrides those of the agents it drives. The reply {"type": "drivers", "acted": N} counts the actions the
game chose so far. env_info's "agent_scripted" says, per agent, whether its controller has get_scripted_action().
godot_project/addons/rl_sync/driver_message.gd is the game's side; tests/test_opponents.py holds the two equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from python_trainer.base import contract

MESSAGE = contract.kind("drivers")  # contract.MESSAGES declares it and its fields (the keys below)
AGENTS_KEY = "agents"
DRIVER_KEY = "driver"
PATH_KEY = "path"
SEED_KEY = "seed"
ACTED_KEY = "acted"
TRAINER, SCRIPTED, RANDOM, POLICY = "trainer", "scripted", "random", "policy"
DRIVERS = (TRAINER, SCRIPTED, RANDOM, POLICY)
SCRIPTED_KEY = contract.SCRIPTED_KEY  # env_info: per agent, whether its controller has get_scripted_action()


def set_drivers(envs, agents: Sequence[int], driver: str, path: Optional[str] = None, seed: int = 0) -> int:
    """Make ``driver`` act for the vector env's agents ``agents`` (indices into its batch), in every instance of
    ``envs`` (a GodotVecEnv, or a wrapper that passes on its ``launcher``). Between steps only. Returns the actions
    the games chose for their agents so far, summed over the instances."""
    if driver not in DRIVERS:
        raise ValueError(f"set_drivers: driver {driver!r} is not one of {DRIVERS}")
    instances = envs.launcher.instances
    wanted = np.asarray(sorted(int(a) for a in agents), dtype=np.int64)
    acted, start = 0, 0
    for k, inst in enumerate(instances):
        n = int(inst.env_info["n_agents"])
        mine = wanted[(wanted >= start) & (wanted < start + n)] - start
        fields = {AGENTS_KEY: mine.tolist(), DRIVER_KEY: driver, SEED_KEY: int(seed) + k}
        if driver == POLICY:
            fields[PATH_KEY] = str(Path(path).resolve())
        acted += int(inst.conn.request(MESSAGE, **fields).get(ACTED_KEY, 0))
        start += n
    return acted
