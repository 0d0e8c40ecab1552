"""Rollouts from Ray: `godot-ppo train ... --ray-address ADDRESS --ray-workers K`.

`RayRollouts` fills ppo.py's rollout slot (rollout.Rollouts) from Ray workers instead of this process's games. Each
worker is a Ray actor (ray_worker.RolloutWorker) that owns ``--num-instances`` game processes on its own node,
started by our launcher (ports, tokens, restarts, logs and clean-up exactly as on one machine), and runs
rollout.collect_rollout, the function the local path runs, on them, with the agent the run's flags describe
(trained_agent.make_agent: MLP or --lstm) and, with --rnd, the curiosity bonus. Once per update the learner (the
driver) puts the weights and the normalisation statistics in Ray's object store (one broadcast), every worker fills
its part of the rollout buffer (its fragment: rollout.RolloutBuffer's arrays for its envs, its agents' memories,
episode statistics, and the moments of the observations and returns it normalised), and `RayRollouts.collect` writes
the fragments side by side into the learner's buffer and merges the moments into the learner's Normalizer
(running_stats.py both takes them out and merges them). GAE and the PPO update then run unchanged. With --async the
next fragments are asked for before the update starts, so the workers never wait for it (async_rollouts.py). RND's warm-up
(random play priming its observation statistics) runs in the workers too; their moments are merged into the
learner's RND the same way.

In-engine actors (engine_actors.py): the driver decides once, by engine_actors.decide's one rule, on what the workers
report of their games at start (`ReportedGames`); when they run in the engine every collect's broadcast says so, and
each worker fills its fragment through an EngineActorRollouts over its own games (the policy file in its own folder on
its node) instead of stepping them. --async with Ray steps its games.

Where the work ran: RUN_DIR/ray_workers.json (one object per worker: worker, node_id, node_ip, pid, game_pids;
rewritten when a worker restarts), and TensorBoard's ray/worker_<i>_steps_per_s, ray/fragment_bytes,
ray/broadcast_s and ray/learner_s. Each worker's games log to RUN_DIR/workers/worker_<i>/logs/ on the worker's node
(the same path as the run folder on the driver; a temporary folder when it cannot be made there).

Faults: a worker actor that dies (its process killed, its node lost) is restarted by Ray up to --ray-max-restarts
times; its unfinished fragment is collected again by the new actor (fresh games, fresh episodes) and training goes on.
Past the limit `WorkerLostError` names the worker and the node and the run stops with a checkpoint. A node whose game
binary is missing or differs (SHA-256 of the binary and its .pck) is refused before training, naming the node.

Every worker sends a heartbeat each second (ray_cluster.Beats): a wait for a worker ends --step-timeout after its
last one (a stopped or stuck worker is named). Ray's own faults (ray_cluster.py): a lost GCS or local raylet is found while the learner waits for its workers
(each wait looks every WAIT_POLL_S) and stops the run with its checkpoint; when Ray ends the learner itself, the
guardian says so and releases the run's lock. A worker that dies during the final evaluation is restarted and
asked again, as during training; the fragments asked ahead by --async are cancelled when the run evaluates or ends.

Signals. ray.init() installs a SIGTERM handler in the driver (sys.exit, which would skip the checkpoint) and, for
``local``, the head node's (kill Ray's processes, exit). `connect` keeps Ray from installing it and puts back the
handlers that were in place before it (signals.signal_policy's), and holds a signal that arrives while Ray starts
until it stands, so SIGINT/SIGTERM/SIGHUP in the driver run ours first and only: the checkpoint is written,
then `close` ends the workers and stops a local Ray. In an actor, Ray's worker loop installs its SIGTERM handler
first and the launcher installs its own when the worker starts its games (launcher._install_cleanup_hooks): ours runs
first, closes the games, then calls Ray's (which exits the actor). A SIGKILLed actor cannot run anything: its games
get SIGKILL from the kernel (processes.spawn sets PR_SET_PDEATHSIG in every game, and the spawning thread lives as
long as the actor). A SIGKILLed driver: Ray ends the driver's actors (and a local Ray's processes, which share the
driver's fate), and their games follow them the same way.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from python_trainer.base.errors import one_line
from python_trainer.base.files import write_atomic
from python_trainer.base.flags import GoesWith, at_least, flag, positive
from python_trainer.base.processes import lower_priority
from python_trainer.envs.failures import WorkerLostError
from python_trainer.envs.game import GameExport, GodotGame
from python_trainer.rollout import NonFiniteEnvData, Rollouts
from python_trainer.variants.async_rollouts import AskedAhead, refresh_values, rollout_params
from python_trainer.variants.engine_actors import decide
from python_trainer.variants.ray_cluster import (  # noqa: F401 (LOOPBACK, RaySetupError: the tests' names here)
    LOCAL, LOOPBACK, Beats, RayHealth, RayLostError, RaySetupError, connect, listen_on_loopback,
)
from python_trainer.variants.ray_worker import RolloutWorker, export_digest, node_label, write_fragment

WORKERS_JSON = "ray_workers.json"
START_TIMEOUT_S = 180.0  # workers placed, binaries checked, games connected
RESTART_POLL_S = 0.2  # how often a restarting worker is asked again
WAIT_POLL_S = 0.5  # the learner's wait for its workers looks at Ray's health this often
GCS_WAIT_S = 5.0  # the heartbeats' actor answers within this


RAY = GoesWith("ray_address", "Ray rollout workers",
               "--ray-address local (this machine) or --ray-address HOST:PORT (a cluster)")  # every --ray-* flag's


@dataclass
class RayArgs:
    ray_address: Optional[str] = None
    """collect the rollouts with --ray-workers Ray actors, each running --num-instances games on its own node:
    `local` starts a Ray on this machine for the run; HOST:PORT joins the cluster that `ray start --head` started"""
    ray_workers: int = flag(2, at_least(1, "an integer >= 1 (rollout workers)", "2"), goes_with=RAY)
    """with --ray-address: how many rollout workers (the batch is their envs side by side)"""
    ray_cpus_per_worker: Optional[float] = flag(None, positive("3", "a number of CPUs > 0"), goes_with=RAY)
    """with --ray-address: the CPUs each worker reserves on its node (default: --num-instances + 1)"""
    ray_max_restarts: int = flag(3, at_least(0, "an integer >= 0", "3"), goes_with=RAY)
    """with --ray-address: how many times Ray restarts each worker that dies before training stops (with a
    checkpoint)"""


@dataclass
class ReportedGames:
    """What the workers reported of their games at start, as engine_actors.decide reads a GodotVecEnv: the dialect,
    the camera, every instance's agent count and env_info (all workers' instances, in worker order)."""
    dialect: Optional[str]
    image_layout: object
    agent_counts: list
    instance_env_infos: list

    @classmethod
    def of(cls, infos: list) -> "ReportedGames":
        return cls(infos[0]["dialect"], infos[0].get("image_layout"),
                   [n for info in infos for n in info["agent_counts"]],
                   [e for info in infos for e in info["instance_env_infos"]])


# ======================================================================================================================
# The driver's side (joining or starting Ray, and the guardian: ray_cluster.py)
# ======================================================================================================================
class RayRollouts(Rollouts):
    """K rollout workers on a Ray cluster filling the rollout slot (rollout.Rollouts): spaces, num_envs, env_info,
    `collect` (one update's rollout into the learner's buffer), `warm_up`, `evaluate`, `close`. ``args``: the run's
    flags (the train command's Args); ``env_kwargs``: make_vec_env's options for each worker's games; ``engine``: how
    a worker makes in-engine actors' rollouts over its games (run/learners.engine_rollouts)."""

    game_settings = None  # each worker's games are its own; ray_workers.json says where they run
    in_engine, actors, actors_why = False, None, None  # (args.json's in_engine; actors: why, sent with each collect)
    worker_scalars: dict = {}  # the last collect's mean of the workers' rollouts' scalars

    def __init__(self, game, args, run_dir, env_kwargs, say, engine=None):
        if args.ray_address == LOCAL:
            listen_on_loopback()  # before Ray is imported
        import ray

        self.run_dir, self.say = Path(run_dir), say
        self.address, self.num_workers = args.ray_address, args.ray_workers
        self.max_restarts = args.ray_max_restarts
        is_godot = isinstance(game, GodotGame)
        cpus = args.ray_cpus_per_worker or ((args.num_instances if is_godot else 0) + 1)
        self.workers, self.failures = [], [0] * self.num_workers
        self._down_since = [None] * self.num_workers  # when each worker's last counted death was, until it answers
        self.learner_s = self.beats = None
        self._silent = set()  # workers found silent (stopped, stuck): close kills them without asking
        self._last_end = None
        self.env_params = {}
        self.ahead = AskedAhead(args.max_policy_lag if args.async_rl else 0)  # (the broadcast, the calls) of each
        # a local Ray gets CPUs for every worker: the same oversubscription as --num-instances on one machine
        self.guardian = self.health = None
        self.guardian = connect(self.address, max(os.cpu_count() or 1, cpus * self.num_workers), self.run_dir)
        self.health = RayHealth(self.address, self.guardian)
        try:
            self._check_room(cpus)
            digest = None
            if is_godot and isinstance(game.export, GameExport):
                export = game.export
                digest = export_digest([p for p in (export.path, export.pck) if p.exists()])
            # SPREAD: one worker per node while nodes have room; max_task_retries=0: a dead worker's fragment is
            # asked for again by `collect` (it knows which worker and node it was), not silently by Ray
            remote = ray.remote(RolloutWorker).options(
                num_cpus=cpus, max_restarts=self.max_restarts, max_task_retries=0, scheduling_strategy="SPREAD"
            )
            argd = asdict(args)
            self.step_timeout = float(args.step_timeout)
            self.beats = ray.remote(Beats).options(num_cpus=0).remote()
            self.workers = [remote.remote(i, game, env_kwargs, argd, digest, beats=self.beats, engine=engine)
                            for i in range(self.num_workers)]
            refusals = self._get([w.check_binary.remote() for w in self.workers], "to be placed on the cluster's nodes",
                                 cpus)
            refused = [r for r in refusals if r]
            if refused:
                raise RaySetupError(f"{'; '.join(refused)}: copy the same exports to the same path on every host "
                                 "(see docs/ray.md: Running on several machines)")
            infos = self._get([w.start.remote() for w in self.workers], "to start their games", cpus)
        except BaseException:
            self.close()
            raise
        first = infos[0]
        for info in infos[1:]:
            if (info["observation_space"], info["action_space"]) != (first["observation_space"], first["action_space"]):
                self.close()
                raise RaySetupError(f"worker {info['worker']} reports other spaces than worker 0 "
                                 f"({info['observation_space']} / {info['action_space']})")
        self.single_observation_space, self.single_action_space = first["observation_space"], first["action_space"]
        self.env_info, self.agents_per_instance = first["env_info"], first["agents_per_instance"]
        self.image_layout = first.get("image_layout")  # a camera's: the fragments' obs come as uint8 (obs_store.py)
        counts = [info["num_envs"] for info in infos]
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).tolist()
        self.num_envs = int(self.offsets[-1])
        self.where = [{k: info[k] for k in ("worker", "node_id", "node_ip", "pid", "game_pids")} for info in infos]
        self._write_where()
        nodes = len({w["node_id"] for w in self.where})
        niced = ""
        if args.async_rl:  # a worker on this machine collects beside the update: see async_rollouts.py
            niced = f"; the learner at nice {lower_priority(args.learner_nice)}"
        say(f"godot-ppo: ray: {self.num_workers} workers on {nodes} node(s), {self.num_envs} envs{niced}; where: "
            f"{self.run_dir / WORKERS_JSON}")
        if is_godot:  # the one rule, on what the workers' games reported (a game it refuses: the workers end)
            try:
                self.in_engine, self.actors_why = decide(args, ReportedGames.of(infos))
            except BaseException:
                self.close()
                raise
            self.actors = self.actors_why if self.in_engine else None
            self.num_steps = args.num_steps

    # ------------------------------------------------------------------------------------------------------ setup
    def _check_room(self, cpus):
        """More workers than the cluster has CPUs for: say so instead of waiting forever."""
        import ray


        nodes = [n for n in ray.nodes() if n.get("Alive")]
        per_node = [float(n.get("Resources", {}).get("CPU", 0)) for n in nodes]
        room = sum(int(c // cpus) for c in per_node)
        if room < self.num_workers:
            raise RaySetupError(
                f"--ray-workers {self.num_workers} x {cpus:g} CPUs each (--ray-cpus-per-worker; default "
                f"--num-instances + 1) do not fit the Ray cluster at {self.address}: its {len(nodes)} node(s) have "
                f"{', '.join(f'{c:g}' for c in per_node)} CPUs, room for {room} worker(s); lower --ray-workers or "
                "--num-instances, or add nodes (`ray start --address=...`)"
            )

    def _get(self, refs, doing, cpus):
        import ray


        pending, deadline = list(refs), time.monotonic() + START_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            self.health.check()
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=WAIT_POLL_S)
        if pending:
            raise RaySetupError(f"{len(pending)} of {len(refs)} Ray workers ({cpus:g} CPUs each) were still waiting "
                             f"{doing} after {START_TIMEOUT_S:.0f} s: is the cluster at {self.address} busy, or "
                             "smaller than it says? (`ray status` shows it)")
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError as e:  # its message carries the games' log tails
                raise RaySetupError(f"Ray worker {i} on node {getattr(e, 'ip', '?')} failed {doing}: "
                                 f"{_cause(e)}") from None
            except ray.exceptions.RayActorError as e:
                raise RaySetupError(f"Ray worker {i} died {doing}: {one_line(e)}") from None
        return out

    def _write_where(self):
        write_atomic(self.run_dir / WORKERS_JSON, json.dumps(self.where, indent=2) + "\n")

    # ------------------------------------------------------------------------------------------------------ rollouts
    def startup_line(self) -> Optional[str]:
        """Which path each worker's rollouts take (the workers themselves were said as they started)."""
        if self.actors_why is None:  # not a Godot game
            return None
        if self.in_engine:
            return (f"actors: in the engine ({self.actors_why}): on each Ray worker, each instance samples the policy "
                    f"itself and sends fragments of {self.num_steps} steps x its agents")
        return f"actors: the trainer steps every agent ({self.actors_why}; on each Ray worker)"

    def _gather(self, method: str, *args) -> list:
        """``method(*args)`` on every worker, their results in worker order (`_results`)."""
        return self._results(self._ask(method, *args), method, args)

    def _ask(self, method: str, *args) -> dict:
        """{the call's ref: worker index} of ``method(*args)`` asked of every worker."""
        return {getattr(w, method).remote(*args): i for i, w in enumerate(self.workers)}

    def _actor_down(self, i: int) -> None:
        """Worker i's call failed: its actor died (one restart more, or WorkerLostError past --ray-max-restarts), or
        it is still restarting from that death (a call asked ahead by --async, or the call asked again too soon)."""
        if self._down_since[i] is not None:  # the same death
            if time.monotonic() - self._down_since[i] > START_TIMEOUT_S:
                raise WorkerLostError(f"Ray worker {i} did not come back within {START_TIMEOUT_S:.0f} s of its "
                                      "restart: check its node (`ray status`)")
            time.sleep(RESTART_POLL_S)  # Ray is restarting the actor: ask again shortly
            return
        self._down_since[i] = time.monotonic()
        self.failures[i] += 1
        where = self.where[i]
        if self.failures[i] > self.max_restarts:
            raise WorkerLostError(
                f"Ray worker {i} (pid {where['pid']}) on {node_label(where['node_ip'], where['node_id'])} "
                f"died after {self.failures[i] - 1} restart(s), the most --ray-max-restarts "
                f"{self.max_restarts} allows: check that node (`ray status`, its Ray logs in /tmp/ray and "
                f"RUN_DIR/workers/worker_{i}/logs there) or raise --ray-max-restarts"
            ) from None
        self.say(f"godot-ppo: ray: worker {i} (pid {where['pid']}) on {node_label(where['node_ip'], where['node_id'])} "
                 f"died; restart {self.failures[i]}/{self.max_restarts}, asking it again")

    def _results(self, pending: dict, method: str, args) -> list:
        """The results of the calls ``pending`` (`_ask`), in worker order. A worker that dies is restarted by Ray
        and asked again (up to --ray-max-restarts times); past that, or when a worker fails, WorkerLostError."""
        import ray

        results = [None] * self.num_workers
        silence_checked = time.monotonic()
        while pending:
            self.health.check()  # Ray itself must still stand (its GCS, the local raylet): looked at every 2 s
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_POLL_S)
            if not ready:
                if time.monotonic() - silence_checked > self.health_every:
                    self._check_silence(set(pending.values()), method)
                    silence_checked = time.monotonic()
                continue
            i = pending.pop(ready[0])
            done = ready[0]
            try:
                results[i] = ray.get(done)
                self._down_since[i] = None  # it answers: a later failure is a new death
            except ray.exceptions.RayActorError:  # the actor died: Ray restarts it, we ask the new one again
                self._actor_down(i)
                pending[getattr(self.workers[i], method).remote(*args)] = i
            except ray.exceptions.RayTaskError as e:
                if isinstance(e.cause, NonFiniteEnvData):
                    raise e.cause from None
                where, cause = self.where[i], _cause(e)
                if "\n" in cause:  # the whole error, the games' log tails included (the stop message is one line)
                    self.say(f"godot-ppo: ray: worker {i} failed:\n{cause}")
                raise WorkerLostError(f"Ray worker {i} on {node_label(where['node_ip'], where['node_id'])}: "
                                      f"{cause}") from None
        return results

    health_every = 2.0  # how often a wait asks the heartbeats how long each awaited worker has been silent

    def _check_silence(self, waited: set, method: str) -> None:
        """WorkerLostError naming a worker waited for that has sent no heartbeat for --step-timeout (stopped, stuck);
        one that is restarting (its death counted) is left to `_actor_down`."""
        import ray

        try:
            silent = ray.get(self.beats.silent_for.remote(), timeout=GCS_WAIT_S)
        except Exception:  # the heartbeats' actor is unreachable: Ray's own health says why (RayHealth)
            return
        for i in sorted(waited):
            if self._down_since[i] is None and silent.get(i, 0.0) > self.step_timeout:
                where = self.where[i]
                self._silent.add(i)  # close kills it without asking
                raise WorkerLostError(
                    f"Ray worker {i} (pid {where['pid']}) on {node_label(where['node_ip'], where['node_id'])} said "
                    f"nothing for {silent[i]:.0f} s while the learner waited for its {method!r} (--step-timeout "
                    f"{self.step_timeout:g}; it says it is alive every second): it is stopped or stuck")

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        """RND's warm-up in every worker (on its own games and seeds); their moments go into ``bonus``'s statistics."""
        for moments in self._gather("warm_up", steps, bonus.obs_rms.mean.shape[0]):
            if moments is not None:
                bonus.obs_rms.update_from_moments(*moments)

    def reset(self, normalizer, buf, seed: int) -> None:
        """Nothing here: each worker resets its own games at its first collect (and after an evaluation)."""

    def collect(self, agent, normalizer, buf, bonus=None) -> None:
        """One update's rollout: broadcast the weights and statistics, gather every worker's fragment into ``buf``
        (worker i's envs are the batch's columns offsets[i]:offsets[i+1]) and merge their normalisation moments.
        With --async the fragments were asked for at the last collect, and the next ones are asked for before this
        returns (async_rollouts.py)."""
        t0 = time.perf_counter()
        if self._last_end is not None:
            self.learner_s = t0 - self._last_end  # GAE, the PPO update and logging since the last collect
        ask = lambda: self._ask_fragments(agent, normalizer, bonus)  # noqa: E731
        ref, pending = self.ahead.take(ask)  # (without --async: asked now)
        fragments = self._results(pending, "collect", (ref,))
        self.fragment_bytes = 0
        buf.episodes = []
        for i, frag in enumerate(fragments):
            cols = slice(self.offsets[i], self.offsets[i + 1])  # worker i's envs in the batch
            self.fragment_bytes += write_fragment(buf, normalizer, frag, cols)
            if frag["where"] != self.where[i]:  # a restarted worker (new pid, maybe another node)
                self.where[i] = frag["where"]
                self._write_where()
        buf.episodes.sort(key=lambda e: e[0])
        # where a worker's rollout time went, on average over the workers (each acts for its own games)
        buf.policy_s, buf.env_wait_s = (float(np.mean([f["timing"][k] for f in fragments])) for k in (0, 1))
        buf.group_steps = fragments[0]["timing"][2]
        self.steps_per_s = [buf.obs.shape[0] * (self.offsets[i + 1] - self.offsets[i]) / f["seconds"]
                            for i, f in enumerate(fragments)]
        self.worker_scalars = {k: float(np.mean([f["scalars"][k] for f in fragments]))
                               for k in fragments[0].get("scalars", {})}
        self.ahead.ask_ahead(ask)  # --async: the next fragments, asked before the update starts
        if self.ahead.depth:  # --async: collected beside the update, and valued by the learner's critic instead
            buf.beside_s = float(np.mean([f["seconds"] for f in fragments]))
            refresh_values(agent, buf)
        self.collect_s = time.perf_counter() - t0
        self._last_end = time.perf_counter()

    def _ask_fragments(self, agent, normalizer, bonus) -> tuple:
        """Ask every worker for its next fragment, with the weights and statistics as they are (one broadcast):
        (the broadcast, the calls)."""
        import ray

        t0 = time.perf_counter()
        ref = ray.put({**rollout_params(agent, normalizer, bonus, self.env_params), "actors": self.actors})
        self.broadcast_s = time.perf_counter() - t0
        return ref, self._ask("collect", ref)

    def set_env_params(self, values: dict) -> None:
        """Every worker's games get ``values`` with the next collect's weights (GodotVecEnv.set_env_params)."""
        self.env_params = {**self.env_params, **values}

    def scalars(self) -> dict:
        """Per-worker steps/s and this update's costs, for TensorBoard."""
        out = {f"ray/worker_{i}_steps_per_s": sps for i, sps in enumerate(self.steps_per_s)}
        out.update({"ray/fragment_bytes": self.fragment_bytes, "ray/broadcast_s": self.broadcast_s,
                    "ray/collect_s": self.collect_s})
        out.update(self.worker_scalars)  # in the engine: the workers' mean perf/fragment_wait_s and perf/weights_s
        if self.learner_s is not None:
            out["ray/learner_s"] = self.learner_s
        return {**out, **(self.ahead.scalars() if self.ahead.depth else {})}

    def evaluate(self, act, num_episodes, seed):
        """The deterministic evaluation (rollout.evaluate) on worker 0's games; a worker that dies meanwhile is
        restarted and asked again, as during training (`_results`)."""
        self._cancel_ahead()  # the fragments asked ahead are not needed: those not begun are cancelled
        args = (act, num_episodes, seed)
        return self._results({self.workers[0].evaluate.remote(*args): 0}, "evaluate", args)[0]

    def _cancel_ahead(self) -> None:
        """Cancel the fragments asked ahead by --async (a worker's queued calls; the one it is collecting ends)."""
        import ray

        for _, pending in self.ahead.drop():
            for ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:
                    pass

    def close(self):
        """End the workers (their games first) and leave the cluster (stopping it when we started it). After a lost
        Ray, no call to it: the guardian ends the local Ray's processes, and the process ends once it has said why
        (ray_cluster.RayHealth.leave_now)."""
        import ray

        lost = self.health is not None and self.health.lost is not None
        if self.workers and not lost:
            try:
                self._cancel_ahead()
                asked = [w.close.remote() for i, w in enumerate(self.workers) if i not in self._silent]
                ray.wait(asked, num_returns=len(asked), timeout=15)
            except Exception:
                pass
            for w in [*self.workers, *([self.beats] if self.beats is not None else [])]:
                try:
                    ray.kill(w, no_restart=True)
                except Exception:
                    pass
        self.workers = []
        if lost:
            self.health.leave_now()
        elif ray.is_initialized():
            ray.shutdown()
        if self.guardian is not None:  # a local Ray: it ends what ray.shutdown left, then itself
            self.guardian.end()
            self.guardian = None


def _cause(e) -> str:
    """A worker's error in one piece: its message (with the games' log tails the launcher put in it)."""
    cause = getattr(e, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else one_line(e)
