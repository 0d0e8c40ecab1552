"""The window of `godot-ppo train --watch`: one windowed game, outside the training batch, playing the run's policy
file inside the engine at real time and reloading it at every checkpoint (--policy_reload), at a capped frame rate
and a lower CPU priority so that training keeps the CPU.

    watcher = start_policy_watcher(run_dir / "policy.json", game, log_dir=run_dir / "logs")   # None: no window
    ...
    watcher.close()
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Optional

from python_trainer.base.contract import RELOAD_LINE as _RELOAD_LINE, arg, flag
from python_trainer.base.errors import one_line
from python_trainer.base.processes import describe_exit, end_process_tree, spawn
from python_trainer.envs.failures import InstanceStartError
from python_trainer.envs.game import GameError, GameInstance, GodotGame
from python_trainer.envs.logs import CappedLog
from python_trainer.envs.xvfb import Xvfb, open_display

WATCH_FPS = 30  # the window's frame cap (--watch-fps): enough to follow the agents, little CPU taken from training
WATCH_NICE = 5  # its CPU priority (nice, of the process and of its session): training comes first
WATCH_AGENTS = 4
WATCH_LOG_NAME = "watch.log"
XVFB_WATCH_RESOLUTION = "640x360"
RELOAD_LINE = _RELOAD_LINE.encode()


class PolicyWatcher:
    """One windowed game playing a policy file and reloading it whenever the file changes (`start_policy_watcher`).

    Not part of any training batch: no trainer talks to it. Its output goes to ``log_path``; `reloads()` reads the
    reloads it reported there. `close()` ends it and its Xvfb (should we die first, both die with us: spawn)."""

    def __init__(self, proc: subprocess.Popen, xvfb: Xvfb, log: CappedLog, say=print):
        self.proc, self.xvfb, self.log, self.say = proc, xvfb, log, say
        self.log_path = log.path
        self._closing = False
        threading.Thread(target=self._report_end, name="godot-ppo watch", daemon=True).start()

    def _report_end(self) -> None:
        """Say once if the window ends by itself (closed by the user, or crashed): training goes on without it."""
        code = self.proc.wait()
        if self._closing:
            return
        if code == 0:
            self.say("godot-ppo: the --watch window was closed; training goes on")
        else:
            self.say(f"godot-ppo: warning: the --watch window ended ({describe_exit(code)}); training goes on "
                     f"(its output: {self.log_path})")

    def reloads(self) -> list:
        """[(global step, fps), ...] of each reload the game reported so far (global step None when unknown)."""
        found = []
        try:
            text = self.log_path.read_bytes()
        except OSError:
            return found
        for line in text.splitlines():
            if line.startswith(RELOAD_LINE):
                step, _, rest = line[len(RELOAD_LINE):].partition(b",")
                fps = rest.split(b"fps")[0].strip() if b"fps" in rest else b""
                found.append((int(step) if step.isdigit() else None, float(fps) if fps else None))
        return found

    def close(self) -> None:
        """End the game and its Xvfb; never raises."""
        self._closing = True
        try:
            if self.proc.poll() is None:
                end_process_tree([self.proc.pid])
            self.proc.wait(timeout=5)
        except Exception:
            pass
        self.xvfb.stop()
        self.log.close()


def _lower_group_priority(pid: int, niceness: int) -> None:
    """Lower the CPU priority of ``pid``'s session. With Linux's autogroups (sched_autogroup_enabled, the default on
    desktop kernels) the scheduler first shares the CPU equally between sessions, and a process's nice value only
    counts within its session; spawn gives every child a session of its own, so `nice` alone would change nothing
    and the window would take as much CPU as a training instance. Best effort: without autogroups, `nice` works."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(int(niceness)))
    except OSError:
        pass


def start_policy_watcher(policy_path, game: GodotGame, *, log_dir, agents: int = WATCH_AGENTS, seed: int = 0,
                         action_repeat: int = 1, fps: int = WATCH_FPS, niceness: int = WATCH_NICE,
                         say=print) -> Optional[PolicyWatcher]:
    """Open one window (Xvfb without $DISPLAY) in which ``agents`` agents play ``policy_path`` inside the engine, at
    real time with at most ``fps`` frames per second and at CPU priority ``niceness``, reloading the file whenever it
    changes (--policy_reload). For `godot-ppo train --watch`: the policy file must exist already. Watching is
    optional, so a window that cannot start is one warning line and None, never an error."""
    policy_path = Path(policy_path).resolve()
    log_dir = Path(log_dir)
    xvfb = Xvfb(log_dir / "xvfb_watch.log")
    log = None
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        display = open_display(xvfb, say, "for the --watch window, which nobody sees (its policy reloads all the same)")
        # Real time. Under our own Xvfb nobody sees the window, and its software renderer pays per pixel: a small one.
        small = ("--resolution", XVFB_WATCH_RESOLUTION) if xvfb.proc is not None else ()
        instance = GameInstance(game, agents=agents, seed=seed, action_repeat=action_repeat, headless=False,
                                display=display, fixed_fps=None, extra_args=small)
        cmd = instance.command(arg("policy", policy_path), flag("policy_reload"), arg("max_fps", int(fps)))
        nice = shutil.which("nice")
        if niceness and nice:
            cmd = [nice, "-n", str(int(niceness))] + cmd  # nice execs the game: same pid, dies with us all the same
        log = CappedLog(log_dir / WATCH_LOG_NAME)
        log.write(f"# godot-ppo: watching {policy_path}: {' '.join(cmd)}\n".encode())
        out_r, out_w = os.pipe()
        try:
            proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=instance.environ())
        except BaseException:
            os.close(out_r)
            raise
        finally:
            os.close(out_w)
        log.follow(out_r)
        for pid in (proc.pid, xvfb.pid):
            if niceness and pid is not None:
                _lower_group_priority(pid, niceness)
    except (InstanceStartError, GameError, OSError) as e:
        xvfb.stop()
        if log is not None:
            log.close()
        say(f"godot-ppo: warning: --watch: the window did not start ({one_line(e)}); training goes on without it")
        return None
    except BaseException:
        xvfb.stop()
        if log is not None:
            log.close()
        raise
    say(f"watching: a window plays {policy_path} ({agents} agents, real time, at most {fps} fps), reloaded at every "
        f"checkpoint; its output: {log.path}")
    return PolicyWatcher(proc, xvfb, log, say)
