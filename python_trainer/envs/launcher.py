"""Start, watch, restart and stop Godot instances: ports, processes, tokens, logs, Xvfb.

For each instance the launcher first binds a listening socket on 127.0.0.1 port 0 (so the kernel picks a port
nobody holds: a taken port cannot happen by construction), then starts the exported binary with
``--port=<that port> --fixed-fps <game.FIXED_FPS> ...`` in its own process group and a secret token in its environment
(``RL_SYNC_TOKEN``: ``/proc/PID/environ`` is readable only by the same user, the command line by everyone). All
instances are awaited in parallel against one deadline (envs/connect.py): a connection that is not the started
process's, or whose hello lacks its token, is refused and the wait goes on; an instance that exits before connecting
is reported (exit code + log tail) at once. `LaunchOptions` says how many instances, what each is given, and how they
are kept.

Logs (envs/logs.py): stdout+stderr go through a pipe and a reader thread per instance into
``run_dir/logs/instance_<i>.log``, which `CappedLog` keeps under ``max_log_bytes``; the first time it cuts output the
launcher says so through ``report``.

No orphans: `close()` (also via the context manager, atexit, and SIGINT/SIGTERM handlers that close then
re-raise; a signal that was ignored when the launcher started stays ignored) asks every instance to quit, then
terminates/kills the process trees with psutil. However Python itself ends (SIGKILL included), the kernel kills the
games and Xvfb: they are started by `processes.spawn`, which gives them a parent-death signal.

Script errors: once an instance has handshaken, the log's reader thread watches its output for Godot's ``SCRIPT
ERROR:`` lines (`ScriptErrorWatch`); the first is reported at once with its ``At:`` line and the log's path, and
`script_errors()` names an instance that keeps raising them (the vector env stops on it).

Crash handling: `restart(i, error)` reports a dead or silent instance (exit code, log tail) and starts a fresh
one on a new port, at most ``max_restarts`` times per instance slot (like ML-Agents' --max-lifetime-restarts).
"""

from __future__ import annotations

import math
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import psutil

from python_trainer.base.contract import arg
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S, check_instance_options
from python_trainer.base.processes import (LOG_TAIL_LINES, TERM_GRACE_S, describe_exit, descendants, end_process_tree,
                                           spawn)
from python_trainer.envs.cleanup import LIVE as _LIVE
from python_trainer.envs.cleanup import install_cleanup_hooks as _install_cleanup_hooks
from python_trainer.envs.connect import ConnectionWait
from python_trainer.envs.failures import DisplayError, InstanceCrashedError, InstanceStartError
from python_trainer.envs.game import NO_RENDER_LOOP, GameError, GameInstance, GodotGame
from python_trainer.envs.logs import DEFAULT_MAX_LOG_BYTES, CappedLog, ScriptErrorWatch, shown_tail
from python_trainer.envs.protocol import DEFAULT_TIMEOUT_S, GodotConnection, GodotConnectionError
from python_trainer.envs.images import declared_image
from python_trainer.envs.xvfb import GODOT_NO_DISPLAY, Xvfb, display_lost, open_display, user_display

DEFAULT_MAX_RESTARTS = 3
CLOSE_GRACE_S = 2.0  # how long instances get to quit by themselves after the "close" message
TOKEN_ENV = "RL_SYNC_TOKEN"  # the instance's secret, in its environment (never in its command line)
# An instance that has raised this many script errors since its handshake keeps raising them: a training run stops
# (a per-frame error in a game of 16 agents reaches it within a frame).
SCRIPT_ERRORS_TO_STOP = 10


@dataclass(frozen=True)
class LaunchOptions:
    """How a game's instances are launched and kept: the options `InstanceLauncher` and `vec_env.GodotVecEnv` take
    (make_vec_env's keywords, train's and launch's flags). The first group goes on each instance's command line
    (`instance`); the rest is the launcher's. Bad values raise a one-line ValueError (flags.check_instance_options).
    """

    num_instances: int = 1
    agents_per_instance: Optional[int] = None  # None: the game's own choice (its env_info says how many)
    seed: int = 0  # instance i gets seed + i x copies (a restarted one another, see InstanceLauncher._spawn)
    headless: bool = True
    speedup: float = 1
    action_repeat: int = 1
    max_episode_steps: Optional[int] = None  # None: the game's own time limit
    display: Optional[str] = None  # a windowed instance's X display (None: $DISPLAY, else a private Xvfb)
    extra_args: Sequence[str] = ()  # appended to every instance's command line
    copies: int = 1  # copies of the game's scene in each instance (the addon's scene_copies.gd)
    # the launcher's
    batch: bool = True  # the games as SCHED_BATCH (see _spawn); False under --async, whose learner updates beside them
    run_dir: Optional[str | os.PathLike] = None  # logs/instance_<i>.log go there (None: a temporary folder)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    step_timeout: float = DEFAULT_TIMEOUT_S  # how long a reply may take before the instance counts as silent
    max_restarts: int = DEFAULT_MAX_RESTARTS  # per instance slot
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES  # per instance slot
    report: Optional[Callable[[str], None]] = None  # where crashes, restarts and refusals are said (None: stderr)
    # the vector env's: a game that keeps raising script errors (SCRIPT_ERRORS_TO_STOP) stops the run unless set
    allow_script_errors: bool = False
    # a game whose env_info declares a camera image runs windowed even when headless was asked for (a headless build
    # renders nothing); off for what only reads env_info (`godot-ppo envs`)
    auto_window: bool = True

    def __post_init__(self):
        check_instance_options(self.num_instances, self.agents_per_instance, self.speedup, self.action_repeat,
                               self.copies)

    def instance(self, game: GodotGame) -> GameInstance:
        """The command line and environment of ``game``'s instances (each then gets its own seed and port)."""
        return GameInstance(game, agents=self.agents_per_instance, seed=self.seed, speedup=self.speedup,
                            action_repeat=self.action_repeat, max_episode_steps=self.max_episode_steps,
                            headless=self.headless, display=self.display, extra_args=tuple(self.extra_args),
                            copies=int(self.copies))


@dataclass
class Instance:
    """One running Godot process and its connection."""

    index: int
    port: int
    token: str
    proc: subprocess.Popen
    log_path: Path
    game: str
    seed: int
    restarts: int = 0
    listener: Optional[socket.socket] = None
    log: Optional[CappedLog] = None
    conn: Optional[GodotConnection] = None
    hello: Optional[dict] = None  # our addon's hello (None from a game made with godot_rl_agents' plugin)
    env_info: Optional[dict] = None
    dialect: Optional[str] = None  # protocol.RL_SYNC or protocol.GODOT_RL, told by `protocol.dialect`
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def label(self) -> str:
        return f"instance {self.index} (port {self.port}, pid {self.pid}, game {self.game})"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self.log is not None:  # with what the game printed just before it died, still in the pipe
            return self.log.shown_tail(lines)
        return shown_tail(self.log_path, lines)

    def exit_code(self) -> Optional[int]:
        return self.proc.poll()

    def close_listener(self) -> None:
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
            self.listener = None


# ---------------------------------------------------------------------------------------------- the launcher
class InstanceLauncher:
    """Starts ``options.num_instances`` instances of ``game`` and keeps them connected.

    Use as a context manager (or call `start()` and `close()`). After `start()`, ``instances[i].conn`` is a
    handshaken `GodotConnection` and ``instances[i].env_info`` its env_info reply, whose ``n_agents`` says how many
    agents that instance simulates (a game may ignore ``--agents``). Instance i gets seed ``options.seed + i``
    (``options.seed + i * copies`` with copies of the scene, whose copy k plays that seed + k).
    """

    def __init__(self, game: GodotGame, options: LaunchOptions = LaunchOptions()):
        self.options = options
        self.instance = options.instance(game)
        self.env = game.env
        self.num_instances = int(options.num_instances)
        self.headless = bool(options.headless)
        self.seed = int(options.seed)
        self.connect_timeout = float(options.connect_timeout)
        self.max_restarts = int(options.max_restarts)
        self.step_timeout = float(options.step_timeout)
        self.max_log_bytes = int(options.max_log_bytes)
        self.report = options.report or (lambda msg: print(f"godot-ppo: {msg}", file=sys.stderr, flush=True))
        self.events: list[str] = []  # everything reported (crashes, restarts, refused clients, Xvfb)
        self.command_prefix = game.export.command(self.headless)  # a GameError names the fix

        self._tmpdir = None
        run_dir = options.run_dir
        if run_dir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="godot-ppo-")
            run_dir = self._tmpdir
        self.run_dir = Path(run_dir)
        self.log_dir = self.run_dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)

        self.instances: list[Optional[Instance]] = [None] * self.num_instances
        self.restarts = [0] * self.num_instances
        self._logs: list[Optional[CappedLog]] = [None] * self.num_instances  # one per slot, restarts append to it
        self.display: Optional[str] = options.display
        self._xvfb: Optional[Xvfb] = None
        self._started = False
        self._closed = False
        self._failed = False
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- public
    def __enter__(self) -> "InstanceLauncher":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def xvfb_pid(self) -> Optional[int]:
        """The pid of the Xvfb this launcher started (None when it used $DISPLAY or runs headless)."""
        return self._xvfb.pid if self._xvfb is not None else None

    def start(self) -> list[Instance]:
        """Start every instance and wait (in parallel, one deadline) until all are connected and handshaken."""
        if self._closed:
            raise RuntimeError("this launcher is closed")
        if self._started:
            return self.instances
        self._started = True
        _LIVE.add(self)
        _install_cleanup_hooks()
        try:
            if not self.headless:
                self._ensure_display()
            for i in range(self.num_instances):
                self.instances[i] = self._spawn(i, restarts=0)
            self._connect(self.instances, time.monotonic() + self.connect_timeout)
            seen = declared_image(self.instances[0].env_info) if self.headless and self.options.auto_window else None
            if seen is not None:
                self._go_windowed(*seen)
            reports = [self._copies(inst) for inst in self.instances]
            for finding in reports[0].get("findings", []):  # what the copies share, said once
                self.report(f"copies of {self.env}'s scene share what they should not: {finding}")
        except BaseException:
            self._failed = True
            self.close()
            raise
        return self.instances

    def restart(self, index: int, error: Optional[BaseException] = None) -> Instance:
        """Report instance ``index`` as failed (exit code, log tail), end it, and start a fresh one on a new port.

        Raises InstanceCrashedError once the slot has used ``max_restarts`` restarts.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("this launcher is closed")
            old = self.instances[index]
            self._failed = True
            code = None
            if old is not None:
                if old.conn is not None:
                    old.conn.close(send_close=False)
                try:  # a crashed game is usually exiting already: give it a moment to report its own exit code
                    code = old.proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    code = None
                if code is None:
                    end_process_tree([old.pid])
                    self._reap(old.proc)
                old.close_listener()
            lost = self._display_lost()
            if lost is not None:  # every instance went with it, and none can start again
                raise DisplayError(f"{lost}, and {old.label() if old else f'instance {index}'} ended with it: windowed "
                                   "instances cannot run without their display") from error
            what = str(error) if error is not None else "restart requested"
            status = describe_exit(code) if code is not None else "was still running (ended it)"
            msg = f"instance {index} failed: {what}\n  process: {status}; log: {old.log_path if old else '?'}"
            if error is None or not isinstance(error, GodotConnectionError) or not error.log_tail:
                tail = old.log_tail() if old is not None else ""
                if tail:
                    msg += "\n--- last lines printed by the instance ---\n" + tail
            self.events.append(msg)
            if self.restarts[index] >= self.max_restarts:
                self.report(msg + f"\n  restart budget spent ({self.max_restarts} restarts per instance)")
                raise InstanceCrashedError(
                    f"{msg}\ninstance {index} has already been restarted {self.restarts[index]} times "
                    f"(max_restarts={self.max_restarts}); giving up"
                ) from error
            self.restarts[index] += 1
            self.report(msg + f"\n  restarting it ({self.restarts[index]}/{self.max_restarts})")
            inst = self._spawn(index, restarts=self.restarts[index])
            self.instances[index] = inst
            try:
                self._connect([inst], time.monotonic() + self.connect_timeout)
            except BaseException as e:
                raise InstanceCrashedError(f"instance {index} could not be restarted: {e}") from e
            self.events.append(f"instance {index} restarted on port {inst.port} (pid {inst.pid})")
            return inst

    def close(self) -> None:
        """Ask every instance to quit, then end what is left of the process trees, Xvfb included. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _LIVE.discard(self)
            self._end([inst for inst in self.instances if inst is not None])
            for log in self._logs:
                if log is not None:
                    log.close()
            if self._xvfb is not None:
                self._xvfb.stop()
                self._xvfb = None
            if self._tmpdir is not None and not self._failed:
                shutil.rmtree(self._tmpdir, ignore_errors=True)

    def _end(self, live: list) -> None:
        """Ask the instances ``live`` to quit, then end what is left of their process trees (and their descendants,
        noted first: a wrapper script's children would be reparented once it quit; psutil's kill() is safe against
        pid reuse)."""
        below = [p for inst in live if inst.proc.poll() is None for p in descendants(inst.pid)]
        for inst in live:
            if inst.conn is not None:
                inst.conn.close(send_close=True)
            inst.close_listener()
        deadline = time.monotonic() + CLOSE_GRACE_S
        for inst in live:
            if inst.conn is None:
                continue  # never connected: it cannot have received "close"
            try:
                inst.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        end_process_tree([inst.pid for inst in live if inst.proc.poll() is None])
        for p in below:
            try:
                p.kill()
            except psutil.Error:
                pass
        for inst in live:
            self._reap(inst.proc)

    def _go_windowed(self, key: str, size) -> None:
        """The game sees through a camera, which a headless build cannot render: end the headless instances (they
        only said their env_info) and start them again windowed, on $DISPLAY or one Xvfb, said in one line."""
        self._end(self.instances)
        # Nobody looks at a training instance's window: drawing it every frame would halve the rate (the
        # cameras draw themselves, addons/rl_sync/camera_frames.gd).
        extra = tuple(self.instance.extra_args) + (NO_RENDER_LOOP,)
        self.headless, self.instance = False, self.instance.replace(headless=False, extra_args=extra)
        self.command_prefix = self.instance.game.export.command(False)  # a GameError names the fix
        shape = " x ".join(map(str, size)) if isinstance(size, list) else "?"
        why = (f"{self.num_instances} windowed instance(s): {self.env} observes a camera image ({key}, {shape}), which "
               "a headless build cannot render")
        given = self.display or user_display()
        self._ensure_display(f"for {why}", instead=None, need=f"{self.env} observes a camera image ({key}), which only "
                             "a windowed instance renders, and windowed instances need a display")
        if given:
            self._note(f"on the display {given}, {why}")
        self.instances = [self._spawn(i, restarts=0) for i in range(self.num_instances)]
        self._connect(self.instances, time.monotonic() + self.connect_timeout)

    def pids(self) -> list[int]:
        return [inst.pid for inst in self.instances if inst is not None]

    # ---------------------------------------------------------------- internals
    @staticmethod
    def _reap(proc: subprocess.Popen) -> None:
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass

    def _command(self, port: int, seed: int) -> list[str]:
        timeout = max(1, math.ceil(self.connect_timeout))
        return self.instance.replace(seed=seed, display=self.display).command(
            arg("port", port), arg("connect_timeout", timeout)
        )

    def _log(self, index: int) -> CappedLog:
        if self._logs[index] is None:
            self._logs[index] = CappedLog(self.log_dir / f"instance_{index}.log", self.max_log_bytes,
                                          on_flood=lambda: self._report_flood(index))
            self._logs[index].watch = ScriptErrorWatch(lambda first: self._report_script_error(index, first))
        return self._logs[index]

    def _slot_name(self, index: int) -> str:
        """The instance in slot ``index``, for messages (its label once it has started)."""
        inst = self.instances[index]
        return inst.label() if inst is not None else f"instance {index}"

    def _report_script_error(self, index: int, first: str) -> None:
        what, log = self._slot_name(index), self._logs[index]
        msg = f"{what} raised a script error: {first} (log: {log.path})"
        self._note(msg)

    def script_errors(self) -> Optional[str]:
        """None, or one line naming an instance that keeps raising script errors (SCRIPT_ERRORS_TO_STOP since its
        handshake) and its first one. Cheap enough for every step: one comparison per instance slot."""
        for index, log in enumerate(self._logs):
            if log is not None and log.watch.count >= SCRIPT_ERRORS_TO_STOP:
                return (f"{self._slot_name(index)} keeps raising script errors ({log.watch.count} since it connected), a bug in the "
                        f"game; the first: {log.watch.first} (log: {log.path})")
        return None

    def _report_flood(self, index: int) -> None:
        what, log = self._slot_name(index), self._logs[index]
        msg = (f"{what} printed more than {log.max_bytes / 2**20:g} MiB: its log {log.path} keeps the first half "
               "of that and the newest output (a game printing every frame, e.g. a script error, floods like this)")
        self._note(msg)

    def _spawn(self, index: int, restarts: int) -> Instance:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free port; nobody else can hold it
            listener.listen(8)
            listener.setblocking(False)
            port = listener.getsockname()[1]
            token = secrets.token_hex(16)
            # A restarted slot gets a new seed so it does not replay its predecessor's episodes; with copies, copy k
            # of an instance seeded s plays seed s + k, so instances are spaced by the copies.
            seed = self.seed + (index + restarts * self.num_instances) * self.instance.copies
            cmd = self._command(port, seed)
            log = self._log(index)
            log.watch.armed = False  # until this process has handshaken: a game's start may print what it likes
            env = self.instance.replace(display=self.display).environ()
            env[TOKEN_ENV] = token
            shown = " ".join(shlex.quote(c) for c in cmd)
            log.write(f"# godot-ppo: starting instance {index} (restart {restarts}): {shown}\n".encode())
            out_r, out_w = os.pipe()
            proc = None
            try:
                # own session: a terminal's Ctrl-C reaches only us; dies with us (processes.spawn). SCHED_BATCH: a game
                # woken by its actions does not take the trainer's core, so the trainer goes on sending, or choosing
                # the next group's actions, while it simulates (+25-35% steps/s in PPO on 2 cores, docs/benchmarks.md).
                # Not under --async: there a woken game would wait for the learner's update to leave its core
                # (ball_chase on 2 cores: 1.08x -> 1.20x the synchronous steps/s without SCHED_BATCH)
                proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env,
                             batch=self.options.batch)
            except OSError as e:
                raise InstanceStartError(f"could not start instance {index} ({cmd[0]}): {e}") from e
            finally:
                os.close(out_w)
                if proc is None:
                    os.close(out_r)
            log.follow(out_r)
        except BaseException:
            listener.close()
            raise
        return Instance(
            index=index, port=port, token=token, proc=proc, log_path=log.path, game=self.env, seed=seed,
            restarts=restarts, listener=listener, log=log,
        )

    def _connect(self, pending_instances: Sequence[Instance], deadline: float) -> None:
        """Accept each instance's connection, handshake, read env_info and tell the game's dialect, all instances in
        parallel against one deadline (`connect.ConnectionWait`)."""
        try:
            ConnectionWait(pending_instances, env=self.env, connect_timeout=self.connect_timeout,
                           step_timeout=self.step_timeout, note=self._note).run(deadline)
        except InstanceStartError as e:  # a display that answers our probe but refuses the game (xauth), or died
            if self.headless or isinstance(e, DisplayError) or GODOT_NO_DISPLAY not in str(e):
                raise
            raise DisplayError(self._display_lost() or (
                f"the game could not open the display {self.display} (it said: {GODOT_NO_DISPLAY}): let this user open "
                "it (xauth, xhost), or unset DISPLAY so that an Xvfb is started for the windowed instances")) from None

    def _copies(self, inst: Instance) -> dict:
        """The env_info's report of the scene's copies (our extension: their number, the check of the game's scripts),
        with as many as --copies asked for, else a GameError (an export whose addon predates them ignores the flag)."""
        report = inst.env_info.get("copies") or {"count": 1}
        if report.get("count") != self.instance.copies:
            raise GameError(f"{self.env} runs {report.get('count')} copy of its scene, not the {self.instance.copies} "
                            "asked for (--copies): export it again with this addon (scene_copies.gd; godot_rl_agents' "
                            "plugin has no copies)")
        return report

    def _note(self, msg: str) -> None:
        """Report ``msg`` and keep it in ``events``."""
        self.events.append(msg)
        self.report(msg)

    # ---------------------------------------------------------------- Xvfb
    def _ensure_display(self, why: str = "for the windowed instances", **no_display) -> None:
        """$DISPLAY or an Xvfb for the windowed instances (``no_display``: what to say without either, `open_display`)."""
        if self.display is not None:
            return
        self._xvfb = Xvfb(self.log_dir / "xvfb.log")
        self.display = open_display(self._xvfb, self._note, why, **no_display)

    def _display_lost(self) -> Optional[str]:
        """None while the windowed instances' display is there (or they run headless), else what became of it."""
        return None if self.headless or self.display is None else display_lost(self.display, self._xvfb)
