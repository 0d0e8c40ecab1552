"""A camera game's profile: why headless is left out (a headless build renders nothing), the windowed instance counts
it measures (1 up to the cores), the render cost per decision frame, and the instance count it recommends."""

from __future__ import annotations

import os
from typing import Optional

from python_trainer.base.errors import UserError
from python_trainer.envs.game import GodotGame
from python_trainer.envs.images import declared_image
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.tools.profile.measure import (CAMERA_BENCHMARK_STEPS, Config, engine_benchmark,
                                                  engine_ms_per_decision)


def seen_camera(game: GodotGame, connect_timeout: float, game_args=()) -> Optional[dict]:
    """{"key", "size"} of the camera the game's agents observe (from the env_info of one headless instance of one
    agent, started with ``game_args``: a parameter such as forager's vision=0 takes the camera away), or None."""
    if not game.rl_sync:  # a game made with godot_rl_agents' plugin: no camera of ours to look for
        return None
    options = LaunchOptions(agents_per_instance=1, connect_timeout=connect_timeout, auto_window=False,
                            extra_args=tuple(game_args))
    with InstanceLauncher(game, options) as launcher:  # nothing steps: a camera game's headless build answers too
        seen = declared_image(launcher.instances[0].env_info)
    return None if seen is None else {"key": seen[0], "size": seen[1]}


def why(env: str, camera: dict) -> str:
    shape = " x ".join(map(str, camera["size"])) if isinstance(camera["size"], list) else "?"
    return f"{env} observes a camera image ({camera['key']}, {shape}), which a headless build cannot render"


def camera_modes(env: str, camera: dict, modes: list, counts: list, explicit: set) -> tuple[list, list, str]:
    """(the modes, the instance counts, the line said) of a camera game's profile: windowed only (--modes headless
    alone is refused in one line), 1 up to the machine's cores unless --num-instances was given."""
    if modes == ["headless"]:
        raise UserError(f"--modes headless: {why(env, camera)}: profile it with --modes windowed")
    if "num_instances" not in explicit:
        counts = list(range(1, (os.cpu_count() or 1) + 1))
    line = (f"{'skipping headless: ' if 'headless' in modes else ''}{why(env, camera)}; measuring windowed x "
            f"{','.join(map(str, counts))}")
    return ["windowed"], counts, line


def headless_engine_ms(game: GodotGame, cfg: Config) -> Optional[float]:
    """Milliseconds per decision step of the headless binary's engine-only run of one instance as ``cfg`` runs them
    (no rendering), or None when its headless build does not run the game's benchmark."""
    return engine_ms_per_decision(engine_benchmark(game, cfg.agents, steps=CAMERA_BENCHMARK_STEPS, copies=cfg.copies,
                                                   extra_args=cfg.game_args))


def summary(report: dict) -> Optional[str]:
    """The verdict's words on a camera game: the render cost per decision frame (the windowed engine-only frame time
    of one instance against the headless one's, no trainer in either) and the recommended instance count (the
    fastest windowed configuration)."""
    camera = report.get("camera")
    ok = [r for r in report["results"] if r["status"] == "ok" and r["mode"] == "windowed"]
    if not camera or not ok:
        return None
    one = next((r for r in ok if r["instances"] == 1 and r.get("engine_only_ms_per_decision")), None)
    headless = camera.get("headless_engine_ms_per_decision")
    if one and headless is not None:
        cost = (f"render cost {one['engine_only_ms_per_decision'] - headless:.2f} ms per decision frame (engine-only "
                f"{one['engine_only_ms_per_decision']:.2f} ms windowed against {headless:.2f} ms headless)")
    elif one:
        cost = (f"engine-only frame time {one['engine_only_ms_per_decision']:.2f} ms per decision windowed, cameras "
                "included (the headless build does not run this game's benchmark, so the render cost is not "
                "separated)")
    else:
        cost = "no engine-only figure for the render cost"
    best = max(ok, key=lambda r: r["agent_steps_per_second"])
    return (f"Camera game: {cost}; recommended --num-instances {best['instances']} (windowed, "
            f"{best['agent_steps_per_second']:,.0f} agent-steps/s)")
