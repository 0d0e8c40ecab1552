"""The in-engine actors' exchange (`train --in-engine`), the trainer's side: the message kinds, fields, statuses and the
fragment's layout, declared once, the requests and the binary weights message built, and a fragment read back.

docs/protocol.md gives the exchange, docs/training.md what it does for users. After the usual handshake and an env_info
that holds "actors": true (a game that has them):
- the trainer sends {"type": "actors", "path": FILE, "num_steps": T, "seed": S, "logprob": false}; the game loads the
  policy file FILE as --policy playback does and answers {"type": "actors", "weights": W, "obs_size": D,
  "action_size": A, "n_agents": N} (A: the continuous values, then one value per discrete key);
- a weights message is one binary message laid out as var2bytes(PoolRealArray): type 22, count W, W float32;
- {"type": "fragment", "version": k} makes the game act alone for T steps, sending {"type": "alive", "step": s}
  about once a second, then a header {"type": "fragment", "version": k, "parts": P, "floats": F, "episodes": [...]}
  and P binary parts whose float32 values, concatenated, are the fragment's body: T step blocks (obs[N*D] raw,
  actions[N*A] as sampled, rewards[N], statuses[N], the final obs[D] of each agent whose episode ended there, with
  "logprob" logprobs[N]),
  then the tail obs[N*D] (the observations the next fragment starts from).
godot_project/addons/rl_sync/fragment_wire.gd is the game's side; tests/test_engine_actors.py holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from python_trainer.base.contract import TYPE_KEY, kind, message
from python_trainer.envs.game import GameBugError
from python_trainer.envs.protocol import (PACKED_HEADER, POOL_REAL_ARRAY, STATUS_RUNNING,  # noqa: F401 (the wire's)
                                          STATUS_TERMINATED, STATUS_TRUNCATED, decode_body, is_packed, pack_actions)

# The message kinds (contract.MESSAGES declares them with their fields, the keys below; message() refuses another).
ACTORS = kind("actors")  # the message that enters actor mode, its reply, and env_info's key of a game that has it
FRAGMENT = kind("fragment")
ALIVE = kind("alive")
ERROR = kind("error")
PATH_KEY = "path"
NUM_STEPS_KEY = "num_steps"
SEED_KEY = "seed"
LOGPROB_KEY = "logprob"
PATHS_KEY = "paths"  # several policies: {policy name: file} instead of "path"
POLICIES_KEY = "policies"  # their names' order: of their values in a weights message and of their sizes
AGENT_POLICIES_KEY = "agent_policies"  # with "paths": per agent of the instance, the index in "policies" of the file
# it samples, whatever its policy_name (--self-play: two teams of one policy name, each its route's network)
WEIGHTS_KEY = "weights"
OBS_SIZE_KEY = "obs_size"
ACTION_SIZE_KEY = "action_size"
N_AGENTS_KEY = "n_agents"
SIZES_KEY = "sizes"  # several policies: {policy name: {"weights": W, "obs_size": D, "action_size": A}}
VERSION_KEY = "version"
STEP_KEY = "step"
PARTS_KEY = "parts"
FLOATS_KEY = "floats"
EPISODES_KEY = "episodes"
AGENT_KEY = "agent"
RETURN_KEY = "return"
LENGTH_KEY = "length"
INFO_KEY = "info"
MESSAGE_KEY = "message"  # an "error" message's text
ALIVE_PERIOD_S = 1.0  # the games' heartbeat while they collect (the trainer's wait runs from the last message)
# env_info's "actors": the version of this exchange the game speaks, raised whenever a message or the fragment's layout
# changes (3: every ended episode's final observation, several policies' sizes; 4: "agent_policies", and a "drivers"
# message that keeps actor mode, the game's drivers acting in it), so that an export older or newer than
# the trainer is refused with "re-export" rather than misread. (Exports before versions said true.)
ACTORS_VERSION = 4
# The statuses, the float32 array's type word and its header are the packed step exchange's (protocol.py).
_HEADER = PACKED_HEADER


class FragmentError(GameBugError):
    """A game's reply in actor mode that does not fit the layout: a bug of the game's own, which a restart would repeat
    (said in one line; nothing is restarted)."""


def actors_message(path, num_steps: int, seed: int, logprob: bool = False, agent_policies=None) -> dict:
    """``path``: one policy file for every agent, or {policy name: file} of a game of several policies (their order is
    the weights message's); ``agent_policies``: with a dict, each agent's index into it (then its keys name routes,
    not the agents' policy names)."""
    files = ({PATHS_KEY: {name: str(p) for name, p in path.items()}, POLICIES_KEY: list(path)}
             if isinstance(path, dict) else {PATH_KEY: str(path)})
    if agent_policies is not None:
        files[AGENT_POLICIES_KEY] = [int(k) for k in agent_policies]
    return message(ACTORS, **files, **{NUM_STEPS_KEY: int(num_steps), SEED_KEY: int(seed), LOGPROB_KEY: bool(logprob)})


def fragment_message(version: int) -> dict:
    return message(FRAGMENT, **{VERSION_KEY: int(version)})


def weights_message(values) -> bytes:
    """The framed binary weights message: its length, then var2bytes(PoolRealArray) of ``values``, framed as a packed
    action message of float values alone is."""
    return pack_actions(floats=values)


def check_actors_reply(reply: dict, label: str, *, weights: int, obs_size: int, action_size: int, n_agents: int,
                       sizes: Optional[dict] = None):
    """Raise FragmentError unless the game's "actors" reply agrees with what the trainer counts. ``sizes``: several
    policies' {name: {"weights": W, "obs_size": D, "action_size": A}} (then obs_size and action_size: the widest)."""
    expected = {WEIGHTS_KEY: weights, OBS_SIZE_KEY: obs_size, ACTION_SIZE_KEY: action_size, N_AGENTS_KEY: n_agents}
    if sizes is not None:
        expected[SIZES_KEY] = sizes
    wrong = {k: reply.get(k) for k, v in expected.items() if reply.get(k) != v}
    if wrong:
        raise FragmentError(f"{label}: its {ACTORS!r} reply says " + ", ".join(f"{k}={v!r}" for k, v in wrong.items())
                            + "; the trainer counts " + ", ".join(f"{k}={expected[k]}" for k in wrong)
                            + " (a game and trainer of different versions? re-export the game)")


@dataclass
class Fragment:
    """One instance's fragment as arrays: obs (T, N, D) raw, actions (T, N, A) as sampled, rewards (T, N), statuses
    (T, N) (0 running, 1 terminated, 2 truncated), final_obs {t: (agents, (k, D) raw)} of the agents whose episode
    ended at step t (terminated or truncated), tail_obs (N, D), logprobs (T, N) or None, and the header's episodes
    (dicts, in order of ending)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    statuses: np.ndarray
    tail_obs: np.ndarray
    final_obs: dict = field(default_factory=dict)
    logprobs: Optional[np.ndarray] = None
    episodes: list = field(default_factory=list)


def check_header(header: dict, version: int, label: str) -> tuple[int, int, list]:
    """(parts, floats, episodes) of a fragment's header, checked."""
    parts, floats, episodes = header.get(PARTS_KEY), header.get(FLOATS_KEY), header.get(EPISODES_KEY)
    if header.get(VERSION_KEY) != version:
        raise FragmentError(f"{label}: sent fragment {header.get(VERSION_KEY)!r} where fragment {version} was asked")
    for name, value in ((PARTS_KEY, parts), (FLOATS_KEY, floats)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == PARTS_KEY else 0):
            raise FragmentError(f"{label}: a fragment header's {name!r} is {value!r}, not a count")
    if not isinstance(episodes, list) or not all(isinstance(e, dict) for e in episodes):
        raise FragmentError(f"{label}: a fragment header's {EPISODES_KEY!r} is not a list of episodes")
    return parts, floats, episodes


def part_values(body: bytes, label: str) -> np.ndarray:
    """The float32 values of one binary part (a view of ``body``)."""
    if len(body) < _HEADER.size:
        raise FragmentError(f"{label}: a fragment part of {len(body)} bytes has no array header")
    kind, count = _HEADER.unpack_from(body, 0)
    if kind != POOL_REAL_ARRAY or len(body) != _HEADER.size + 4 * count:
        raise FragmentError(f"{label}: a fragment part must be a float32 array (type {POOL_REAL_ARRAY}, count, the "
                            f"values); got type {kind}, count {count} in {len(body)} bytes")
    return np.frombuffer(body, "<f4", count=count, offset=_HEADER.size)


def parse_fragment(header: dict, parts: list, label: str, *, num_steps: int, n_agents: int, obs_size,
                   action_size, logprob: bool = False) -> Fragment:
    """A fragment from its header and its parts' bodies; raises FragmentError (one line) when they do not fit.
    ``obs_size``, ``action_size``: every agent's, or each agent's (several policies: its policy's), when the arrays
    are as wide as the widest and an agent's values fill its row from the left (zeros after)."""
    _, floats, episodes = check_header(header, header.get(VERSION_KEY), label)
    body = np.concatenate([part_values(p, label) for p in parts]) if parts else np.zeros(0, np.float32)
    if body.size != floats:
        raise FragmentError(f"{label}: a fragment's parts hold {body.size} float32 values, its header says {floats}")
    T, N = num_steps, n_agents
    obs_sizes, action_sizes = np.broadcast_to(obs_size, (N,)), np.broadcast_to(action_size, (N,))
    D, A = int(obs_sizes.max(initial=0)), int(action_sizes.max(initial=0))
    obs_mask = np.arange(D) < obs_sizes[:, None]  # (N, D): which of each agent's row its values fill
    act_mask = np.arange(A) < action_sizes[:, None]
    uniform = bool(obs_mask.all() and act_mask.all())
    obs, actions = np.zeros((T, N, D), np.float32), np.zeros((T, N, A), np.float32)
    rewards, statuses = np.empty((T, N), np.float32), np.empty((T, N), np.int64)
    logprobs = np.empty((T, N), np.float32) if logprob else None
    final_obs, at = {}, 0

    def take(count):
        nonlocal at
        if at + count > body.size:
            raise FragmentError(f"{label}: a fragment of {body.size} float32 values ends inside its step blocks "
                                f"({T} steps of {N} agents, observations of {D}, actions of {A})")
        at += count
        return body[at - count:at]

    def rows(mask):  # the rows of the agents of ``mask``, each its own values, from the body
        if uniform:
            return take(mask.size).reshape(mask.shape)
        out = np.zeros(mask.shape, np.float32)
        out[mask] = take(int(mask.sum()))
        return out

    for t in range(T):
        obs[t] = rows(obs_mask)
        actions[t] = rows(act_mask)
        rewards[t] = take(N)
        status = take(N)
        if not np.isin(status, (STATUS_RUNNING, STATUS_TERMINATED, STATUS_TRUNCATED)).all():
            raise FragmentError(f"{label}: a fragment's statuses must be 0, 1 or 2; step {t} holds "
                                f"{status.tolist()[:20]}")
        statuses[t] = status
        ended = np.flatnonzero(status != STATUS_RUNNING)
        if ended.size:
            final_obs[t] = (ended, rows(obs_mask[ended]).copy())
        if logprob:
            logprobs[t] = take(N)
    tail = rows(obs_mask).copy()
    if at != body.size:
        raise FragmentError(f"{label}: a fragment holds {body.size - at} float32 values after its tail")
    ended = int(np.count_nonzero(statuses))
    if len(episodes) != ended:
        raise FragmentError(f"{label}: a fragment's statuses end {ended} episodes, its header lists {len(episodes)}")
    return Fragment(obs, actions, rewards, statuses, tail, final_obs, logprobs, episodes)


def select(fragment: Fragment, agents: np.ndarray, obs_size: int, action_size: int) -> Fragment:
    """The fragment of ``agents`` alone (indices into its agents, ascending), renumbered from 0, their rows cut to
    their own policy's ``obs_size`` and ``action_size``: one policy's share of a game of several."""
    agents = np.asarray(agents, np.int64)
    new = {int(a): j for j, a in enumerate(agents)}
    final = {}
    for t, (ended, rows) in fragment.final_obs.items():
        keep = np.isin(ended, agents)
        if keep.any():
            final[t] = (np.array([new[int(a)] for a in ended[keep]], np.int64), rows[keep, :obs_size])
    episodes = [dict(e, **{AGENT_KEY: new[e[AGENT_KEY]]}) for e in fragment.episodes if e.get(AGENT_KEY) in new]
    return Fragment(fragment.obs[:, agents, :obs_size], fragment.actions[:, agents, :action_size],
                    fragment.rewards[:, agents], fragment.statuses[:, agents], fragment.tail_obs[agents, :obs_size],
                    final, None if fragment.logprobs is None else fragment.logprobs[:, agents], episodes)


def episodes_by_step(fragment: Fragment, label: str) -> dict:
    """{t: [(agent, return, length, info)]} of the episodes that ended at step t, matched to the statuses agent by
    agent (each agent's episodes end in order)."""
    queues: dict = {}
    for e in fragment.episodes:
        agent = e.get(AGENT_KEY)
        ret, length = e.get(RETURN_KEY), e.get(LENGTH_KEY)
        if not isinstance(agent, int) or not isinstance(ret, (int, float)) or not isinstance(length, (int, float)):
            raise FragmentError(f"{label}: a fragment's episode {str(e)[:120]} lacks its agent, return or length")
        info = e.get(INFO_KEY)
        queues.setdefault(agent, []).append((float(ret), int(length), info if isinstance(info, dict) else {}))
    out = {}
    for t in np.flatnonzero(fragment.statuses.any(axis=1)):
        for agent in np.flatnonzero(fragment.statuses[t]):
            if not queues.get(int(agent)):
                raise FragmentError(f"{label}: agent {agent}'s episode ended at step {t} of a fragment whose header "
                                    "does not list it")
            out.setdefault(int(t), []).append((int(agent),) + queues[int(agent)].pop(0))
    return out


def receive_fragment(conn, version: int, timeout: float, **layout) -> Fragment:
    """Fragment ``version`` from one instance's connection (protocol.GodotConnection): "alive" heartbeats are passed
    over, each read waits ``timeout`` seconds from the last message (a silence past it raises GodotConnectionError,
    which restarts the instance); a game's "error" or a malformed fragment raises GameBugError."""
    label = conn.label
    while True:
        body = conn.recv_body(timeout, f"fragment {version} (or a heartbeat)")
        if is_packed(body):
            raise FragmentError(f"{label}: sent a binary message before fragment {version}'s header")
        try:
            msg = decode_body(body)
        except ValueError as e:
            raise FragmentError(f"{label}: sent a malformed message in actor mode ({e})") from None
        kind = msg.get(TYPE_KEY)
        if kind == ALIVE:
            continue
        if kind == ERROR:
            raise conn.game_bug(msg)
        if kind != FRAGMENT:
            raise FragmentError(f"{label}: sent a {kind!r} message where fragment {version} was expected")
        parts, _, _ = check_header(msg, version, label)
        bodies = [conn.recv_body(timeout, f"part {p + 1} of fragment {version}") for p in range(parts)]
        return parse_fragment(msg, bodies, label, **layout)
