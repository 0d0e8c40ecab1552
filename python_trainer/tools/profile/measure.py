"""Measuring one configuration (a mode x an instance count): the engine-only rate of the headless binary, then the
instances launched as training launches them, warmed up and stepped for a fixed window, with the game's own counters
and the psutil sampler around it."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from python_trainer.base.contract import BENCHMARK_REPORT, arg, message
from python_trainer.base.errors import UserError, one_line
from python_trainer.base.processes import read_log_tail, run_to_end
from python_trainer.engine.in_engine import WATCHED_FLAG
from python_trainer.envs.env_params import binary_flags, wire_values
from python_trainer.envs.game import NO_RENDER_LOOP, GameError, GameInstance, GodotGame, game_environ
from python_trainer.envs.protocol import GODOT_RL
from python_trainer.tools.profile.sample import ResourceSampler

MODES = ("headless", "windowed")
STATS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Config:
    """One configuration: the mode, the instance count, the agents asked of each copy of the scene, the copies in each
    instance (--copies) and the game's environment parameters ((name, env_params.Value) pairs: --env-param's)."""

    mode: str
    instances: int
    agents: Optional[int]
    copies: int = 1
    env_params: tuple = ()

    @property
    def game_args(self) -> list[str]:
        """The constants among the environment parameters, as the binary's own flags (--env_param=NAME=VALUE)."""
        return binary_flags(dict(self.env_params))

    @property
    def key(self) -> str:
        return f"{self.mode}_x{self.instances}"

    @property
    def headless(self) -> bool:
        return self.mode == "headless"


# ======================================================================================================================
# The engine-only reference rate
# ======================================================================================================================
def _one_engine_run(cmd, timeout: float, display: Optional[str] = None) -> Optional[dict]:
    try:
        out = run_to_end(cmd, timeout, env=game_environ(display=display))
    except OSError:
        return None
    for line in out.stdout.splitlines():
        if line.startswith("{") and f'"{BENCHMARK_REPORT}"' in line:
            try:
                return json.loads(line)[BENCHMARK_REPORT]
            except (ValueError, KeyError):
                return None
    return None


def engine_benchmark(game: GodotGame, agents: Optional[int], steps: int = 3000, timeout: float = 60.0,
                     instances: int = 1, display: Optional[str] = None, copies: int = 1,
                     extra_args: tuple = ()) -> Optional[dict]:
    """The headless binary's in-engine rate with random actions and no trainer (``--benchmark_steps``); with
    ``display``, the windowed binary's on it (a camera game's, which renders its cameras). ``copies`` and
    ``extra_args`` (the game's flags, e.g. --env_param=NAME=VALUE) go on its command line as on the measured ones'.

    With ``instances`` > 1, that many processes run at once (the limit for as many synced instances on this
    machine) and ``agent_steps_per_second`` is the sum of their rates; None when any of them failed.
    """
    try:
        cmd = GameInstance(game, agents=agents, headless=display is None, display=display, copies=copies,
                           extra_args=tuple(extra_args)).command(
            arg("benchmark_steps", steps), WATCHED_FLAG, *([] if display is None else [NO_RENDER_LOOP]))
    except GameError:
        return None
    with ThreadPoolExecutor(max_workers=instances) as pool:
        runs = list(pool.map(lambda _: _one_engine_run(cmd, timeout, display), range(instances)))
    if any(r is None for r in runs):
        return None
    return {**runs[0], "instances": instances,
            "agent_steps_per_second": sum(r["agent_steps_per_second"] for r in runs),
            "per_instance": [r["agent_steps_per_second"] for r in runs]}


# ======================================================================================================================
# The actions: random, or a trained policy's
# ======================================================================================================================
def load_policy(spec: str, env_id: str) -> tuple[object, dict]:
    """(None, {}) for random actions, else (trained_agent.LoadedAgent, the flags its run was trained with: the
    checkpoint's "args"); a UserError naming --policy when it cannot be."""
    if spec == "random":
        return None, {}
    path = Path(spec)
    if not path.exists():
        raise UserError(f"--policy {spec}: no such run folder or model file (give `random` or a training run folder)")
    import torch

    from python_trainer.base.paths import checkpoint_in
    from python_trainer.checkpoint import load_checkpoint
    from python_trainer.variants.trained_agent import agent_from_checkpoint  # torch: only with a trained policy

    # One thread: for a 64-64 MLP on a few agents, torch's default thread pool costs 30x more than it saves (13 ms
    # instead of 0.4 ms per call on 2 busy cores), which would measure torch's spinning instead of the instances.
    torch.set_num_threads(1)
    try:
        ckpt = load_checkpoint(checkpoint_in(path))
        loaded = agent_from_checkpoint(ckpt)
    except Exception as e:
        raise UserError(f"--policy {spec}: cannot load a trained agent from it ({one_line(e)[:200]})") from None
    if loaded.env_id != env_id:
        raise UserError(f"--policy {spec}: that agent was trained on {loaded.env_id!r}, not {env_id!r}")
    return loaded, dict(ckpt.get("args") or {})


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


# ======================================================================================================================
# The window: the game's stats message, strict turns or pipelined steps
# ======================================================================================================================
def request_stats(conns, timeout: float = STATS_TIMEOUT_S) -> list[dict]:
    """Ask every instance for its engine counters (send to all, then read all), like a step."""
    for conn in conns:
        conn.send(message("stats"))
    return [conn.recv(timeout=timeout, expect="stats") for conn in conns]


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


def _rate(before: list[dict], after: list[dict], key: str) -> list[float]:
    """Per-instance counter rate over the game's own clock (time_usec)."""
    rates = []
    for a, b in zip(before, after):
        dt = (b["time_usec"] - a["time_usec"]) / 1e6
        rates.append((b[key] - a[key]) / dt if dt > 0 else 0.0)
    return rates


# ======================================================================================================================
# One configuration
# ======================================================================================================================
def profile_config(cfg: Config, opts, game: GodotGame, out_dir: Path, policy, report: Callable[[str], None],
                   camera: bool = False) -> dict:
    """Launch, warm up, measure; never raises except KeyboardInterrupt (a failure is returned as status "failed").
    A ``camera`` game's windowed engine-only rate is measured on the launched instances' display, while they wait."""
    from python_trainer.envs.vec_env import make_vec_env

    result: dict = {"key": cfg.key, "mode": cfg.mode, "instances": cfg.instances, "agents": cfg.agents,
                    "copies": cfg.copies, "status": "failed",
                    "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    run_dir = out_dir / "instances" / cfg.key
    result["log_dir"] = str(run_dir / "logs")
    env = None
    try:
        # A game made with godot_rl_agents' plugin has neither --benchmark_steps nor the "stats" message: it is
        # measured from outside only (our rates, psutil's costs; physics frames = decision steps x action repeat).
        if cfg.headless and opts.engine_benchmark and game.rl_sync:  # before the launch: nothing else running
            eb = engine_benchmark(game, cfg.agents, instances=cfg.instances, copies=cfg.copies,
                                  extra_args=cfg.game_args)
            result["engine_only_agent_steps_per_second"] = eb["agent_steps_per_second"] if eb else None
        t = time.perf_counter()
        env = make_vec_env(game, num_instances=cfg.instances, agents_per_instance=cfg.agents,
                           headless=cfg.headless, seed=opts.seed, run_dir=run_dir, max_restarts=0, report=report,
                           connect_timeout=opts.connect_timeout, copies=cfg.copies,
                           extra_args=cfg.game_args + ([NO_RENDER_LOOP] if camera else []),
                           frame_stack=policy.frame_stack if policy is not None else 1)
        if cfg.env_params:  # samplers too, from each agent's next episode (the constants are on the command line)
            env.set_env_params(wire_values(dict(cfg.env_params)))
        result["launch_seconds"] = round(time.perf_counter() - t, 3)
        result["agents"] = env.num_envs // cfg.instances  # what each simulates (it may ignore --agents): every copy's
        launcher = env.launcher
        result["drawn"] = drawn(launcher.headless, launcher.instance.extra_args)
        result.update(display=launcher.display, pids=launcher.pids(),
                      xvfb_pids=[launcher.xvfb_pid] if launcher.xvfb_pid is not None else [])
        if camera and not cfg.headless and opts.engine_benchmark:
            result.update(windowed_engine_only(game, cfg, launcher.display))
        result.update(_measure(cfg, opts, env, policy), status="ok")
    except KeyboardInterrupt:
        result["status"] = "interrupted"
        raise
    except Exception as e:  # an instance crashed, never connected, stopped answering...
        result["status"] = "failed"
        result["error"] = f"{type(e).__name__}: {e}"
        result["log_tail"] = _failure_tails(env)
    finally:
        if env is not None:
            env.close()  # the instances' stdout is complete only once they have exited
            if not cfg.headless and result["status"] == "ok":
                result["renderer"] = _renderer_from_log(env.launcher.instances[0].log_path)
    return result


# What a row's instances render: a headless build nothing; a windowed one its whole window every frame, or, with
# --disable-render-loop (a camera game, as training runs it: launcher._go_windowed), only its camera sensors'
# viewports on decision frames (camera_frames.gd), the window never drawn.
DRAWN_NOTHING, DRAWN_WINDOW, DRAWN_CAMERAS = "nothing", "window", "cameras only"


def drawn(headless: bool, game_args) -> str:
    """What an instance started headless or not with these extra arguments draws (DRAWN_*)."""
    if headless:
        return DRAWN_NOTHING
    return DRAWN_CAMERAS if NO_RENDER_LOOP in game_args else DRAWN_WINDOW


CAMERA_BENCHMARK_STEPS = 300  # decision steps of a camera game's engine-only run (each one renders every camera)


def engine_ms_per_decision(run: Optional[dict]) -> Optional[float]:
    """Milliseconds per decision step of one engine-only process (its wall time: simulation, and any rendering)."""
    return None if not run else 1000.0 * run["seconds"] / max(run["decision_steps"], 1)


def windowed_engine_only(game: GodotGame, cfg: Config, display: str) -> dict:
    """A camera game's engine-only figures on the windowed binary (cameras rendering, no trainer): as many processes
    as the configuration's instances, on ``display``."""
    eb = engine_benchmark(game, cfg.agents, steps=CAMERA_BENCHMARK_STEPS, instances=cfg.instances, display=display,
                          copies=cfg.copies, extra_args=cfg.game_args)
    return {"engine_only_agent_steps_per_second": eb["agent_steps_per_second"] if eb else None,
            "engine_only_ms_per_decision": engine_ms_per_decision(eb)}


def _measure(cfg: Config, opts, env, policy) -> dict:
    """The warm-up, then the window with the game's counters read at both ends and the sampler running through it
    (and, headless with 2 or more instances, the same window pipelined); the numbers of a measured configuration."""
    launcher = env.launcher
    act = _actor(policy, env)
    obs, _ = env.reset(seed=opts.seed)
    for _ in range(opts.warmup_steps):
        obs = env.step(act(obs))[0]

    conns = [inst.conn for inst in launcher.instances]
    outside = env.dialect == GODOT_RL
    stats_before = None if outside else request_stats(conns)
    xvfb = [launcher.xvfb_pid] if launcher.xvfb_pid is not None else []
    sampler = ResourceSampler({"instance": launcher.pids(), "python": [os.getpid()], "xvfb": xvfb},
                              opts.sample_interval)
    sampler.start()
    try:
        steps, seconds, obs = run_window(env, act, obs, opts.steps, opts.seconds)
    finally:
        sampler.stop()
    stats_after = None if outside else request_stats(conns)
    pipelined = {}
    if cfg.headless and len(env.groups) > 1:  # the same window again, pipelined as training runs it
        p_steps, p_seconds, obs = run_window(env, act, obs, opts.steps, opts.seconds, pipelined=True)
        pipelined["pipelined_agent_steps_per_second"] = p_steps * env.num_envs / p_seconds

    if outside:  # every decision step is the action repeat's physics frames (the launcher passed it)
        physics = [steps * env.game_settings["action_repeat"] / seconds] * cfg.instances
        drawn = None  # a windowed game's frame rate is the engine's to say
    else:
        physics = _rate(stats_before, stats_after, "physics_frames")
        drawn = _rate(stats_before, stats_after, "frames_drawn")
    return {
        **pipelined,
        "measured": "from outside (no stats message: godot_rl_agents' plugin)" if outside else "game stats",
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
    }


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
