"""The games' spaces: a game's declared observation and action spaces as gymnasium spaces, one policy's share of
env_info, and the codec between batched actions and the game's (obs_codec.py has the observations').

A game declares its spaces in godot-rl's env_info (per agent: ``{key: {"size": [n], "space": "box"}}`` observations,
``{key: {"size": n, "action_type": "continuous" | "discrete"}}`` actions, ``agent_policy_names``); vec_env's
conventions (a flat float32 observation, Box / Discrete / MultiDiscrete / Dict actions) come from here. An
observation key containing "2d" is a camera image (envs/images.py): its H*W*C values, 0..255, end the flat row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import gymnasium as gym
import numpy as np

from python_trainer.base import contract
from python_trainer.envs.game import GameBugError, GameError
from python_trainer.envs.images import MAX_SIDE, ImageLayout, is_image_key
from python_trainer.envs.protocol import pack_actions

# ---------------------------------------------------------------------------------------------- spaces
def _obs_layout(obs_space: dict) -> tuple[list[tuple[str, int]], Optional[ImageLayout]]:
    """([(key, flat size)] in the flat row's order, the image's layout or None) for godot-rl's per-agent observation
    space dict: the vector keys in sorted order, then the image key (one at most: images.is_image_key), whose
    H*W*C values end the row."""
    if not isinstance(obs_space, dict) or not obs_space:
        raise GameBugError(f"the game's agents declare the observation space {str(obs_space)[:100]!r}: expected "
                           '{key: {"size": [n], "space": "box"}} (get_obs_space(): does get_obs() return an Array of '
                           "numbers?)")
    layout, images = [], [key for key in sorted(obs_space) if is_image_key(key)]
    if len(images) > 1:
        raise GameBugError(f"the game's agents declare {len(images)} image observations ({', '.join(images)}): the "
                           "trainer takes one camera per agent; keep one key containing \"2d\" and rename the others")
    for key in sorted(obs_space):
        if key in images:
            continue
        spec = obs_space[key]
        kind = spec.get("space")
        if kind == "box":
            size = spec.get("size")
            size = [size] if isinstance(size, int) else list(size)
            layout.append((key, int(np.prod(size)) if size else 1))
        elif kind == "discrete":
            layout.append((key, 1))
        else:
            raise ValueError(f"observation {key!r}: unsupported space type {kind!r}")
    if not images:
        return layout, None
    image = _image_layout(images[0], obs_space[images[0]], sum(size for _, size in layout))
    return layout + [(image.key, image.frame_size)], image


def _image_layout(key: str, spec, start: int) -> ImageLayout:
    """The image key's layout from its declaration {"size": [H, W, C], "space": "box"}, or one line naming the key,
    what is wrong and the fix."""
    size = spec.get("size") if isinstance(spec, dict) else None
    fix = (f'declare it {{"size": [H, W, C], "space": "box"}} with sides from 1 to {MAX_SIDE} and C = 3 (RGB) or 1 '
           "(grayscale), the camera sensor's obs_space()")
    if not (isinstance(size, list) and len(size) == 3
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == int(v) for v in size)):
        raise GameBugError(f"the image observation {key!r} is declared {str(spec)[:100]}: {fix}")
    h, w, c = (int(v) for v in size)
    if min(h, w) < 1 or max(h, w) > MAX_SIDE or c not in (1, 3):
        raise GameBugError(f"the image observation {key!r} is declared {h} x {w} x {c}: {fix}")
    return ImageLayout(key, h, w, c, start)


def _obs_bounds(obs_space: dict, layout: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The flat observation's float32 (low, high) in ``layout``'s order. Our extension of godot-rl's schema (its client
    ignores it and assumes [-1, 1]): a box key may carry "low" and "high", lists of its size's numbers (null:
    unbounded); a key without them is unbounded. An image's columns are 0..255."""
    lows, highs = [], []
    for key, size in layout:
        spec = obs_space[key]
        if is_image_key(key):
            lows.append(np.zeros(size))
            highs.append(np.full(size, 255.0))
            continue
        for name, parts, unbounded in (("low", lows, -np.inf), ("high", highs, np.inf)):
            values = spec.get(name)
            if values is None:
                parts.append(np.full(size, unbounded))
                continue
            if not isinstance(values, list) or len(values) != size or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
            ):
                raise ValueError(f"observation {key!r}: {name!r} must be a list of {size} numbers (null: unbounded), "
                                 f"got {values!r}")
            parts.append(np.array([unbounded if v is None else v for v in values], dtype=np.float64))
    with np.errstate(over="ignore"):  # a bound past float32's range is unbounded in float32
        low, high = np.concatenate(lows).astype(np.float32), np.concatenate(highs).astype(np.float32)
    if np.any(np.isnan(low) | np.isnan(high)) or np.any(low > high):
        raise ValueError(f"observation bounds with low > high or NaN: low={low.tolist()}, high={high.tolist()}")
    return low, high


def _action_layout(action_space: dict):
    """(gym space, kind, [(key, size)]) for godot-rl's per-agent action space dict."""
    if not isinstance(action_space, dict) or not action_space:
        raise GameBugError(f"the game's agents declare the action space {str(action_space)[:100]}: an agent needs at "
                           'least one action key, e.g. {"move": {"size": 2, "action_type": "continuous"}} '
                           "(get_action_space())")
    keys = sorted(action_space)
    for key in keys:
        spec = action_space[key]
        size = spec.get("size") if isinstance(spec, dict) else None
        if not isinstance(size, (int, float)) or isinstance(size, bool) or size < 1 or size != int(size):
            raise GameBugError(f"the game's agents declare the action key {key!r} with a size below 1 or none: "
                               f"{str(spec)[:100]} in {str(action_space)[:200]} (get_action_space()): every key "
                               "needs a whole size of at least 1")
    kinds = {action_space[k].get("action_type") for k in keys}
    bad = kinds - {"continuous", "discrete"}
    if bad:
        raise ValueError(f"unsupported action type(s) {sorted(map(str, bad))} in {action_space!r}")
    sizes = [(k, int(action_space[k]["size"])) for k in keys]
    if len(kinds) > 1:  # hybrid: one entry per key, in sorted key order
        return gym.spaces.Dict({
            k: gym.spaces.Discrete(size) if action_space[k]["action_type"] == "discrete"
            else gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
            for k, size in sizes
        }), "hybrid", sizes
    if kinds == {"continuous"}:
        dim = sum(s for _, s in sizes)
        return gym.spaces.Box(-1.0, 1.0, (dim,), np.float32), "continuous", sizes
    if len(sizes) == 1:
        return gym.spaces.Discrete(sizes[0][1]), "discrete", sizes
    return gym.spaces.MultiDiscrete([s for _, s in sizes]), "multidiscrete", sizes


DEFAULT_POLICY = "shared_policy"  # the addon's and godot_rl_agents' policy name when a game names none
# Our extension of env_info (the contract's keys): each agent's arena, the physics frames per decision (the game's
# frames_per_decision times --action_repeat: the decision rate, said this one way), and the physics frames per second.
ARENAS_KEY, DECISION_FRAMES_KEY, PHYSICS_FPS_KEY = (contract.ARENAS_KEY, contract.DECISION_FRAMES_KEY,
                                                   contract.PHYSICS_FPS_KEY)


@dataclass(frozen=True)
class PolicySpaces:
    """One policy of a game: its name, its agents (their indices within an instance), and the spaces they share."""

    name: str
    agents: tuple
    observation_space: gym.spaces.Box
    action_space: gym.Space
    obs_layout: list
    act_kind: str
    act_layout: list
    image: Optional[ImageLayout] = None  # where the agents' camera image sits in the flat row (None: no image)


def _per_agent(info: dict, field: str) -> list:
    spaces = info[field]
    return [spaces] * info["n_agents"] if isinstance(spaces, dict) else list(spaces)  # older plugins: one for all


def agent_policy_names(info: dict) -> list:
    """Each agent's policy name (godot-rl's ``agent_policy_names``; one "shared_policy" when the game sends none), or
    a GameBugError naming the first agent whose name is empty or not a string."""
    n = info["n_agents"]
    names = info.get("agent_policy_names")
    if names is None:
        return [DEFAULT_POLICY] * n
    if not isinstance(names, list) or len(names) != n:
        raise GameBugError(f"env_info's agent_policy_names is {str(names)[:80]!r}: expected a list of {n} names, one "
                           "per agent")
    for j, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise GameBugError(f"agent {j}'s policy name is {name!r}: every agent needs a non-empty String "
                               "policy_name (the controller's policy_name; agents with the same name share one "
                               "network)")
    return names


def policies_from_env_info(info: dict) -> list:
    """The game's policies (`PolicySpaces`), in the order their first agents come; a GameBugError when two agents
    of one policy declare different spaces (they would share one network)."""
    names = agent_policy_names(info)
    obs_spaces, act_spaces = _per_agent(info, "observation_space"), _per_agent(info, "action_space")
    first: dict = {}
    for j, name in enumerate(names):
        f = first.setdefault(name, j)
        if obs_spaces[j] != obs_spaces[f] or act_spaces[j] != act_spaces[f]:
            raise GameBugError(
                f"agents {f} and {j} both use the policy {name!r} but declare different spaces (agent {f}: "
                f"{str(obs_spaces[f])[:80]} / {str(act_spaces[f])[:80]}; agent {j}: {str(obs_spaces[j])[:80]} / "
                f"{str(act_spaces[j])[:80]}): agents of one policy share one network, so give agents with other "
                "observations or actions another policy_name"
            )
    policies = []
    for name, f in first.items():
        obs_layout, image = _obs_layout(obs_spaces[f])
        low, high = _obs_bounds(obs_spaces[f], obs_layout)
        act_space, kind, act_layout = _action_layout(act_spaces[f])
        agents = tuple(j for j, n in enumerate(names) if n == name)
        policies.append(PolicySpaces(name, agents, gym.spaces.Box(low, high, dtype=np.float32), act_space,
                                     obs_layout, kind, act_layout, image))
    return policies


def spaces_from_env_info(info: dict):
    """(single observation space, single action space, obs layout, action kind, action layout) from env_info, for a
    game whose agents all have the same spaces (else a ValueError: see policies_from_env_info)."""
    obs_spaces, act_spaces = _per_agent(info, "observation_space"), _per_agent(info, "action_space")
    if any(s != obs_spaces[0] for s in obs_spaces) or any(s != act_spaces[0] for s in act_spaces):
        raise ValueError("the game's agents have different observation/action spaces (several policies: "
                         "policies_from_env_info)")
    (p,) = policies_from_env_info({**info, "agent_policy_names": None})
    return p.observation_space, p.action_space, p.obs_layout, p.act_kind, p.act_layout


def policy_env_info(env_info: dict, policy_name: str) -> dict:
    """``env_info`` narrowed to the agents whose ``agent_policy_names`` entry is ``policy_name`` (their spaces, their
    count), for what checks one policy against its agents (game_policy, import-policy, the per-policy learners). A
    GameError, naming the game's policies, when no agent plays it."""
    n = int(env_info.get("n_agents", 1))
    names = env_info.get("agent_policy_names") or [DEFAULT_POLICY] * n
    mine = [i for i, name in enumerate(names) if name == policy_name]
    if not mine:
        raise GameError(f"no agent of {env_info.get('env', '?')} plays the policy {policy_name!r}; its agents play "
                        f"{', '.join(dict.fromkeys(map(str, names)))}")
    narrowed = dict(env_info, n_agents=len(mine), agent_policy_names=[policy_name] * len(mine))
    for key in ("observation_space", "action_space", "agent_teams"):
        if isinstance(env_info.get(key), list):
            narrowed[key] = [env_info[key][i] for i in mine]
    return narrowed


def reward_problem(rewards, label: str) -> str:
    """One line naming the agent whose reward is not a number (the error path of a step reply's rewards)."""
    if isinstance(rewards, list):
        for j, r in enumerate(rewards):
            if not isinstance(r, (int, float)):
                return f"{label}: agent {j}'s reward is {str(r)[:60]!r}, not a number (the agent's reward must be a float)"
    return f"{label}: the step reply's rewards are {str(rewards)[:80]!r}, not a list of numbers, one per agent"


def _as_array(values, what: str) -> np.ndarray:
    """np.asarray(values), or a ValueError naming ``what`` when the values do not make an array (a ragged list)."""
    try:
        return np.asarray(values)
    except ValueError:
        raise ValueError(f"{what} must be a rectangular array of numbers (one row per env, each of the same size); "
                         "got a ragged list") from None


def dict_observation_space(policy: PolicySpaces) -> gym.spaces.Dict:
    """A policy's observations as gymnasium's Dict of its keys (what godot-rl's GodotEnv shows): an image as
    Box(0, 255, (H, W, C), uint8), a vector key as its Box of float32 (for people: the trainer keeps the flat row)."""
    box, spaces, at = policy.observation_space, {}, 0
    for key, size in policy.obs_layout:
        if policy.image is not None and key == policy.image.key:
            img = policy.image
            spaces[key] = gym.spaces.Box(0, 255, (img.height, img.width, img.channels), np.uint8)
        else:
            spaces[key] = gym.spaces.Box(box.low[at:at + size], box.high[at:at + size], dtype=np.float32)
        at += size
    return gym.spaces.Dict(spaces)


# ---------------------------------------------------------------------------------------------- codecs
class ActionCodec:
    """One policy's actions: batched actions checked against its space, then godot-rl's per-agent dicts (JSON) or
    the packed action message (the binary step exchange)."""

    def __init__(self, space: gym.Space, kind: str, layout: list[tuple[str, int]]):
        self.space, self.kind, self.layout = space, kind, layout

    def checked(self, actions, n: int):
        """Validate the batched actions of ``n`` envs: (n, dim) float64 clipped to [-1, 1] for
        continuous ones, (n, keys) int64 for discrete ones, each row's values in sorted key order (the packed
        actions' layout); for a hybrid space the pair of both, (floats, ints)."""
        if self.kind == "hybrid":
            return self._checked_hybrid(actions, n)
        a = _as_array(actions, "actions")
        if self.kind == "continuous":
            dim = self.space.shape[0]
            if a.shape == (n,) and dim == 1:
                a = a.reshape(n, 1)
            if a.shape != (n, dim):
                raise ValueError(f"actions must have shape ({n}, {dim}) for {self.space}, got {a.shape}")
            if a.dtype.kind not in "fiu":  # floats or integers (not bools, not objects)
                raise ValueError(f"continuous actions must be numbers, got dtype {a.dtype}")
            if not np.isfinite(a).all():
                bad = np.flatnonzero(~np.isfinite(a).all(axis=1))
                raise ValueError(f"actions contain NaN or infinite values (sub-envs {bad[:10].tolist()})")
            # minimum(maximum()) is np.clip without its Python wrapper (a few µs per step); it returns a new array.
            return np.minimum(np.maximum(a, -1.0, dtype=np.float64), 1.0)
        # discrete / multidiscrete
        k = len(self.layout)
        if self.kind == "discrete":
            if a.shape == (n, 1):
                a = a.reshape(n)
            if a.shape != (n,):
                raise ValueError(f"actions must have shape ({n},) for {self.space}, got {a.shape}")
        elif a.shape != (n, k):
            raise ValueError(f"actions must have shape ({n}, {k}) for {self.space}, got {a.shape}")
        if a.dtype.kind == "f":
            if not np.isfinite(a).all():
                raise ValueError("discrete actions contain NaN or infinite values")
            if not (a == np.round(a)).all():
                raise ValueError("discrete actions must be whole numbers")
        elif a.dtype.kind not in "iu":
            raise ValueError(f"discrete actions must be integers, got dtype {a.dtype}")
        a = a.astype(np.int64)
        nvec = np.array([s for _, s in self.layout])
        a = a.reshape(n, -1)
        if (a < 0).any() or (a >= nvec).any():
            raise ValueError(f"discrete actions out of range for {self.space}")
        return a

    def _checked_hybrid(self, actions, n: int):
        """(floats (n, continuous values) float64 clipped to [-1, 1], ints (n, discrete keys) int64), each row in
        sorted key order, from {key: batched values}; a ValueError naming the key for anything else."""
        space = self.space
        keys = [key for key, _ in self.layout]
        if not isinstance(actions, dict):
            raise ValueError(f"actions for the hybrid space {space} must be a dict {{key: batched values}} with the "
                             f"keys {keys}, got {type(actions).__name__}")
        try:
            given = sorted(actions)
        except TypeError:  # keys that do not compare: a str key beside an int one
            given = None
        if given != keys:
            odd = [k for k in actions if not isinstance(k, str)]
            raise ValueError(f"actions have the keys [{', '.join(sorted(map(repr, actions)))}]; {space} needs {keys}"
                             + (f" (the key {odd[0]!r} is not a string)" if odd else ""))
        floats, ints = [], []
        for key, size in self.layout:
            a = _as_array(actions[key], f"actions[{key!r}]")
            if isinstance(space[key], gym.spaces.Discrete):
                if a.shape == (n, 1):
                    a = a.reshape(n)
                if a.shape != (n,):
                    raise ValueError(f"actions[{key!r}] must have shape ({n},) (one index per env), got {a.shape}")
                if a.dtype.kind == "f":
                    if not np.isfinite(a).all():
                        raise ValueError(f"actions[{key!r}] contains NaN or infinite values")
                    if not (a == np.round(a)).all():
                        raise ValueError(f"actions[{key!r}] must be whole numbers (discrete choices)")
                elif a.dtype.kind not in "iu":
                    raise ValueError(f"actions[{key!r}] must be integers, got dtype {a.dtype}")
                if (a < 0).any() or (a >= size).any():
                    bad = np.flatnonzero((a < 0) | (a >= size))
                    raise ValueError(f"actions[{key!r}] out of range: must be in [0, {size}), got {a[bad[0]]} "
                                     f"(sub-envs {bad[:10].tolist()})")
                ints.append(a.astype(np.int64))
                continue
            if a.shape == (n,) and size == 1:
                a = a.reshape(n, 1)
            if a.shape != (n, size):
                raise ValueError(f"actions[{key!r}] must have shape ({n}, {size}), got {a.shape}")
            if a.dtype.kind not in "fiu":
                raise ValueError(f"actions[{key!r}] must be numbers, got dtype {a.dtype}")
            if not np.isfinite(a).all():
                bad = np.flatnonzero(~np.isfinite(a).all(axis=1))
                raise ValueError(f"actions[{key!r}] contains NaN or infinite values (sub-envs {bad[:10].tolist()})")
            floats.append(np.minimum(np.maximum(a, -1.0, dtype=np.float64), 1.0))
        return np.concatenate(floats, axis=1), np.stack(ints, axis=1)

    def packed(self, a: np.ndarray, s: slice) -> bytes:
        """The framed packed action message (binary step exchange) for the agents in ``s``."""
        if self.kind == "continuous":
            return pack_actions(floats=a[s])
        if self.kind == "hybrid":
            return pack_actions(floats=a[0][s], ints=a[1][s])
        return pack_actions(ints=a[s])

    def json(self, a: np.ndarray) -> list:
        """godot-rl's list of per-agent action dicts from `checked`'s array."""
        if self.kind == "hybrid":
            floats, ints = a
            columns, f, d = [], 0, 0  # each key's column(s) in the floats or ints array
            for key, size in self.layout:
                if isinstance(self.space[key], gym.spaces.Discrete):
                    columns.append((key, ints[:, d].tolist()))
                    d += 1
                else:
                    columns.append((key, np.round(floats[:, f:f + size], 7).tolist()))
                    f += size
            return [{key: values[i] for key, values in columns} for i in range(len(ints))]
        if self.kind == "continuous":
            # Rounded to 7 decimals (float32 precision): short JSON numbers are quicker to write and to parse.
            rows = np.round(a, 7).tolist()
            if len(self.layout) == 1:
                key = self.layout[0][0]
                return [{key: r} for r in rows]
            out, offsets = [], []
            start = 0
            for key, size in self.layout:
                offsets.append((key, start, start + size))
                start += size
            for r in rows:
                out.append({key: r[s:e] for key, s, e in offsets})
            return out
        if self.kind == "discrete":
            key = self.layout[0][0]
            return [{key: v} for v in a[:, 0].tolist()]
        keys = [key for key, _ in self.layout]
        return [dict(zip(keys, row)) for row in a.tolist()]
