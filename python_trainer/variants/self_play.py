"""--self-play: a two-sided game's learning team plays against snapshots of its own past policy (ML-Agents' ghost trainer).

The game's agents play one policy in two teams (each controller's ``policy_name`` the same, its ``team`` 0 or 1, sent
in env_info's ``agent_teams``; a team is its agents in every instance). `SelfPlayRollouts` fills ppo.py's rollouts slot: each rollout is collected with two
routes (policies.collect_routes), the learner's agents acting with the current policy into the learner's buffer, and
the other team's agents acting with a frozen snapshot into a buffer nobody trains on. Around the collection it keeps:

* the pool: a snapshot of the learner (its weights and observation statistics) every --self-play-save-steps learner
  steps, the newest --self-play-window kept, as files in RUN_DIR/self_play/ (snapshot_<step, 12 digits>.pt). The
  snapshot playing is held by its entry, not by its place in the pool: a trim that drops it while it plays leaves it
  playing, rated, and its file kept. A file leaves the disk only once no checkpoint on disk lists it: one that the last
  checkpoint lists waits until the next one is written (`checkpoint_saved`), so a run killed at any moment resumes
  from its last checkpoint; a resume whose listed files are gone goes on without them;
* the opponent: every --self-play-swap-steps learner steps (and at the first collection), a kind drawn by
  --opponents' shares (opponents.py): ``pool`` plays the newest snapshot with probability --self-play-latest-ratio,
  else one drawn uniformly from the pool; ``scripted``, ``random`` and ``file=PATH`` are played by the game itself
  (envs/drivers.py's message: the game overrides the frozen route's actions for those agents, none of which any
  buffer trains on);
* in the engine (engine_actors.py, --in-engine): the same two routes, collected by the games, each agent sampling from
  its route's network (the learner's or the snapshot's, sent per agent) and a game-driven opponent's agents acted for
  by the game as when the trainer steps;
* the sides: every --self-play-team-change learner steps the learning team and the frozen team swap (the games are
  reset then, so no episode is split between two policies);
* Elo: after each match a learner agent finished against the pool (other opponents leave the ratings alone), with S = 1 (its return > 0), 0.5 (= 0) or 0 (< 0) and
  E = 1 / (1 + 10^((R_opponent - R_learner) / 400)), R_learner += K (S - E) and the opponent snapshot's R -= K (S - E)
  (K = 16; a snapshot is rated with the learner's Elo when it is taken).

Steps are counted in whole rollouts: a snapshot, a swap or a change of sides happens at the first update boundary
after its count is reached. The whole state (ratings, pool, counters, the draw's RNG) is in the checkpoint
(state_dict), so --resume continues it with its pool.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from python_trainer.checkpoint import space_to_dict
from python_trainer.base.combinations import refusal
from python_trainer.base.errors import UserError, say
from python_trainer.base.files import atomic_output
from python_trainer.base.flags import GoesWith, at_least, flag, in_range
from python_trainer.envs.drivers import SCRIPTED_KEY, set_drivers
from python_trainer.envs.spaces import DEFAULT_POLICY
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer, Rollouts, evaluate
from python_trainer.variants.opponents import OPPONENTS_RULE, POOL, check_opponents, draw_opponent, parse_opponents
from python_trainer.variants.policies import Route, collect_routes, merge_actions
from python_trainer.variants.trained_agent import LoadedAgent, make_agent

POOL_DIR = "self_play"  # RUN_DIR/self_play/snapshot_<learner step>.pt
ELO_K = 16.0
INITIAL_ELO = 1200.0


SELF_PLAY = GoesWith("self_play", "self-play", "--self-play")  # what every --self-play-* flag needs


@dataclass
class SelfPlayArgs:
    self_play: bool = False
    """a game of two teams that play one policy: train one team against snapshots of its own past policy (self_play.py;
    ML-Agents' self-play); Elo as self_play/elo"""
    self_play_save_steps: int = flag(20000, at_least(1, "an integer >= 1 (learner steps)", "20000"), goes_with=SELF_PLAY)
    """with --self-play: learner steps between two snapshots of the policy added to the opponent pool"""
    self_play_swap_steps: int = flag(10000, at_least(1, "an integer >= 1 (learner steps)", "10000"), goes_with=SELF_PLAY)
    """with --self-play: learner steps between two changes of the opponent snapshot"""
    self_play_window: int = flag(10, at_least(1, "an integer >= 1", "10"), goes_with=SELF_PLAY)
    """with --self-play: how many snapshots the opponent pool keeps (the newest)"""
    self_play_latest_ratio: float = flag(0.5, in_range(0, 1, "a probability in [0, 1]", "0.5"), goes_with=SELF_PLAY)
    """with --self-play: the probability of playing the newest snapshot instead of one drawn from the pool"""
    self_play_team_change: int = flag(100000, at_least(1, "an integer >= 1 (learner steps)", "100000"), goes_with=SELF_PLAY)
    """with --self-play: learner steps before the learning team and the frozen team swap sides"""
    opponents: str = flag("pool:1", OPPONENTS_RULE, goes_with=SELF_PLAY)
    """with --self-play: KIND:SHARE[,KIND:SHARE...], the opponents drawn at each swap by their shares (normalised);
    KIND pool (snapshots, as --self-play-latest-ratio says), scripted (the game's get_scripted_action()), random, or
    file=PATH (a policy file the game runs; repeat for several); all but pool are played by the game itself"""


def flags_refusal(args) -> Optional[str]:
    """Why --self-play cannot run with these flags, in one line, or None (--async's rule is async_rollouts.py's)."""
    if args.self_play and args.ray_address is not None:
        return refusal("self_play/ray")
    return None


def resume_refusal(args, ckpt: Optional[dict]) -> Optional[str]:
    """Why the checkpoint ``ckpt`` (None: a new run) does not resume with this run's --self-play / --no-self-play, or
    None."""
    saved = (ckpt or {}).get("args") or {}
    if ckpt and bool(saved.get("self_play")) != args.self_play:
        return refusal("resume/self_play", where=f"--resume {args.resume}",
                       had="with" if saved.get("self_play") else "without")
    return None


class SelfPlayError(UserError):
    """A game or a pool that self-play cannot use, in one line."""


def expected_score(rating: float, opponent: float) -> float:
    """Elo's expected score of ``rating`` against ``opponent``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def elo_update(rating: float, opponent: float, score: float, k: float = ELO_K) -> tuple[float, float]:
    """Both ratings after one match whose result for the first is ``score`` (1 win, 0.5 draw, 0 loss)."""
    change = k * (score - expected_score(rating, opponent))
    return rating + change, opponent - change


def teams_of(env_info: dict, env_id: str) -> tuple[np.ndarray, np.ndarray]:
    """The envs (agents) of team 0 and of team 1 of a game made for self-play, or a SelfPlayError saying why not."""
    n = env_info["n_agents"]
    names = env_info.get("agent_policy_names") or [DEFAULT_POLICY] * n
    teams = env_info.get("agent_teams")
    fix = ("give both sides' controllers the same policy_name and set each one's team to 0 or 1 (pong does: "
           "docs/games.md), or drop --self-play")
    if len(set(names)) != 1:
        raise SelfPlayError(refusal("policies/self_play", env_id=env_id, names=sorted(set(names)), fix=fix))
    if not isinstance(teams, list) or len(teams) != n or sorted(set(teams)) != [0, 1]:
        got = "no agent_teams" if not isinstance(teams, list) else f"the teams {sorted(set(map(str, teams)))}"
        raise SelfPlayError(f"--self-play needs a game whose agents are split into teams 0 and 1; {env_id} reports "
                            f"{got}: {fix}")
    teams = np.asarray(teams)
    zero, one = np.flatnonzero(teams == 0), np.flatnonzero(teams == 1)
    if zero.size != one.size:  # the game's controllers set the teams: --agents-per-instance helps only when odd
        odd = (" (with an odd number of agents no split is even: use an even --agents-per-instance)"
               if (zero.size + one.size) % 2 else "")
        raise SelfPlayError(f"--self-play pairs each learning agent with a frozen one, so it needs as many agents in each "
                            f"team; {env_id}'s controllers put {zero.size} in team 0 and {one.size} in team 1: set their "
                            f"team so that both teams have as many agents{odd}")
    return zero, one


def agents_info(base) -> dict:
    """The env_info of all of ``base``'s agents, so that the teams cover every instance: each instance's per-agent
    lists (agent_policy_names, agent_teams) one after the other, in the vector env's order (``base.env_info`` is
    instance 0's alone); ``base.env_info`` itself where the env has no instances."""
    launcher = getattr(base.envs, "launcher", None)  # (a FrameStack passes it on)
    if launcher is None:
        return base.env_info
    infos = [inst.env_info for inst in launcher.instances]
    merged = dict(infos[0], n_agents=sum(info["n_agents"] for info in infos))
    for key in ("agent_policy_names", "agent_teams", SCRIPTED_KEY):  # one instance without the list: none (teams_of says so)
        parts = [info.get(key) for info in infos]
        merged[key] = [x for p in parts for x in p] if all(isinstance(p, list) for p in parts) else None
    return merged


class _FrozenNormalizer:
    """The opponent's normaliser: its snapshot's observation statistics, never updated; its rewards are not trained on."""

    def __init__(self, state: dict):
        self.normalizer = Normalizer.frozen(state)

    def normalize_obs(self, obs, update=True):
        return self.normalizer.normalize_obs(obs, update=False)

    def scale_reward(self, rewards, dones, envs=slice(None)):
        return np.asarray(rewards, dtype=np.float64)

    def __getattr__(self, name):  # the rest (obs_statistics: the in-engine actors' policy file and weights) its own
        if name == "normalizer":
            raise AttributeError(name)
        return getattr(self.normalizer, name)


class SelfPlayRollouts(Rollouts):
    """The rollouts of --self-play (see the module's docstring) over this machine's rollouts ``base``
    (rollout.LocalRollouts of a Godot game). Its envs are the learning team's agents."""

    def __init__(self, base, args, run_dir):
        self.base, self.envs, self.args = base, base.envs, args
        # in-engine actors (engine_actors.py): they collect both routes in the games, and leave actor mode before the
        # env is stepped or reset here
        self._engine_collect = getattr(base, "collect_routes", None)
        self._leave = getattr(base, "leave", lambda: None)
        self.in_engine = getattr(base, "in_engine", False)  # (args.json's in_engine: the path the run took)
        self.env_id = args.env_id
        info = agents_info(base)  # every instance's agents, not instance 0's alone
        self.teams = teams_of(info, args.env_id)
        self.opponents = parse_opponents(args.opponents)
        check_opponents(self.opponents, info, args.env_id)
        self.opponent: Optional[tuple] = None  # (kind, path) of the opponent playing now; None before the first draw
        self.driving: Optional[tuple] = None  # (kind, path, learning team, restarts) the games were last told
        self.game_acted = 0  # the actions the games chose for the agents they drive, so far (their last reply)
        self.pool_dir = Path(run_dir) / POOL_DIR
        self.num_envs = int(self.teams[0].size)
        self.single_observation_space = base.single_observation_space
        self.single_action_space = base.single_action_space
        self.image_layout = base.image_layout
        self.env_info = base.env_info
        self.agents_per_instance = base.agents_per_instance
        self.game_settings = base.game_settings
        self.learning_team = 0
        self.elo = INITIAL_ELO
        self.pool: list = []  # [{"file", "elo", "step"}], oldest first
        self.playing: Optional[dict] = None  # the entry of the snapshot playing now (in the pool, or trimmed from it)
        self.listed: set = set()  # the files the newest checkpoint on disk lists: kept until the next one is written
        self.offered: set = set()  # the files the last state_dict() listed: the next checkpoint's, once it is written
        self.stale: set = set()  # files out of the pool that a checkpoint still lists: deleted once none does
        self.steps = self.last_save = self.last_swap = self.last_team_change = 0
        self.rng = np.random.default_rng(args.seed)
        self.matches = self.wins = self.draws = 0
        self._opp = None  # (agent, normaliser, buffer), made at the first collection
        self._opp_raw_obs = None  # the opponent's first observations, until its normaliser exists
        # the network of this run (--lstm, --lstm-size and --rnd shape it): a snapshot of another is refused
        model = make_agent(self.single_observation_space.shape[0], self.single_action_space, asdict(args)).state_dict()
        self._shapes = {k: tuple(v.shape) for k, v in model.items()}

    # ------------------------------------------------------------------------------------------------ the sides
    def _ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(the learner's envs, the opponent's envs)."""
        return self.teams[self.learning_team], self.teams[1 - self.learning_team]

    def startup_line(self) -> Optional[str]:
        line = self.base.startup_line()
        theirs = "; the games sample the other team from the opponent's network" if self.in_engine else ""
        return f"{line}; self-play: team {self.learning_team} learns ({self.num_envs} agents){theirs}" if line else None

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        self._leave()
        self.envs.reset(seed=seed)
        for _ in range(steps):
            bonus.update_obs_stats(self.envs.step(self.envs.action_space.sample())[0][self._ids()[0]])

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        self._leave()
        raw_obs, _ = self.envs.reset(seed=seed)
        learner, opponent = self._ids()
        buf.next_obs[:] = normalizer.normalize_obs(raw_obs[learner])
        buf.next_done[:] = 1.0
        self._opp_raw_obs = raw_obs[opponent]
        if self._opp is not None:
            self._opp[2].next_obs[:] = self._opp[1].normalize_obs(self._opp_raw_obs)
            self._opp[2].next_done[:] = 1.0

    # ------------------------------------------------------------------------------------------------ the pool
    def _in_use(self) -> set:
        """The files of the pool and of the snapshot playing."""
        return {p["file"] for p in self.pool} | ({self.playing["file"]} if self.playing else set())

    def _retire(self, entry: dict) -> None:
        """``entry`` left the pool or stopped playing: its file goes now, or once no checkpoint on disk lists it."""
        name = entry["file"]
        if name in self._in_use():
            return
        if name in self.listed:
            self.stale.add(name)
        else:
            (self.pool_dir / name).unlink(missing_ok=True)

    def _snapshot(self, agent, normalizer) -> None:
        """The learner as it is now, added to the pool (the oldest beyond the window leave it: _retire)."""
        self.pool_dir.mkdir(parents=True, exist_ok=True)
        path = self.pool_dir / f"snapshot_{self.steps:012d}.pt"
        state = {"env_id": self.env_id, "observation_space": space_to_dict(self.single_observation_space),
                 "action_space": space_to_dict(self.single_action_space), "model": agent.state_dict(),
                 "normalizer": normalizer.state_dict(), "step": self.steps, "elo": self.elo}
        with atomic_output(path) as tmp, open(tmp, "wb") as f:
            torch.save(state, f)
        self.stale.discard(path.name)
        self.pool = [p for p in self.pool if p["file"] != path.name]  # (a resume's replay writes a step anew)
        self.pool.append({"file": path.name, "elo": self.elo, "step": self.steps})
        while len(self.pool) > self.args.self_play_window:
            self._retire(self.pool.pop(0))
        self.last_save = self.steps

    def checkpoint_saved(self) -> None:
        """The checkpoint of the last state_dict() is on disk now: the files that only older ones listed go."""
        self.listed = self.offered
        keep = self.listed | self._in_use()
        for name in sorted(self.stale - keep):
            (self.pool_dir / name).unlink(missing_ok=True)
        self.stale &= self.listed - self._in_use()

    def _play(self, entry: dict, agent, normalizer) -> None:
        """Make ``entry``'s snapshot the opponent (``agent``: the learner's, for its architecture). A snapshot that
        cannot be read leaves the pool with a warning, and the newest readable one plays instead (the learner as it
        is now when none is left)."""
        tried: list = []
        for candidate in [entry, *reversed(self.pool)]:
            if any(candidate is t for t in tried):
                continue
            tried.append(candidate)
            problem, state = self._read_snapshot(self.pool_dir / candidate["file"])
            if problem is None:
                return self._load(candidate, state, agent)
            say(f"godot-ppo: warning: self-play: the pool's snapshot {self.pool_dir / candidate['file']} {problem}: "
                "it leaves the pool; the newest readable snapshot plays instead")
            self.pool = [p for p in self.pool if p is not candidate]
        self._snapshot(agent, normalizer)  # nothing readable is left: the pool starts again from the learner
        self._load(self.pool[-1], self._read_snapshot(self.pool_dir / self.pool[-1]["file"])[1], agent)

    def _load(self, entry: dict, state: dict, like) -> None:
        """Make the snapshot ``entry`` (read as ``state``) the opponent; the one it replaces is retired."""
        agent = copy.deepcopy(like) if self._opp is None else self._opp[0]
        agent.load_state_dict(state["model"])
        normalizer = _FrozenNormalizer(state["normalizer"])
        if self._opp is None:
            buf = RolloutBuffer(self.args.num_steps, self.num_envs, self.single_observation_space.shape[0], agent)
            buf.next_obs[:] = normalizer.normalize_obs(self._opp_raw_obs)
            buf.next_done[:] = 1.0
        else:  # the observations in hand were normalised with the previous snapshot's statistics: undone, redone
            # (exact but where the clip at +-clip_obs bit: one step of one episode at most)
            buf = self._opp[2]
            buf.next_obs[:] = self._opp[1].normalizer.raw_obs(buf.next_obs)
            buf.next_obs[:] = normalizer.normalize_obs(buf.next_obs)
        self._opp = (agent, normalizer, buf)
        previous, self.playing = self.playing, entry
        if previous is not None and previous is not entry:
            self._retire(previous)

    def _read_snapshot(self, path: Path) -> tuple[Optional[str], Optional[dict]]:
        """(None, the snapshot's state), or (what is wrong with the file, None)."""
        if not path.is_file():
            return "is gone", None
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            shapes = {k: tuple(v.shape) for k, v in state["model"].items()}
            Normalizer.frozen(state["normalizer"])
        except Exception as e:
            return f"cannot be read as a snapshot ({type(e).__name__})", None
        ours = (self.env_id, space_to_dict(self.single_observation_space), space_to_dict(self.single_action_space))
        if (state.get("env_id"), state.get("observation_space"), state.get("action_space")) != ours:
            return f"is of {state.get('env_id')!r} with other spaces, not of {self.env_id} as it runs now", None
        if shapes != self._shapes:
            return ("holds another network than this run's (a run with other --lstm, --lstm-size or --rnd flags made "
                    "it)"), None
        return None, state

    # ------------------------------------------------------------------------------------------------ collecting
    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        args = self.args
        if not self.pool:  # the pool starts with the policy as it starts
            self._snapshot(agent, normalizer)
        if self._opp is None:  # the first collection (of a resumed run too: the snapshot that was playing)
            self._play(self.playing or self.pool[-1], agent, normalizer)
        if self.steps - self.last_team_change >= args.self_play_team_change:
            self.learning_team, self.last_team_change = 1 - self.learning_team, self.steps
            self.reset(normalizer, buf, seed=int(self.rng.integers(2**31)))  # no episode split between two policies
        if self.opponent is None or self.steps - self.last_swap >= args.self_play_swap_steps:
            first, self.opponent = self.opponent is None, draw_opponent(self.opponents, self.rng)
            if self.opponent[0] == POOL and not first:  # (the first match's snapshot is loaded above)
                latest = self.rng.random() < args.self_play_latest_ratio
                self._play(self.pool[-1 if latest else int(self.rng.integers(len(self.pool)))], agent, normalizer)
            self.last_swap = self.steps if not first else self.last_swap
        self._drive()
        learner, opponent = self._ids()
        opp_agent, opp_normalizer, opp_buf = self._opp
        routes = [Route(agent, normalizer, buf, bonus, learner, "learner"),
                  Route(opp_agent, opp_normalizer, opp_buf, None, opponent, "opponent")]
        if self._engine_collect is not None:  # each game samples each team from its route's policy
            self._engine_collect(routes)
        else:
            collect_routes(self.envs, routes, self.base.pipeline)
        self.steps += buf.obs.shape[0] * self.num_envs
        self._count_matches(buf.episodes)
        if self.opponent[0] != POOL:  # the games' count of the actions they chose (an empty drivers message asks it)
            self.game_acted = set_drivers(self.envs, [], "trainer")
        if self.steps - self.last_save >= args.self_play_save_steps:
            self._snapshot(agent, normalizer)

    def _count_matches(self, episodes) -> None:
        """Each match a learner agent finished: its result counted, and against the pool both ratings moved."""
        for _, infos in episodes:
            for i in np.flatnonzero(infos.get("_episode", ())):
                ret = float(infos["episode"]["r"][i])
                score = 1.0 if ret > 0 else 0.5 if ret == 0 else 0.0
                if self.opponent is None or self.opponent[0] == POOL:
                    self.elo, self.playing["elo"] = elo_update(self.elo, self.playing["elo"], score)
                self.matches, self.wins, self.draws = self.matches + 1, self.wins + (score == 1), self.draws + (score == 0.5)

    def _drive(self) -> None:
        """Tell the games who acts for the opponent team's agents (the trainer for a snapshot of the pool, else the
        game itself), when that changed: a new kind of opponent, a change of sides, or a restarted instance (which
        forgot; until this rollout ends the snapshot plays its agents)."""
        kind, path = self.opponent
        want = (kind, path, self.learning_team, tuple(getattr(getattr(self.envs, "launcher", None), "restarts", ())))
        if want == self.driving:
            return
        learner, opponent = self._ids()
        if self.driving is not None and self.driving[0] != POOL:  # the agents the games drove, back to the trainer
            self.game_acted = set_drivers(self.envs, np.concatenate([learner, opponent]), "trainer")
        if kind != POOL:
            self.game_acted = set_drivers(self.envs, opponent, kind, path, seed=int(self.rng.integers(2**31)))
        self.driving = want

    def scalars(self) -> dict:
        decided = self.matches - self.draws
        base = getattr(self.base, "scalars", dict)()  # (in the engine: perf/fragment_wait_s, perf/weights_s)
        out = {**base, "self_play/elo": self.elo, "self_play/opponent_elo": self.playing["elo"] if self.playing else self.elo,
               "self_play/pool_size": len(self.pool), "self_play/learning_team": self.learning_team}
        if decided:
            out["self_play/win_rate"] = self.wins / decided  # over the update's decided matches
        if len(self.opponents) > 1 or self.opponents[0][0] != POOL:
            out["self_play/opponent_is_pool"] = float(self.opponent is not None and self.opponent[0] == POOL)
            out["self_play/game_actions"] = self.game_acted  # the actions the games chose for the opponents so far
        self.matches = self.wins = self.draws = 0
        return out

    def evaluate(self, act: Callable, num_episodes: int, seed: int) -> list[float]:
        """The learner's returns of ``num_episodes`` deterministic matches on its side against the current opponent
        snapshot (deterministic too)."""
        learner, opponent = self._ids()
        opp = LoadedAgent(self._opp[0], self._opp[1].normalizer, self.single_observation_space,
                          self.single_action_space, self.env_id, self.steps) if self._opp else None

        def joint(obs, done):
            theirs = (opp.act(obs[opponent], done=done[opponent]) if opp is not None
                      else np.stack([self.single_action_space.sample() for _ in opponent]))
            return merge_actions([(learner, act(obs[learner], done=done[learner])), (opponent, theirs)],
                                 self.envs.num_envs)

        self._leave()
        return evaluate(joint, self.envs, num_episodes, seed, env_ids=learner)

    # ------------------------------------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """The whole state, for a checkpoint ("opponent": the entry of the snapshot playing, None before the first
        collection). Once that checkpoint is written, `checkpoint_saved` lets the files only older ones list go."""
        state = {"learning_team": self.learning_team, "elo": self.elo, "pool": copy.deepcopy(self.pool),
                 "opponent": copy.deepcopy(self.playing), "steps": self.steps, "last_save": self.last_save,
                 "last_swap": self.last_swap, "last_team_change": self.last_team_change,
                 "opponent_kind": list(self.opponent) if self.opponent else None,
                 "rng": self.rng.bit_generator.state, "args": {k: v for k, v in asdict(self.args).items()
                                                               if k.startswith("self_play")}}
        self.offered = self._in_use()
        return state

    def load_state_dict(self, state: Optional[dict]) -> None:
        """A checkpoint's state (--resume). Listed snapshots that are gone are left out, said in a note; one that is
        there but not this run's is refused in one line."""
        if not state:
            raise SelfPlayError("--resume with --self-play: the checkpoint has no self-play state (it was trained "
                                "without --self-play): start a new run")
        for key in ("learning_team", "elo", "steps", "last_save", "last_swap", "last_team_change"):
            setattr(self, key, state[key])
        self.pool = copy.deepcopy(state["pool"])
        kind = state.get("opponent_kind")  # (None: a checkpoint of an older trainer, or before the first draw)
        self.opponent = tuple(kind) if kind else (None if not state.get("opponent") else (POOL, None))
        self.rng.bit_generator.state = state["rng"]
        playing = state.get("opponent")
        if isinstance(playing, int):  # a checkpoint of an older trainer: the pool index of the snapshot playing
            playing = self.pool[playing] if 0 <= playing < len(self.pool) else None
        self.playing = next((p for p in self.pool if playing and p["file"] == playing["file"]), playing)
        self.listed = self.offered = self._in_use()
        gone = [e for e in [*self.pool, *([self.playing] if self.playing else [])]
                if not (self.pool_dir / e["file"]).is_file()]
        for entry in [*self.pool, *([self.playing] if self.playing else [])]:  # the rest must be this run's
            problem, _ = self._read_snapshot(self.pool_dir / entry["file"]) if entry not in gone else (None, None)
            if problem is not None:
                raise SelfPlayError(f"--resume: the self-play pool's snapshot {self.pool_dir / entry['file']} {problem}: "
                                    f"move it out of {self.pool_dir} and resume again (the pool goes on without it), "
                                    "or start a new run")
        if gone:
            names = sorted({e["file"] for e in gone})
            say(f"note: --resume: {len(names)} of the self-play pool's snapshots that the checkpoint lists are gone from "
                f"{self.pool_dir} ({', '.join(names)}): the pool goes on without them")
            self.pool = [p for p in self.pool if p not in gone]
            self.playing = None if self.playing in gone else self.playing
        # the snapshots a killed run wrote after its checkpoint: replayed, or deleted after the next checkpoint
        self.stale = {p.name for p in self.pool_dir.glob("snapshot_*.pt")} - self._in_use()

    def set_env_params(self, values: dict) -> None:
        self.base.set_env_params(values)  # both teams play the same course

    def close(self) -> None:
        self.base.close()


def self_play_rollouts(base, args, run_dir) -> SelfPlayRollouts:
    """--self-play's rollouts over ``base`` (rollout.LocalRollouts), or a SelfPlayError naming what does not fit."""
    if base.env_info is None:
        raise SelfPlayError(refusal("gym/self_play", env_id=args.env_id))
    return SelfPlayRollouts(base, args, run_dir)

