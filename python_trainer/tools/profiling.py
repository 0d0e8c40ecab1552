"""`godot-ppo profile`: how much faster are headless instances than windowed ones, and what does each cost?

    godot-ppo profile --modes headless,windowed --instances 1,2,4,8 --agents 16 --seconds 10
    godot-ppo profile --modes headless --instances 1,2 --steps 2000 --policy runs/ball_chase__ppo__1__1700000000
    godot-ppo profile ... --compare-training --compare-seconds 60

For every configuration (mode x instance count) the profiler starts the instances through the launcher (as
`vec_env.GodotVecEnv`, exactly what training uses), resets them, runs ``--warmup-steps`` steps, then measures a
fixed window (``--steps`` vector steps or ``--seconds`` of wall clock):

* throughput, the trainer's view: agent-steps/s and sync round trips/s (one round trip = send the actions to every
  instance, then read every reply); the game's own physics frames/s and, windowed, rendered frames/s, from the
  differences of the counters of the game's ``{"type": "stats"}`` reply at both ends of the window;
* headless only, where the time goes: the engine-only rate (as many headless processes at once running
  ``--benchmark_steps``: random actions chosen inside the engine, no trainer, the limit of the sync loop) before
  the launch, the synced rate's share of it, and with 2 or more instances the same window again pipelined as
  training runs it (``env.groups``: one half of the instances simulates while the other half's actions are chosen);
* cost: a psutil thread reads every ``--sample-interval`` s the CPU times (user, system), resident memory and
  thread count of each instance, of this Python process, of the Xvfb the launcher started (if any) and of the whole
  machine. CPU % is in "percent of one core" (0..100 x cores); "other" is the machine's CPU use that is none of
  ours (other users' jobs: a large value means the measurement was contaminated).

Outputs in ``--out`` (default ``runs/profile_<time>/``, rewritten after every configuration so Ctrl-C keeps what
was measured): profile.json (machine, every sample, every summary), profile.csv (one row per configuration),
profile.md (the table printed at the end, with the verdict), profile.png. Instance logs go to
``instances/<mode>_x<n>/logs/``. An instance that crashes marks its configuration "failed" (with the log tail) and
the profile goes on.

``--compare-training`` then trains PPO (``python -m python_trainer.ppo``, a child process stopped with SIGINT, which
PPO handles by checkpointing) for the same wall-clock budget on the fastest headless and the fastest windowed
configuration and reports the episodic return reached and its gain per wall-clock minute.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import psutil

from python_trainer.base import paths
from python_trainer.base.errors import one_line
from python_trainer.base.files import OutputError, atomic_output, check_output, write_error
from python_trainer.base.flags import add_connect_timeout
from python_trainer.envs.game import GameError, GameInstance, GodotGame, add_game_arguments, game_environ, godot_game
from python_trainer.base.processes import end_process_tree, read_log_tail, run_to_end, spawn
from python_trainer.envs.protocol import GODOT_RL

MODES = ("headless", "windowed")
DEFAULT_INSTANCES = (1, 2, 4, 8)
DEFAULT_SECONDS = 10.0
DEFAULT_WARMUP_STEPS = 50
ROUGH_OUTPUT_BYTES = 8 * 2**20  # the report's four files and the instances' logs, checked free before profiling
SCALING_GAIN = 0.10  # "throughput stops growing": the next instance count adds less than this fraction
CPU_BOUND_FRACTION = 0.85  # the machine is CPU-bound when this much of all cores is busy
STATS_TIMEOUT_S = 10.0
PROG = "godot-ppo profile"


@dataclass(frozen=True)
class Config:
    mode: str
    instances: int
    agents: int

    @property
    def key(self) -> str:
        return f"{self.mode}_x{self.instances}"

    @property
    def headless(self) -> bool:
        return self.mode == "headless"


# ======================================================================================================================
# Command line
# ======================================================================================================================
def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def _positive_int_list(text: str) -> list[int]:
    items = [t.strip() for t in text.split(",")]
    bad = [t for t in items if not t.isdigit() or int(t) < 1]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"must be a comma-separated list of positive integers (e.g. 1,2,4,8), got {text!r} (bad: {', '.join(map(repr, bad))})"
        )
    return sorted(set(int(t) for t in items))


def _mode_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in MODES]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"unknown mode {', '.join(map(repr, bad)) or repr(text)}: valid modes are {', '.join(MODES)} "
            "(comma-separated, e.g. headless,windowed)"
        )
    return [m for m in MODES if m in items]  # headless first, duplicates dropped


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Profile headless against windowed Godot instances: throughput and cost per instance.",
        epilog="CPU %% is percent of one core (0..100 x cores). Windowed instances need a display: without $DISPLAY "
               "the launcher starts Xvfb.",
    )
    add_game_arguments(p)
    p.add_argument("--modes", type=_mode_list, default=list(MODES), help=f"comma-separated, from {','.join(MODES)} (default: all)")
    p.add_argument("--instances", type=_positive_int_list, default=list(DEFAULT_INSTANCES),
                   help="comma-separated instance counts (default: 1,2,4,8)")
    p.add_argument("--agents", type=_positive_int, default=None,
                   help="agents per instance, passed as --agents (default: the game's own choice)")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--steps", type=_positive_int, default=None, help="measure this many vector steps per configuration")
    window.add_argument("--seconds", type=_positive_float, default=None,
                        help=f"measure this many seconds per configuration (default: {DEFAULT_SECONDS:g})")
    p.add_argument("--warmup-steps", type=_non_negative_int, default=DEFAULT_WARMUP_STEPS,
                   help="vector steps before the window (default: %(default)s)")
    p.add_argument("--policy", default="random",
                   help="random (default), or a training run folder / model.pt whose deterministic actions are used")
    p.add_argument("--out", default=None, help="output folder (default: runs/profile_<time>/)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-interval", type=_positive_float, default=0.25, help="psutil sampling period in s (default: %(default)s)")
    p.add_argument("--no-engine-benchmark", action="store_true",
                   help="skip the engine-only rates (the headless binary's --benchmark_steps, as many processes "
                        "as instances)")
    p.add_argument("--compare-training", action="store_true",
                   help="then train PPO on the fastest headless and the fastest windowed configuration")
    p.add_argument("--compare-seconds", type=_positive_float, default=60.0,
                   help="wall-clock budget of each comparison training (default: %(default)s)")
    add_connect_timeout(p)
    return p


# ======================================================================================================================
# The machine, the engine-only reference rate
# ======================================================================================================================
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), for reports and recorded fixtures."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def describe_machine() -> dict:
    vm = psutil.virtual_memory()
    return {
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "cpu_model": cpu_model(),
        "memory_total_mb": round(vm.total / 2**20),
        "memory_available_mb_at_start": round(vm.available / 2**20),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "gymnasium": _version("gymnasium"),
        "display": os.environ.get("DISPLAY"),
        "xvfb": shutil.which("Xvfb"),
    }


def _one_engine_run(cmd, timeout: float) -> Optional[dict]:
    try:
        out = run_to_end(cmd, timeout, env=game_environ())
    except OSError:
        return None
    for line in out.stdout.splitlines():
        if line.startswith("{") and '"benchmark"' in line:
            try:
                return json.loads(line)["benchmark"]
            except (ValueError, KeyError):
                return None
    return None


def engine_benchmark(game: GodotGame, agents: Optional[int], steps: int = 3000, timeout: float = 60.0,
                     instances: int = 1) -> Optional[dict]:
    """The headless binary's in-engine rate with random actions and no trainer (``--benchmark_steps``).

    With ``instances`` > 1, that many processes run at once (the limit for as many synced instances on this
    machine) and ``agent_steps_per_second`` is the sum of their rates; None when any of them failed.
    """
    try:
        cmd = GameInstance(game, agents=agents).command(f"--benchmark_steps={steps}")
    except GameError:
        return None
    with ThreadPoolExecutor(max_workers=instances) as pool:
        runs = list(pool.map(lambda _: _one_engine_run(cmd, timeout), range(instances)))
    if any(r is None for r in runs):
        return None
    return {**runs[0], "instances": instances,
            "agent_steps_per_second": sum(r["agent_steps_per_second"] for r in runs),
            "per_instance": [r["agent_steps_per_second"] for r in runs]}


# ======================================================================================================================
# Measuring: the game's stats message and the psutil sampler
# ======================================================================================================================
def request_stats(conns, timeout: float = STATS_TIMEOUT_S) -> list[dict]:
    """Ask every instance for its engine counters (send to all, then read all), like a step."""
    for conn in conns:
        conn.send({"type": "stats"})
    return [conn.recv(timeout=timeout, expect="stats") for conn in conns]


class ResourceSampler:
    """A thread reading CPU times, RSS and threads of given processes (and the machine's CPU) every ``interval`` s.

    ``groups`` maps a role ("instance", "python", "xvfb") to pids. Samples are cumulative readings; `intervals()`
    turns them into per-interval percentages and `summary()` into whole-window averages.
    """

    def __init__(self, groups: dict[str, list[int]], interval: float = 0.25):
        self.interval = float(interval)
        self.procs: list[tuple[str, psutil.Process]] = []
        for role, pids in groups.items():
            for pid in pids:
                try:
                    self.procs.append((role, psutil.Process(pid)))
                except psutil.Error:
                    pass
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="profile-sampler", daemon=True)
        self.cores = psutil.cpu_count() or 1

    def _read(self) -> dict:
        cpu = psutil.cpu_times()._asdict()
        total = sum(v for k, v in cpu.items() if k not in ("guest", "guest_nice"))  # guest time is inside user
        idle = cpu["idle"] + cpu.get("iowait", 0.0)
        row = {"t": time.perf_counter(), "machine_busy": total - idle, "machine_total": total, "procs": {}}
        for role, p in self.procs:
            try:
                with p.oneshot():
                    ct = p.cpu_times()
                    row["procs"][p.pid] = {"role": role, "user": ct.user, "system": ct.system,
                                           "rss": p.memory_info().rss, "threads": p.num_threads()}
            except psutil.Error:  # gone (crashed, or being closed)
                pass
        return row

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.readings.append(self._read())

    def start(self) -> None:
        self.readings.append(self._read())
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.readings.append(self._read())

    def _delta(self, a: dict, b: dict) -> dict:
        """Per-process and machine CPU % (of one core) between two readings."""
        dt = max(b["t"] - a["t"], 1e-9)
        total = max(b["machine_total"] - a["machine_total"], 1e-9)
        out = {"seconds": dt, "machine_cpu_pct": 100.0 * self.cores * (b["machine_busy"] - a["machine_busy"]) / total,
               "procs": {}}
        for pid, pb in b["procs"].items():
            pa = a["procs"].get(pid)
            if pa is None:
                continue
            out["procs"][pid] = {
                "role": pb["role"],
                "cpu_user_pct": 100.0 * (pb["user"] - pa["user"]) / dt,
                "cpu_system_pct": 100.0 * (pb["system"] - pa["system"]) / dt,
                "rss_mb": pb["rss"] / 2**20,
                "threads": pb["threads"],
            }
        return out

    def intervals(self) -> list[dict]:
        """Every sample as JSON-friendly per-interval values (t = seconds since the window began)."""
        if not self.readings:
            return []
        t0 = self.readings[0]["t"]
        rows = []
        for a, b in zip(self.readings, self.readings[1:]):
            d = self._delta(a, b)
            rows.append({
                "t": round(b["t"] - t0, 4),
                "machine_cpu_pct": round(d["machine_cpu_pct"], 2),
                "procs": [{"pid": pid, **{k: (round(v, 2) if isinstance(v, float) else v) for k, v in p.items()}}
                          for pid, p in d["procs"].items()],
            })
        return rows

    def summary(self) -> dict:
        """Whole-window averages: CPU from the first and last readings, memory and threads over all samples."""
        if len(self.readings) < 2:
            return {}
        first, last = self.readings[0], self.readings[-1]
        d = self._delta(first, last)

        def role_stats(role):
            cpu = [p for p in d["procs"].values() if p["role"] == role]
            if not cpu:
                return None
            samples = [p for r in self.readings for p in r["procs"].values() if p["role"] == role]
            return {
                "count": len(cpu),
                "cpu_user_pct": sum(p["cpu_user_pct"] for p in cpu),  # summed over the role's processes
                "cpu_system_pct": sum(p["cpu_system_pct"] for p in cpu),
                "rss_mb_per_process": float(np.mean([p["rss"] for p in samples])) / 2**20,
                "rss_mb_max": max(p["rss"] for p in samples) / 2**20,
                "threads_per_process": float(np.mean([p["threads"] for p in samples])),
            }

        roles = {role: role_stats(role) for role in ("instance", "python", "xvfb")}
        ours = sum(r["cpu_user_pct"] + r["cpu_system_pct"] for r in roles.values() if r)
        py = roles["python"]
        return {"seconds": d["seconds"], "samples": len(self.readings) - 1, "cores": self.cores,
                "machine_cpu_pct": d["machine_cpu_pct"], "ours_cpu_pct": ours,
                "other_cpu_pct": max(0.0, d["machine_cpu_pct"] - ours),
                "python_share_of_ours": (py["cpu_user_pct"] + py["cpu_system_pct"]) / ours if py and ours > 0 else None,
                **roles}


# ======================================================================================================================
# Policies
# ======================================================================================================================
def load_policy(spec: str, env_id: str):
    """None for random actions, else trained_agent.LoadedAgent (raises ValueError with a readable reason)."""
    if spec == "random":
        return None
    path = Path(spec)
    if not path.exists():
        raise ValueError(f"--policy {spec}: no such run folder or model file (give `random` or a training run folder)")
    import torch

    from python_trainer.variants.trained_agent import load_agent  # torch: only with a trained policy

    # One thread: for a 64-64 MLP on a few agents, torch's default thread pool costs 30x more than it saves (13 ms
    # instead of 0.4 ms per call on 2 busy cores), which would measure torch's spinning instead of the instances.
    torch.set_num_threads(1)
    try:
        loaded = load_agent(path)
    except Exception as e:
        raise ValueError(f"--policy {spec}: cannot load a trained agent from it ({one_line(e)[:200]})") from None
    if loaded.env_id != env_id:
        raise ValueError(f"--policy {spec}: that agent was trained on {loaded.env_id!r}, not {env_id!r}")
    return loaded


def _actor(policy, env) -> Callable:
    """obs of n envs (the batch or a group of it) -> their actions."""
    if policy is None:
        def random_actions(obs):
            a = env.action_space.sample()
            n = len(obs)
            return {k: v[:n] for k, v in a.items()} if isinstance(a, dict) else a[:n]
        return random_actions
    if policy.observation_space.shape != env.single_observation_space.shape:
        raise ValueError(
            f"the policy expects observations of shape {policy.observation_space.shape}, the game gives "
            f"{env.single_observation_space.shape}"
        )
    return lambda obs: policy.act(obs, deterministic=True)


def run_window(env, act: Callable, obs, steps: Optional[int] = None, seconds: Optional[float] = None,
               pipelined: bool = False):
    """Step ``env`` for ``steps`` vector steps (or for ``seconds``); returns (vector steps, seconds, last obs).

    Strict turns (``env.step``): every instance gets its actions, then every reply is read, so the games idle while
    Python chooses. Pipelined (``env.groups``, as training does with 2 or more instances): a group's next actions go
    out as soon as its replies are in, so one group simulates while the other's actions are chosen.
    """
    def more(n, t0):
        return n < steps if steps is not None else time.perf_counter() - t0 < seconds

    n, t0 = 0, time.perf_counter()
    if not pipelined:
        while more(n, t0):
            obs = env.step(act(obs))[0]
            n += 1
        return n, time.perf_counter() - t0, obs
    obs = [obs[g] for g in env.groups]
    in_flight = set()
    try:
        for i in range(len(obs)):
            env.step_async(act(obs[i]), i)
            in_flight.add(i)
        while more(n, t0):
            for i in range(len(obs)):
                in_flight.discard(i)
                obs[i] = env.step_wait(i)[0]
                env.step_async(act(obs[i]), i)
                in_flight.add(i)
            n += 1
        seconds = time.perf_counter() - t0
        for i in sorted(in_flight):  # the replies to the last actions sent, outside the window
            in_flight.discard(i)
            obs[i] = env.step_wait(i)[0]
        return n, seconds, np.concatenate(obs)
    finally:
        for i in sorted(in_flight):  # an error halfway: leave no reply unread
            env.step_wait(i)


# ======================================================================================================================
# One configuration
# ======================================================================================================================
def _rate(before: list[dict], after: list[dict], key: str) -> list[float]:
    """Per-instance counter rate over the game's own clock (time_usec)."""
    rates = []
    for a, b in zip(before, after):
        dt = (b["time_usec"] - a["time_usec"]) / 1e6
        rates.append((b[key] - a[key]) / dt if dt > 0 else 0.0)
    return rates


def profile_config(cfg: Config, opts, out_dir: Path, policy, report: Callable[[str], None]) -> dict:
    """Launch, warm up, measure; never raises except KeyboardInterrupt (a failure is returned as status "failed")."""
    from python_trainer.envs.vec_env import make_vec_env

    result: dict = {"key": cfg.key, "mode": cfg.mode, "instances": cfg.instances, "agents": cfg.agents,
                    "status": "failed", "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    run_dir = out_dir / "instances" / cfg.key
    result["log_dir"] = str(run_dir / "logs")
    env = sampler = None
    try:
        # A game made with godot_rl_agents' plugin has neither --benchmark_steps nor the "stats" message: it is
        # measured from outside only (our rates, psutil's costs; physics frames = decision steps x action repeat).
        if cfg.headless and not opts.no_engine_benchmark and opts.game.rl_sync:  # before the launch: nothing else running
            eb = engine_benchmark(opts.game, cfg.agents, instances=cfg.instances)
            result["engine_only_agent_steps_per_second"] = eb["agent_steps_per_second"] if eb else None
        t = time.perf_counter()
        env = make_vec_env(opts.game, num_instances=cfg.instances, agents_per_instance=cfg.agents,
                           headless=cfg.headless, seed=opts.seed, run_dir=run_dir, max_restarts=0, report=report,
                           connect_timeout=opts.connect_timeout)  # fmt: skip
        result["launch_seconds"] = round(time.perf_counter() - t, 3)
        result["agents"] = env.num_envs // cfg.instances  # what the game simulates (it may ignore --agents)
        launcher = env.launcher
        result["display"] = launcher.display
        result["pids"] = launcher.pids()
        act = _actor(policy, env)
        obs, _ = env.reset(seed=opts.seed)
        for _ in range(opts.warmup_steps):
            obs = env.step(act(obs))[0]

        conns = [inst.conn for inst in launcher.instances]
        outside = env.dialect == GODOT_RL
        stats_before = None if outside else request_stats(conns)
        result["xvfb_pids"] = [launcher.xvfb_pid] if launcher.xvfb_pid is not None else []
        sampler = ResourceSampler({"instance": launcher.pids(), "python": [os.getpid()], "xvfb": result["xvfb_pids"]},
                                  opts.sample_interval)
        sampler.start()
        steps, seconds, obs = run_window(env, act, obs, opts.steps, opts.seconds)
        sampler.stop()
        stats_after = None if outside else request_stats(conns)
        if cfg.headless and len(env.groups) > 1:  # the same window again, pipelined as training runs it
            p_steps, p_seconds, obs = run_window(env, act, obs, opts.steps, opts.seconds, pipelined=True)
            result["pipelined_agent_steps_per_second"] = p_steps * env.num_envs / p_seconds

        if outside:  # every decision step is the action repeat's physics frames (the launcher passed it)
            physics = [steps * env.game_settings["action_repeat"] / seconds] * cfg.instances
            drawn = None  # a windowed game's frame rate is the engine's to say
        else:
            physics = _rate(stats_before, stats_after, "physics_frames")
            drawn = _rate(stats_before, stats_after, "frames_drawn")
        result.update({
            "measured": "from outside (no stats message: godot_rl_agents' plugin)" if outside else "game stats",
            "status": "ok",
            "steps": steps,
            "seconds": round(seconds, 4),
            "round_trips_per_second": steps / seconds,
            "agent_steps_per_second": steps * env.num_envs / seconds,
            "physics_fps_per_instance": float(np.mean(physics)),
            "physics_fps_total": float(np.sum(physics)),
            "rendered_fps_per_instance": None if cfg.headless or drawn is None else float(np.mean(drawn)),
            "engine_version": stats_after[0].get("engine_version") if stats_after else None,
            "game_reports_headless": stats_after[0].get("headless") if stats_after else None,
            "stats_before": stats_before,
            "stats_after": stats_after,
            "resources": sampler.summary(),
            "samples": sampler.intervals(),
        })
    except KeyboardInterrupt:
        result["status"] = "interrupted"
        raise
    except Exception as e:  # an instance crashed, never connected, stopped answering...
        result["status"] = "failed"
        result["error"] = f"{type(e).__name__}: {e}"
        result["log_tail"] = _failure_tails(env)
    finally:
        if sampler is not None:
            sampler.stop()
        if env is not None:
            env.close()  # the instances' stdout is complete only once they have exited
            if not cfg.headless and result["status"] == "ok":
                result["renderer"] = _renderer_from_log(env.launcher.instances[0].log_path)
    return result


def _renderer_from_log(path: Path) -> Optional[str]:
    for line in read_log_tail(path, lines=200).splitlines():
        if "Renderer:" in line:
            return line.split("Renderer:", 1)[1].strip()
    return None


def _failure_tails(env) -> str:
    """The log tails of the instances that exited (the error message usually quotes them too)."""
    if env is None:
        return ""
    parts = []
    for inst in env.launcher.instances:
        if inst is not None and inst.exit_code() is not None:
            parts.append(f"--- instance {inst.index} (pid {inst.pid}, exit code {inst.exit_code()}), "
                         f"{inst.log_path} ---\n{inst.log_tail()}")
    return "\n".join(parts)


# ======================================================================================================================
# Verdict, table, files
# ======================================================================================================================
def _ok(results, mode=None):
    return [r for r in results if r["status"] == "ok" and (mode is None or r["mode"] == mode)]


def _best(results, mode):
    ok = _ok(results, mode)
    return max(ok, key=lambda r: r["agent_steps_per_second"]) if ok else None


def scaling_stop(results, mode) -> Optional[tuple[dict, dict]]:
    """(config n_i, config n_{i+1}) for the first instance count after which throughput grows < SCALING_GAIN."""
    ok = sorted(_ok(results, mode), key=lambda r: r["instances"])
    for a, b in zip(ok, ok[1:]):
        if b["agent_steps_per_second"] < (1 + SCALING_GAIN) * a["agent_steps_per_second"]:
            return a, b
    return None


def _plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def verdict(results, cores) -> str:
    parts = []
    best = {m: _best(results, m) for m in MODES}
    for m in MODES:
        if best[m]:
            parts.append(f"{best[m]['instances']} {m}: {best[m]['agent_steps_per_second']:,.0f} agent-steps/s")
    if best["headless"] and best["windowed"]:
        ratio = best["headless"]["agent_steps_per_second"] / best["windowed"]["agent_steps_per_second"]
        parts.append(f"headless is {ratio:.1f}x faster on this {cores}-core machine")
    elif parts:
        parts[-1] += f" on this {cores}-core machine"
    for m in MODES:
        ok = _ok(results, m)
        if len(ok) < 2:
            continue
        stop = scaling_stop(results, m)
        if stop is None:
            parts.append(f"{m} throughput still grows up to {_plural(max(r['instances'] for r in ok), 'instance')}")
            continue
        a, b = stop
        gain = 100.0 * (b["agent_steps_per_second"] / a["agent_steps_per_second"] - 1)
        busy = b["resources"].get("machine_cpu_pct", 0.0)
        bound = (f"CPU-bound: {busy:.0f}% of {100 * cores}% busy" if busy >= CPU_BOUND_FRACTION * 100 * cores
                 else f"not CPU-bound: {busy:.0f}% of {100 * cores}% busy")
        text = (f"beyond {_plural(a['instances'], m + ' instance')} throughput stops growing "
                f"({gain:+.0f}% with {b['instances']}; {bound})")
        if best[m]["instances"] > b["instances"]:  # noisy, or a later rise: say so rather than hide it
            text += f", although {best[m]['instances']} reach {best[m]['agent_steps_per_second']:,.0f}"
        parts.append(text)
    failed = [r["key"] for r in results if r["status"] == "failed"]
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    return ("Verdict: " + "; ".join(parts)) if parts else "Verdict: no configuration could be measured"


def contamination_note(results, cores) -> Optional[str]:
    """A warning when other processes used a noticeable share of the CPU while we measured."""
    worst = max(((r["resources"].get("other_cpu_pct", 0.0), r["key"]) for r in _ok(results)), default=None)
    if worst is None or worst[0] < 25.0:
        return None
    return (f"Warning: other processes used up to {worst[0]:.0f}% CPU (of {100 * cores}%) during the measurements "
            f"({worst[1]}): the numbers are contaminated; re-run when `uptime` shows a low load.")


def _fmt(value, fmt="{:,.0f}", missing="-"):
    return missing if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def table_row(r: dict) -> dict:
    """The flat per-configuration row shared by the CSV and the markdown table."""
    res = r.get("resources") or {}
    inst, py, xv = res.get("instance") or {}, res.get("python") or {}, res.get("xvfb") or {}
    n = max(1, inst.get("count", r["instances"]))
    return {
        "mode": r["mode"], "instances": r["instances"], "agents_per_instance": r["agents"], "status": r["status"],
        "agent_steps_per_s": r.get("agent_steps_per_second"),
        "engine_only_agent_steps_per_s": r.get("engine_only_agent_steps_per_second"),
        "synced_share_of_engine_only": (r["agent_steps_per_second"] / r["engine_only_agent_steps_per_second"]
                                        if r.get("agent_steps_per_second") and r.get("engine_only_agent_steps_per_second")
                                        else None),
        "pipelined_agent_steps_per_s": r.get("pipelined_agent_steps_per_second"),
        "round_trips_per_s": r.get("round_trips_per_second"),
        "physics_fps_per_instance": r.get("physics_fps_per_instance"),
        "rendered_fps_per_instance": r.get("rendered_fps_per_instance"),
        "cpu_user_pct_per_instance": inst["cpu_user_pct"] / n if inst else None,
        "cpu_system_pct_per_instance": inst["cpu_system_pct"] / n if inst else None,
        "cpu_pct_all_instances": inst["cpu_user_pct"] + inst["cpu_system_pct"] if inst else None,
        "rss_mb_per_instance": inst.get("rss_mb_per_process"),
        "threads_per_instance": inst.get("threads_per_process"),
        "python_cpu_pct": py["cpu_user_pct"] + py["cpu_system_pct"] if py else None,
        "xvfb_cpu_pct": xv["cpu_user_pct"] + xv["cpu_system_pct"] if xv else None,
        "machine_cpu_pct": res.get("machine_cpu_pct"),
        "other_cpu_pct": res.get("other_cpu_pct"),
        "cores": res.get("cores"),
        "seconds": r.get("seconds"),
        "steps": r.get("steps"),
        "launch_seconds": r.get("launch_seconds"),
        "error": (r.get("error") or "").splitlines()[0][:200] if r.get("error") else "",
    }


MD_COLUMNS = [
    ("mode", "mode", "{}"), ("instances", "inst", "{}"), ("agents_per_instance", "agents/inst", "{}"),
    ("status", "status", "{}"),
    ("engine_only_agent_steps_per_s", "engine-only agent-steps/s", "{:,.0f}"),
    ("agent_steps_per_s", "synced agent-steps/s", "{:,.0f}"), ("synced_share_of_engine_only", "synced/engine", "{:.0%}"),
    ("pipelined_agent_steps_per_s", "pipelined agent-steps/s", "{:,.0f}"), ("round_trips_per_s", "round trips/s", "{:,.1f}"),
    ("physics_fps_per_instance", "physics fps/inst", "{:,.1f}"), ("rendered_fps_per_instance", "rendered fps/inst", "{:,.1f}"),
    ("cpu_user_pct_per_instance", "CPU% user/inst", "{:.0f}"), ("cpu_system_pct_per_instance", "CPU% sys/inst", "{:.0f}"),
    ("cpu_pct_all_instances", "CPU% all inst", "{:.0f}"), ("rss_mb_per_instance", "RSS MB/inst", "{:.0f}"),
    ("threads_per_instance", "threads/inst", "{:.0f}"), ("python_cpu_pct", "Python CPU%", "{:.0f}"),
    ("xvfb_cpu_pct", "Xvfb CPU%", "{:.0f}"), ("machine_cpu_pct", "machine CPU%", "{:.0f}"),
    ("other_cpu_pct", "other CPU%", "{:.0f}"),
]


def markdown(report: dict) -> str:
    m = report["machine"]
    cores = m["cores_logical"]
    lines = [
        f"# Headless vs windowed profile: {report['env']}",
        "",
        f"Machine: {m['cpu_model']}, {cores} logical cores, {m['memory_total_mb']:,} MB RAM; "
        f"load average at start {', '.join(map(str, m['load_average_at_start']))}; "
        f"engine {m.get('engine_version') or '?'}"
        + (f"; windowed renderer {m['renderer']}" if m.get("renderer") else "")
        + f"; Python {m['python']}, torch {m['torch']}.",
        f"Window: {report['window']}; warm-up {report['warmup_steps']} steps; policy {report['policy']}; "
        f"CPU % is percent of one core (max {100 * cores}%); 'other' = machine CPU not used by us.",
    ]
    if report.get("display_note"):
        lines.append(report["display_note"])
    if any(r.get("measured", "").startswith("from outside") for r in report.get("results", [])):
        lines.append("A game made with godot_rl_agents' plugin: measured from outside (it has no stats message nor "
                     "--benchmark_steps): physics fps = round trips x action repeat; no engine-only or rendered rate.")
    if any(r.get("engine_only_agent_steps_per_second") for r in report["results"]):
        lines.append("Engine-only: as many headless processes at once running `--benchmark_steps` (random actions "
                     "chosen in the engine, no trainer): the limit of the synced rate. Synced: the same window through "
                     "the vector env in strict turns (every game waits while Python chooses). Pipelined: as training "
                     "runs 2 or more instances (one half simulates while the other's actions are chosen).")
    lines += ["", "| " + " | ".join(h for _, h, _ in MD_COLUMNS) + " |", "|" + "---|" * len(MD_COLUMNS)]
    for r in report["results"]:
        row = table_row(r)
        lines.append("| " + " | ".join(_fmt(row[k], f) for k, _, f in MD_COLUMNS) + " |")
    lines += ["", report["verdict"]]
    note = contamination_note(report["results"], cores)
    if note:
        lines += ["", note]
    failures = [r for r in report["results"] if r["status"] == "failed"]
    if failures:
        lines += ["", "## Failed configurations"]
        for r in failures:
            lines += ["", f"### {r['key']}", "", "```", r.get("error", "").rstrip()]
            if r.get("log_tail") and "last lines" not in r.get("error", ""):  # else the error quotes it already
                lines += [r["log_tail"].rstrip()]
            lines += ["```", f"logs: {r['log_dir']}"]
    training = report.get("training")
    if training:
        lines += ["", "## Training comparison (PPO, same wall-clock budget)", "",
                  "| config | status | wall s | agent-steps | steps/s | episodes | first return | final return | "
                  "return gain/min |", "|---|---|---|---|---|---|---|---|---|"]
        for t in training:
            lines.append(
                f"| {t['key']} | {t['status']} | {_fmt(t.get('wall_seconds'), '{:.0f}')} | "
                f"{_fmt(t.get('global_steps'))} | {_fmt(t.get('steps_per_second'))} | {_fmt(t.get('episodes'))} | "
                f"{_fmt(t.get('first_return'), '{:.2f}')} | {_fmt(t.get('final_return'), '{:.2f}')} | "
                f"{_fmt(t.get('return_gain_per_minute'), '{:+.2f}')} |"
            )
        lines += ["", "first/final return: mean episodic return of the first/last 10% of the episodes "
                      "(at least 5); gain/min = (final - first) / wall-clock minutes."]
        if report.get("training_verdict"):
            lines += ["", report["training_verdict"]]
    if report.get("interrupted"):
        lines += ["", "**Interrupted (Ctrl-C): only the configurations above were measured.**"]
    return "\n".join(lines) + "\n"


def write_csv(path: Path, results) -> None:
    rows = [table_row(r) for r in results]
    fields = list(table_row({"mode": "", "instances": 0, "agents": 0, "status": ""}).keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else (round(v, 3) if isinstance(v, float) else v)) for k, v in row.items()})


def write_png(path: Path, report: dict) -> None:
    """Left: agent-steps/s against instance count per mode. Right: CPU % (left axis) and memory (right axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    results = report["results"]
    cores = report["machine"]["cores_logical"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.4))
    mem = ax2.twinx()
    colors = {"headless": "tab:blue", "windowed": "tab:orange"}
    for mode in MODES:
        ok = sorted(_ok(results, mode), key=lambda r: r["instances"])
        if not ok:
            continue
        xs = [r["instances"] for r in ok]
        rows = [table_row(r) for r in ok]
        sps = [r["agent_steps_per_s"] for r in rows]
        ax1.plot(xs, sps, "o-", color=colors[mode], label=mode)
        for x, y in zip(xs, sps):
            ax1.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax2.plot(xs, [r["cpu_pct_all_instances"] for r in rows], "o-", color=colors[mode],
                 label=f"{mode}: CPU % of all instances")
        ax2.plot(xs, [r["machine_cpu_pct"] for r in rows], "^:", color=colors[mode], alpha=0.6,
                 label=f"{mode}: machine CPU %")
        mem.plot(xs, [r["rss_mb_per_instance"] for r in rows], "s--", color=colors[mode], alpha=0.8,
                 label=f"{mode}: resident MB per instance")
    ax1.set_yscale("log")
    ax1.set_ylabel("agent-steps / s (log scale)")
    agents = results[0]["agents"] if results else "?"
    ax1.set_title(f"throughput ({agents} agents per instance)", fontsize=10)
    ax1.legend(fontsize=8)
    ax2.axhline(100 * cores, color="k", lw=0.8, ls="--")
    ax2.set_ylim(0, 100 * cores * 1.1)
    ax2.set_ylabel(f"CPU % of one core (all {cores} cores = {100 * cores}%)")
    mem.set_ylim(bottom=0)
    mem.set_ylabel("resident memory per instance (MB)")
    ax2.set_title("cost: CPU (solid, dotted) and memory (dashed)", fontsize=10)
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = mem.get_legend_handles_labels()
    if h1 or h2:
        ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    ticks = sorted({r["instances"] for r in results}) or [1]
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("instances")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(report["verdict"], fontsize=8, wrap=True)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(out_dir: Path, report: dict, png: bool = True) -> None:
    """profile.json, profile.csv, profile.md (and profile.png); each file replaced atomically (OutputError in one
    line when the disk refuses one: the previous version of each file stays)."""
    report["verdict"] = verdict(report["results"], report["machine"]["cores_logical"])

    def atomic(name, write):
        try:
            with atomic_output(out_dir / name) as tmp:  # keeps the suffix: matplotlib picks the format from it
                write(tmp)
        except OSError as e:
            raise write_error(out_dir / name, e) from None

    atomic("profile.json", lambda p: p.write_text(json.dumps(report, indent=1, default=str)))
    atomic("profile.csv", lambda p: write_csv(p, report["results"]))
    atomic("profile.md", lambda p: p.write_text(markdown(report)))
    if png:
        atomic("profile.png", lambda p: write_png(p, report))


# ======================================================================================================================
# Training comparison
# ======================================================================================================================
def _episode_returns(run_dir: Path) -> list[tuple[int, float]]:
    path = run_dir / "episodes.csv"
    if not path.is_file():
        return []
    with open(path) as f:
        return [(int(r["global_step"]), float(r["return"])) for r in csv.DictReader(f)]


def _descendants(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _processes(pids) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    return procs


def train_for(cfg: Config, opts, out_dir: Path, budget_s: float) -> dict:
    """PPO (`godot-ppo train`) on ``cfg`` for ``budget_s`` seconds of wall clock, then SIGINT (PPO
    saves a checkpoint and closes its instances). Returns the episodic-return numbers from episodes.csv."""
    root = out_dir / "training"
    root.mkdir(parents=True, exist_ok=True)
    exp = f"profile_{cfg.key}"
    cmd = [sys.executable, "-m", "python_trainer", "train", "--env-id", opts.game.env, "--num-instances", str(cfg.instances),
           "--agents-per-instance", str(cfg.agents), "--total-timesteps", str(10**12), "--num-steps", "128",
           "--eval-episodes", "0", "--checkpoint-every", "0", "--run-dir-root", str(root), "--exp-name", exp,
           "--seed", str(opts.seed + 1), "--connect-timeout", f"{opts.connect_timeout:g}"]
    if opts.game.env_path is not None:
        cmd += ["--env-path", opts.game.env_path]
    if not cfg.headless:
        cmd.append("--window")
    result = {"key": cfg.key, "mode": cfg.mode, "instances": cfg.instances, "agents": cfg.agents,
              "budget_seconds": budget_s, "status": "failed", "command": " ".join(cmd)}
    log_path = root / f"{exp}.log"
    result["log"] = str(log_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(paths.REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                     cwd=str(paths.REPO_ROOT))  # own session; dies with us (processes.spawn)
    try:
        try:
            code = proc.wait(timeout=budget_s)  # finishing by itself within the budget is unexpected: an error
        except subprocess.TimeoutExpired:
            result["child_pids"] = _descendants(proc.pid)  # its Godot instances (and Xvfb): checked gone below
            proc.send_signal(signal.SIGINT)  # PPO: checkpoint, close the instances, exit 130
            code = proc.wait(timeout=60)
    except BaseException:
        end_process_tree([proc.pid])  # also when our own Ctrl-C (KeyboardInterrupt) lands here
        proc.wait(timeout=10)
        raise
    result["wall_seconds"] = time.perf_counter() - t0
    result["exit_code"] = code
    left = [p for p in psutil.wait_procs(_processes(result.get("child_pids", [])), timeout=10)[1]]
    if left:
        end_process_tree([p.pid for p in left])
        result["leftover_pids_killed"] = [p.pid for p in left]
    runs = sorted(root.glob(f"{opts.game.env}__{exp}__*"), key=lambda p: p.stat().st_mtime)
    if code not in (0, 130) or not runs:
        result["error"] = f"PPO exited with code {code}; last lines of {log_path}:\n" + read_log_tail(log_path)
        return result
    run_dir = runs[-1]
    result["run_dir"] = str(run_dir)
    episodes = _episode_returns(run_dir)
    steps = None
    try:
        from python_trainer.checkpoint import load_checkpoint  # torch: only once a training ran

        steps = int(load_checkpoint(run_dir / paths.CHECKPOINT_NAME)["global_step"])
    except Exception:
        steps = episodes[-1][0] if episodes else 0
    result.update({"status": "ok", "global_steps": steps, "episodes": len(episodes),
                   "steps_per_second": steps / result["wall_seconds"]})
    if episodes:
        k = max(5, len(episodes) // 10)
        returns = [r for _, r in episodes]
        result["first_return"] = float(np.mean(returns[:k]))
        result["final_return"] = float(np.mean(returns[-k:]))
        result["return_gain_per_minute"] = (result["final_return"] - result["first_return"]) / (result["wall_seconds"] / 60)
    else:
        result["note"] = "no episode finished within the budget"
    return result


def training_verdict(training) -> Optional[str]:
    ok = {t["mode"]: t for t in training if t["status"] == "ok" and t.get("final_return") is not None}
    if "headless" not in ok or "windowed" not in ok:
        return None
    h, w = ok["headless"], ok["windowed"]
    return (f"Training verdict: in {h['budget_seconds']:.0f} s of wall clock, {h['instances']} headless reached a return "
            f"of {h['final_return']:.2f} ({h['global_steps']:,} steps, {h['return_gain_per_minute']:+.2f}/min); "
            f"{w['instances']} windowed reached {w['final_return']:.2f} ({w['global_steps']:,} steps, "
            f"{w['return_gain_per_minute']:+.2f}/min).")


# ======================================================================================================================
# main
# ======================================================================================================================
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        opts = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad argument (2; argparse printed why)
        return e.code if isinstance(e.code, int) else 2
    if opts.steps is None and opts.seconds is None:
        opts.seconds = DEFAULT_SECONDS

    def fail(msg: str) -> int:
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2

    # Everything that can be checked before starting a single instance.
    display_note = None
    if "windowed" in opts.modes:
        if os.environ.get("DISPLAY"):
            display_note = f"Windowed instances render on $DISPLAY={os.environ['DISPLAY']}."
        elif shutil.which("Xvfb") is None:
            return fail("windowed instances need a display: $DISPLAY is not set and Xvfb is not installed. "
                        "Run `sudo apt-get install xvfb`, set DISPLAY, or profile --modes headless only.")
        else:
            display_note = ("No $DISPLAY: the launcher starts an Xvfb virtual display for each windowed "
                            "configuration (software rendering; its CPU is the Xvfb column).")
    try:
        opts.game = godot_game(opts.env_id, opts.env_path, timeout=opts.connect_timeout)
        for mode in opts.modes:
            opts.game.export.command(headless=(mode == "headless"))  # a GameError names the fix
        policy = load_policy(opts.policy, opts.game.env)
    except (GameError, ValueError) as e:
        return fail(str(e))

    from tqdm import tqdm

    def report_line(msg: str) -> None:
        tqdm.write(f"godot-ppo: {msg}", file=sys.stderr)

    out_dir = Path(opts.out) if opts.out else Path("runs") / time.strftime("profile_%Y%m%d_%H%M%S")
    try:  # before any instance starts: a folder that cannot be made or written to, or a disk without room
        check_output(out_dir, ROUGH_OUTPUT_BYTES, folder=True)
    except OutputError as e:
        return fail(f"--out: {e}")
    configs = [Config(mode, n, opts.agents) for mode in opts.modes for n in opts.instances]
    window = f"{opts.steps} vector steps" if opts.steps is not None else f"{opts.seconds:g} s"
    report = {
        "env": opts.game.env, "env_path": opts.game.env_path, "argv": argv, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "window": window,
        "warmup_steps": opts.warmup_steps, "policy": opts.policy, "sample_interval": opts.sample_interval,
        "machine": describe_machine(), "display_note": display_note, "results": [], "interrupted": False,
    }
    if display_note:
        print(display_note, file=sys.stderr)
    print(f"profiling {len(configs)} configuration(s) of {opts.game.env}: {window} each; output in {out_dir}", file=sys.stderr)

    status = 0
    try:
        bar = tqdm(configs, desc="profile", unit="config", dynamic_ncols=True, disable=None)
        for cfg in bar:
            bar.set_postfix_str(cfg.key)
            result = profile_config(cfg, opts, out_dir, policy, report_line)
            report["results"].append(result)
            for key in ("engine_version", "renderer"):
                if result.get(key) and not report["machine"].get(key):
                    report["machine"][key] = result[key]
            if result["status"] == "ok":
                row = table_row(result)
                extra = "".join(f"; {name} {_fmt(row[k], f)}" for k, name, f in (
                    ("engine_only_agent_steps_per_s", "engine-only", "{:,.0f}"),
                    ("synced_share_of_engine_only", "synced/engine", "{:.0%}"),
                    ("pipelined_agent_steps_per_s", "pipelined", "{:,.0f}")) if row[k] is not None)
                tqdm.write(f"{cfg.key}: {result['agent_steps_per_second']:,.0f} agent-steps/s{extra}", file=sys.stderr)
            else:
                status = 1
                tqdm.write(f"{cfg.key}: failed: {result.get('error', '').splitlines()[0][:300]}", file=sys.stderr)
            write_outputs(out_dir, report, png=False)
        bar.close()

        if opts.compare_training:
            best = [b for b in (_best(report["results"], m) for m in opts.modes) if b]
            report["training"] = []
            for b in best:
                cfg = Config(b["mode"], b["instances"], b["agents"])
                print(f"training PPO on {cfg.key} for {opts.compare_seconds:g} s of wall clock...", file=sys.stderr)
                t = train_for(cfg, opts, out_dir, opts.compare_seconds)
                report["training"].append(t)
                if t["status"] != "ok":
                    status = 1
                    print(f"{cfg.key} training failed: {t.get('error')}", file=sys.stderr)
                write_outputs(out_dir, report, png=False)
            report["training_verdict"] = training_verdict(report["training"])
    except KeyboardInterrupt:
        report["interrupted"] = True
        status = 130
        print("\ninterrupted: writing what was measured so far (every instance is closed)", file=sys.stderr)
    except OutputError as e:  # the disk filled up (or the folder went away) while profiling
        print(f"{PROG}: error: {e}; every instance is closed", file=sys.stderr)
        return 1

    try:
        write_outputs(out_dir, report, png=True)
    except OutputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    print(markdown(report))
    print(f"written: {out_dir / 'profile.json'}, profile.csv, profile.md, profile.png", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
