"""A rollout worker: an actor of `RayRollouts` (ray_rollouts.py) on its node, or --async's collector process on this
machine (async_rollouts.py). Its games, the run's agent with the learner's weights, and one fragment of the rollout
per update: the buffer's arrays for its envs (a camera's images as uint8, obs_store.py), its agents' memories,
episode statistics, and the moments its normalisation statistics added; `write_fragment` is the learner's side. The
class is made remote in `RayRollouts`, so importing this module does not import Ray.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Optional

import numpy as np
import torch

from python_trainer.base.running_stats import RunningMeanStd
from python_trainer.envs.vec_env import make_vec_env
from python_trainer.normalization import Normalizer
from python_trainer.rollout import LocalRollouts, RolloutBuffer, evaluate
from python_trainer.variants.rnd import RND
from python_trainer.variants.trained_agent import make_agent

HEARTBEAT_S = 1.0  # a Ray worker tells the learner's Beats it is alive this often
WORKER_SEED_STRIDE = 1000  # worker i's games are seeded 1000 * i past the run's: distinct games and episodes


def export_digest(paths) -> dict:
    """{path: sha256} of the files a game runs from (the binary and its .pck), those that exist."""
    out = {}
    for p in paths:
        h = hashlib.sha256()
        try:
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except FileNotFoundError:
            out[str(p)] = None
            continue
        out[str(p)] = h.hexdigest()
    return out


def node_label(node_ip, node_id):
    """How a message names a Ray node."""
    return f"node {node_ip} (Ray node id {node_id[:12]})"


def _slim_infos(infos):
    """What RunLog.record_episodes reads of an ended step's infos (episode statistics, numeric final infos)."""
    out = {}
    if "_episode" in infos:
        out["_episode"] = np.asarray(infos["_episode"])
        out["episode"] = {k: np.asarray(infos["episode"][k]) for k in ("r", "l")}
    if "_final_info" in infos:
        mask = np.asarray(infos["_final_info"])
        final = np.empty(len(mask), dtype=object)
        for i in np.flatnonzero(mask):
            final[i] = {k: v for k, v in (infos["final_info"][i] or {}).items()
                        if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)}
        out["_final_info"], out["final_info"] = mask, final
    return out


class RolloutWorker:
    """One rollout worker: its games (a VectorEnv made by make_vec_env on this node), the run's agent, a Normalizer
    and (--rnd) the bonus, which take the learner's weights and statistics at each `collect`. The games start at the
    first `collect` (or `start`), so an actor Ray restarts after a crash starts fresh ones. ``args``: the run's
    flags as a dict. ``engine``: how the run makes in-engine actors' rollouts (run/learners.engine_rollouts, called
    as ``engine(envs, args, run_dir, why)``); a collect whose params carry ``"actors"`` (why the driver decided they
    run in the engine) fills its buffer through them, in this worker's own folder on its node."""

    def __init__(self, index, game, env_kwargs, args, digest, node=None, beats=None,
                 engine: Optional[Callable] = None):
        self.index, self.game, self.env_kwargs, self.args, self.digest = index, game, dict(env_kwargs), args, digest
        self.env_seed = self.env_kwargs["seed"] + WORKER_SEED_STRIDE * index  # its games' seed, and their resets'
        self.on_ray = node is None  # else async_rollouts.py's worker process on this machine, which names its own
        if self.on_ray:
            import ray

            node = ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
            if beats is not None:  # the learner's wait for this worker runs from its last heartbeat
                threading.Thread(target=_beat, args=(beats, index), daemon=True).start()
        self.node_id, self.node_ip = node
        self.envs = self.agent = self.normalizer = self.bonus = self.buf = None
        self.engine, self.rollouts = engine, None  # LocalRollouts, or EngineActorRollouts (the games act themselves)
        self.env_params = {}  # the environment parameters its games were given (a restarted actor gives them again)

    def where(self) -> dict:
        pids = self.envs.launcher.pids() if getattr(self.envs, "launcher", None) is not None else []
        return {"worker": self.index, "node_id": self.node_id, "node_ip": self.node_ip, "pid": os.getpid(),
                "game_pids": pids}

    def check_binary(self) -> Optional[str]:
        """None when this node has the driver's game files, else why not (the node named)."""
        if not self.digest:
            return None
        here = export_digest(self.digest)
        for path, want in self.digest.items():
            if here[path] is None:
                return f"{node_label(self.node_ip, self.node_id)} has no game file at {path}"
            if here[path] != want:
                return (f"{node_label(self.node_ip, self.node_id)} has a different {path} than the driver "
                        f"(SHA-256 {here[path][:12]}... vs {want[:12]}...)")
        return None

    def start(self) -> dict:
        """Start the games (once per actor life) and say what they are."""
        if self.envs is None:
            torch.set_num_threads(max(1, self.args["torch_threads"]))
            seed = self.args["seed"] + self.index  # its own sampling streams
            np.random.seed(seed)
            torch.manual_seed(seed)
            kwargs = dict(self.env_kwargs)
            if self.on_ray:  # a Ray worker's games log apart (the local worker's, in the run's logs/)
                kwargs["run_dir"] = str(_worker_dir(self.env_kwargs["run_dir"], self.index))
            self.envs = make_vec_env(self.game, **dict(kwargs, seed=self.env_seed))
            self.rollouts, self._reset = None, True
        envs = self.envs
        launcher = getattr(envs, "launcher", None)  # what the driver's engine_actors.decide reads (ReportedGames)
        return {**self.where(), "num_envs": envs.num_envs, "observation_space": envs.single_observation_space,
                "dialect": getattr(envs, "dialect", None), "agent_counts": getattr(envs, "agent_counts", None),
                "instance_env_infos": [inst.env_info for inst in launcher.instances] if launcher else None,
                "action_space": envs.single_action_space, "env_info": getattr(envs, "env_info", None),
                "agents_per_instance": getattr(envs, "agents_per_instance", None),
                "image_layout": getattr(envs, "image_layout", None),
                "game_settings": getattr(envs, "game_settings", None),
                "startup_line": envs.startup_line() if getattr(envs, "game_settings", None) else None}

    def warm_up(self, steps, rnd_obs_dim) -> Optional[tuple]:
        """RND's warm-up on this worker's games: ``steps`` steps of random actions; returns the (mean, var, count)
        of their observations for the learner's RND statistics (the next collect starts from fresh episodes)."""
        self.start()
        self._leave()
        rms = RunningMeanStd(shape=(rnd_obs_dim,))
        self.envs.reset(seed=self.env_seed)
        for _ in range(steps):
            rms.update(self.envs.step(self.envs.action_space.sample())[0])
        self._reset = True
        return rms.moments_since(np.zeros(rnd_obs_dim), np.ones(rnd_obs_dim), RunningMeanStd().count)

    def _load(self, params) -> None:
        """The learner's weights and statistics (the agent, normaliser and bonus are made at the first call)."""
        envs, a = self.envs, self.args
        obs_dim = envs.single_observation_space.shape[0]
        if self.agent is None:
            self.agent = make_agent(obs_dim, envs.single_action_space, a, getattr(envs, "image_layout", None))
            self.normalizer = Normalizer(obs_dim, envs.num_envs, a["gamma"], False, False)
            self.bonus = RND(obs_dim, a["rnd_ext_coef"], a["rnd_coef"]) if a.get("rnd") else None
            self.buf = RolloutBuffer(a["num_steps"], envs.num_envs, obs_dim, self.agent, self.bonus)
        self.agent.load_state_dict({k: torch.tensor(v) for k, v in params["model"].items()})
        self.normalizer.load_state_dict(params["normalizer"])
        if self.bonus is not None:
            self.bonus.load_state_dict({k: torch.tensor(v) for k, v in params["rnd"]["model"].items()})
            self.bonus.load_stats_state_dict(params["rnd"]["stats"])

    def collect(self, params) -> dict:
        """One fragment with the learner's weights and statistics (``params``: the broadcast of this update)."""
        t0 = time.perf_counter()
        self.start()
        self._load(params)
        envs, norm, buf = self.envs, self.normalizer, self.buf
        rollouts = self._rollouts(params.get("actors"))
        if params.get("env_params", {}) != self.env_params:  # the learner's curriculum moved on (or it is our first)
            rollouts.set_env_params(params["env_params"])
            self.env_params = dict(params["env_params"])
        before = [r.moments() for r in (norm.obs_rms, norm.return_rms)]
        if self._reset:
            rollouts.reset(norm, buf, self.env_seed)
            buf.next_done[:] = 0.0
            buf.state = self.agent.initial_state(envs.num_envs)
            self._reset = False
        rollouts.collect(self.agent, norm, buf, self.bonus)
        fragment = {f: getattr(buf, f) for f in buf.fields}
        fragment["initial_state"], fragment["state"] = buf.initial_state, buf.state  # the agents' memories
        fragment["timing"] = (buf.policy_s, buf.env_wait_s, buf.group_steps)
        fragment["episodes"] = [(t, _slim_infos(infos)) for t, infos in buf.episodes]
        fragment["moments"] = [r.moments_since(*b) for b, r in zip(before, (norm.obs_rms, norm.return_rms))]
        fragment["where"] = self.where()
        fragment["scalars"] = rollouts.scalars()  # in the engine: perf/fragment_wait_s, perf/weights_s
        fragment["seconds"] = time.perf_counter() - t0
        return fragment

    def _rollouts(self, actors: Optional[str]):
        """This worker's rollouts: in-engine actors when the driver decided so (``actors``: why), made once per
        games' life; else the trainer steps every agent (collect_rollout, as the local path)."""
        if self.rollouts is None:
            if actors is not None:
                where = _worker_dir(self.env_kwargs["run_dir"], self.index)  # its policy file, on its own node
                self.rollouts = self.engine(self.envs, SimpleNamespace(**self.args), where, actors)
            else:
                self.rollouts = LocalRollouts(self.envs, self.args["pipeline"])
        return self.rollouts

    def _leave(self) -> None:
        """Before any other message to the games: in-engine actors leave actor mode (EngineActorRollouts.leave)."""
        getattr(self.rollouts, "leave", lambda: None)()

    def evaluate(self, act, num_episodes, seed):
        self.start()
        self._leave()
        self._reset = True  # evaluation resets the games; a later collect starts from fresh episodes
        return evaluate(act, self.envs, num_episodes, seed)

    def close(self):
        if self.envs is not None:
            self.envs.close()
            self.envs = self.rollouts = None


def _beat(beats, index) -> None:
    """A Ray worker's heartbeat to ray_cluster.Beats, every HEARTBEAT_S while its process runs (a stopped or stuck
    worker says nothing, and the learner names it --step-timeout after its last word)."""
    while True:
        try:
            beats.beat.remote(index)
        except Exception:
            return
        time.sleep(HEARTBEAT_S)


def write_fragment(buf: RolloutBuffer, normalizer: Normalizer, frag: dict, cols: slice) -> int:
    """The learner's side of `RolloutWorker.collect`: a worker's fragment into the columns ``cols`` of ``buf`` (its
    envs in the batch), its episodes added to buf.episodes, the moments it normalised merged into ``normalizer``.
    Returns the fragment's bytes."""
    nbytes = 0
    for name in buf.fields:
        if name in ("next_obs", "next_done"):  # (num_envs, ...)
            getattr(buf, name)[cols] = frag[name]
        else:  # (num_steps, num_envs, ...)
            getattr(buf, name)[:, cols] = frag[name]
        nbytes += frag[name].nbytes
    buf.initial_state[cols], buf.state[cols] = frag["initial_state"], frag["state"]  # (--lstm: the memories)
    buf.episodes += frag["episodes"]  # (t, infos of the envs of one group of the worker's instances)
    for rms, moments in zip((normalizer.obs_rms, normalizer.return_rms), frag["moments"]):
        if moments is not None:  # None: nothing normalised (that normalisation is off)
            rms.update_from_moments(*moments)
    return nbytes


def _worker_dir(run_dir, index) -> Path:
    """Where worker ``index`` keeps its games' logs on its node: RUN_DIR/workers/worker_<i>, or a temporary folder
    under the run's name when that path cannot be made there."""
    path = Path(run_dir) / "workers" / f"worker_{index}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except OSError:
        path = Path(tempfile.gettempdir()) / "godot-ppo" / Path(run_dir).name / "workers" / f"worker_{index}"
        path.mkdir(parents=True, exist_ok=True)
        return path
