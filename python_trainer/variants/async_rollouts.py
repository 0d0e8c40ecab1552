"""Rollouts that never stop the games: `godot-ppo train --async` (Sample Factory's overlap of collection and update).

The synchronous loop collects, then updates, then collects: the games wait during the update, the learner during the
rollout. With --async the next rollout is already being collected when ppo.py starts an update: each `collect`
call takes the rollout asked for at the last call and, right away, asks for the next one with the weights the learner
has at that moment (before its update). So rollout k+1 is collected, with the weights from before update k, while
update k runs. Each sample keeps the log-probability of the policy that chose it (the behaviour policy), and PPO's
ratio is taken against it, as always. Its critic values do not stay the collector's: the learner's critic, as it is
when the update starts, values the rollout again (`refresh_values`) before the advantages are computed, as in a
synchronous run (on CartPole, a critic one update old cost a fifth more samples to the solve: docs/training.md).
--max-policy-lag N keeps N rollouts asked for ahead, so no sample is more than N updates old. The lag of the rollout
the learner takes is `charts/policy_lag` (all its samples share it: the weights change only between rollouts); the
largest so far, `charts/policy_lag_max`.

Two kinds fill ppo.py's rollout slot (rollout.Rollouts) this way, and ppo.py does not know which runs:
- `LocalAsyncRollouts` here: this machine's games and their collection in one child process (a
  ray_worker.RolloutWorker, the Ray worker's code without Ray, served over a pipe);
- ray_rollouts.RayRollouts with --async: the workers' next fragments are requested before the update starts.

Why a process, not a thread: measured on ball_chase (docs/training.md, "--async"), a collector thread made the update
2.7x slower and the acting 1.7x slower, since both hold the GIL for most of their Python; the run was no faster.
A process costs the fragment's trip through the pipe (pickled numpy arrays, about 1 ms for 4,096 samples).

Why the learner lowers its priority (--learner-nice, 10): the collection is a chain of short turns (a game simulates,
the collector acts, the next game simulates), so where the cores are shared, an update that holds one when a game is
woken delays the whole chain, and the learner then waits for the rollout anyway. At nice 10 the update takes what the
collection leaves: on 2 cores, ball_chase's --async kept 1.75-1.83 cores busy instead of 1.62-1.71, -1% to +8%
in steps/s (docs/training.md). The data do not depend on it, only the time.

The child process ignores SIGINT (the learner's Ctrl-C stops it through `close`, after the checkpoint) and dies with
the learner (PR_SET_PDEATHSIG), its games with it. It sends a heartbeat every second (HEARTBEAT_S), so each of
the learner's waits, reads and writes on the pipe ends --step-timeout after the last word heard (a stopped or stuck
collector is named, and killed at close); the rollouts asked ahead and not begun are dropped, not collected, when
the run evaluates or closes (--max-policy-lag is at most bounds.POLICY_LAG). An async run is reproducible in its data but not bit-identical to
the synchronous one: its rollouts are collected with older weights.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import select
import signal
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import numpy as np
import torch

from python_trainer.base import bounds
from python_trainer.base import combinations
from python_trainer.base.flags import GoesWith, aliases, flag, in_range
from python_trainer.base.processes import describe_exit, die_with_parent, lower_priority
from python_trainer.envs.failures import WorkerLostError
from python_trainer.rollout import Rollouts, RolloutBuffer
from python_trainer.variants.ray_worker import RolloutWorker, write_fragment

ASYNC = GoesWith("async_rl", "asynchronous collection", "--async")
CLOSE_TIMEOUT_S = 30.0  # the collector's games end within this once asked (it is then terminated, then killed)
CLOSE_SILENCE_S = 3.0  # a collector that sends nothing for this long while it closes is stopped or stuck: killed
HEARTBEAT_S = 1.0  # the collector says it is alive this often (at most a quarter of --step-timeout)
TERM_GRACE_S = 2.0  # a collector that does not close: SIGTERM (its launcher ends its games), then SIGKILL after this
REFRESH_ROWS = 8192  # rows per forward pass of refresh_values (a camera game's images become floats a block at a time)


@dataclass
class AsyncArgs:
    async_rl: Annotated[bool, aliases("--async")] = False
    """collect the next rollout while the learner updates on the last one (Sample Factory's asynchronous RL): the
    games never wait for an update, and each rollout is collected with the weights from before it (see
    --max-policy-lag); on this machine the games and their collection then run in a child process"""
    max_policy_lag: int = flag(1, in_range(1, bounds.POLICY_LAG.value, f"an integer from 1 to {bounds.POLICY_LAG.value} "
                                           "(updates; each is a rollout held and collected ahead)", "1"),
                               goes_with=ASYNC)
    """with --async: how many rollouts are asked for ahead of the learner, so how many updates old a sample may be
    (at most 8: the rollouts asked ahead are dropped when the run evaluates or ends)"""
    learner_nice: int = flag(10, in_range(0, 19, "an integer from 0 to 19 (Linux's nice)", "10"), goes_with=ASYNC)
    """with --async: the learner's niceness once its collection has started, so that where the update and the
    collection want the same cores, the collection (the games and their acting) takes them first and the update
    fills the gaps (ball_chase on 2 cores: 1.62-1.71 -> 1.75-1.83 cores busy, -1% to +8% in steps/s); 0 keeps
    the learner's priority"""


def refusal(args) -> Optional[str]:
    """Why --async cannot run with these flags, in one line, or None."""
    if not args.async_rl:
        return None
    if args.self_play:
        return combinations.refusal("async/self_play")
    if args.editor:
        return combinations.refusal("async/editor")
    return None


class AskedAhead:
    """The rollouts asked for and not yet taken, oldest first, each with the version of the weights it was asked
    with (the updates done then), and the lag of each one taken: the bookkeeping both kinds of rollouts share.
    ``depth``: how many are asked for ahead of the learner (--max-policy-lag; 0: each when it is taken)."""

    def __init__(self, depth: int):
        self.depth, self.asked, self.version = depth, deque(), 0
        self.lag = self.lag_max = 0

    def take(self, ask: Callable):
        """The oldest rollout asked for (``ask()`` asks for one now when none is), and its lag noted."""
        if not self.asked:
            self.asked.append((self.version, ask()))
        version, request = self.asked.popleft()
        self.lag = self.version - version
        self.lag_max = max(self.lag_max, self.lag)
        return request

    def ask_ahead(self, ask: Callable) -> None:
        """Before the update: ``ask()`` for rollouts up to ``depth`` ahead; the update then makes the next version."""
        while len(self.asked) < self.depth:
            self.asked.append((self.version, ask()))
        self.version += 1

    def drop(self) -> list:
        """The rollouts asked for and not taken, oldest first, forgotten (an evaluation comes before them)."""
        requests = [request for _, request in self.asked]
        self.asked.clear()
        return requests

    def scalars(self) -> dict:
        return {"charts/policy_lag": self.lag, "charts/policy_lag_max": self.lag_max}


class LocalAsyncRollouts(Rollouts):
    """This machine's games collected in a child process, the next rollout asked for before each update (see the
    module's docstring). ``game``, ``env_kwargs``: make_vec_env's, as LocalRollouts' games would be made."""

    def __init__(self, game, env_kwargs: dict, args, max_policy_lag: int = 1):
        self.max_policy_lag = max_policy_lag
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: forking torch's threads is not safe
        self._conn, child = ctx.Pipe()  # a socket pair: the learner frames its messages itself, with deadlines
        self._sock = socket.socket(fileno=os.dup(self._conn.fileno()))
        # the longest the collector may say nothing while it is waited for: until its first word (its interpreter
        # starts, imports torch), the games' start budget; then --step-timeout
        self._silence, self._silence_flag = float(args.connect_timeout), "--connect-timeout"
        self._logs = Path(env_kwargs["run_dir"]) / "logs" if env_kwargs.get("run_dir") else None
        self._proc = ctx.Process(target=_serve, args=(child, os.getpid(), game, env_kwargs, asdict(args)),
                                 name="godot-ppo collector", daemon=True)
        self._proc.start()
        child.close()
        self._env_params: dict = {}
        self.ahead = AskedAhead(max_policy_lag)  # (each answer comes down the pipe in the order asked)
        self._started = self._closed = False
        self._cut = False  # a message was cut (a signal during its read or write): the pipe cannot be trusted
        self._silent = False  # the collector said nothing for --step-timeout: stopped or stuck
        try:
            info = self._call("start", what="its games to start")
        except BaseException:
            self.close()
            raise
        self._started = True
        self._silence, self._silence_flag = float(args.step_timeout), "--step-timeout"
        self.niceness = lower_priority(args.learner_nice)  # the collector and its games keep theirs
        self.num_envs = info["num_envs"]
        self.single_observation_space, self.single_action_space = info["observation_space"], info["action_space"]
        self.env_info, self.agents_per_instance = info["env_info"], info["agents_per_instance"]
        self.game_settings, self.image_layout = info["game_settings"], info["image_layout"]
        self._startup_line = info["startup_line"]

    # ------------------------------------------------------------------------------------------------ the learner's
    def startup_line(self) -> Optional[str]:
        what = (f"asynchronous collection in process {self._proc.pid} (policy lag <= {self.max_policy_lag}; the "
                f"learner at nice {self.niceness})")
        return what if self._startup_line is None else f"{self._startup_line}; {what}"

    def warm_up(self, bonus, steps: int, seed: int) -> None:
        """RND's warm-up on the collector's games; their moments go into ``bonus``'s statistics."""
        moments = self._call("warm_up", steps, bonus.obs_rms.mean.shape[0], what="RND's warm-up")
        if moments is not None:
            bonus.obs_rms.update_from_moments(*moments)

    def reset(self, normalizer, buf: RolloutBuffer, seed: int) -> None:
        """Nothing here: the collector resets its games at its first rollout (and after an evaluation)."""

    def collect(self, agent, normalizer, buf: RolloutBuffer, bonus=None) -> None:
        """Take the oldest rollout asked for (the first call asks for it now) into ``buf``, merging the moments it
        normalised into ``normalizer``; then ask for the next ones, with the weights and statistics as they are."""
        ask = lambda: self._send("collect", rollout_params(agent, normalizer, bonus, self._env_params))  # noqa: E731
        self.ahead.take(ask)
        frag = self._answer("a rollout")
        buf.episodes = []
        write_fragment(buf, normalizer, frag, slice(None))
        buf.policy_s, buf.env_wait_s, buf.group_steps = frag["timing"]
        buf.beside_s = frag["seconds"]
        self.ahead.ask_ahead(ask)
        refresh_values(agent, buf)

    def scalars(self) -> dict:
        return self.ahead.scalars()

    def evaluate(self, act: Callable, num_episodes: int, seed: int) -> list[float]:
        """The deterministic evaluation on the collector's games, once the rollouts asked for ahead are dropped (the
        one it is collecting ends first; the evaluation resets the games)."""
        self._drop()
        return self._call("evaluate", act, num_episodes, seed, what=f"the evaluation's {num_episodes} episodes")

    def _drop(self) -> int:
        """Forget the rollouts asked for ahead: the collector drops those it has not begun, and its answers up to
        the drop's are read and thrown away (each answer comes down the pipe in the order asked). Returns how many
        it dropped unbegun."""
        if not self.ahead.drop():
            return 0
        self._send("drop")
        while True:
            status, value = self._receive("the rollouts asked ahead to be dropped")
            if status == "dropped":
                return value

    def set_env_params(self, values: dict) -> None:
        """The games get ``values`` with the next rollout asked for (the one already asked for plays the old)."""
        self._env_params = {**self._env_params, **values}

    def close(self) -> None:
        """Ask the collector to end its games (the rollouts asked ahead and not begun are dropped, the one begun
        ends), then terminate it (SIGTERM: its launcher ends the games), then kill. A collector that says nothing
        for CLOSE_SILENCE_S (stopped, stuck) or whose pipe was cut is terminated at once."""
        proc = self._proc
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        ended = False
        if not (self._cut or self._silent) and proc.is_alive():
            try:
                self._send("close", silence=CLOSE_SILENCE_S)
                ended = _drain(self._sock, deadline)  # its unread answers would block its sends: read, dropped
            except WorkerLostError:
                pass  # it is ending already, or silent
        if ended:
            proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.terminate()
            if proc.pid is not None:
                _signal(proc.pid, signal.SIGCONT)  # a stopped collector (SIGSTOP) gets its SIGTERM
            proc.join(TERM_GRACE_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
        self._sock.close()
        self._conn.close()

    # --------------------------------------------------------------------------------------------------- the pipe
    def _call(self, method: str, *args, what: str):
        self._send(method, *args)
        return self._answer(what)

    def _answer(self, what: str):
        """The answer to the oldest call (``what`` the learner waits for), heartbeats skipped; the collector's error
        raised."""
        status, value = self._receive(what)
        if status == "error":
            raise value
        return value

    def _receive(self, what: str) -> tuple:
        """The next (status, value) that is not a heartbeat. WorkerLostError when the collector ends, or says nothing
        for --step-timeout (a heartbeat counts: the wait runs from the last word heard)."""
        while True:
            status, value = pickle.loads(self._read_frame(what))
            if status != "beat":
                return status, value

    def _send(self, method: str, *args, silence: Optional[float] = None) -> None:
        """One call, written whole with multiprocessing's framing (the collector reads it with recv_bytes); the
        collector must take some of it within ``silence`` (--step-timeout) each time the pipe is full."""
        data = _dumps((method, args))
        header = struct.pack("!i", len(data)) if len(data) <= 0x7FFFFFFF else struct.pack("!iQ", -1, len(data))
        view, limit = memoryview(header + data), self._silence if silence is None else silence
        self._cut = True  # until the whole message is written
        while view:
            try:
                if not select.select([], [self._sock], [], limit)[1]:
                    raise self._silent_error(f"to take the call {method!r}", limit)
                view = view[self._sock.send(view, socket.MSG_DONTWAIT):]
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                raise self._gone() from None
        self._cut = False

    def _read_frame(self, what: str) -> bytes:
        """One message's bytes, each part within --step-timeout of the last (a signal may end the wait)."""
        self._cut = True  # until the whole message is read
        (size,) = struct.unpack("!i", self._read_exact(4, what))
        if size == -1:
            (size,) = struct.unpack("!Q", self._read_exact(8, what))
        data = self._read_exact(size, what)
        self._cut = False
        return data

    def _read_exact(self, size: int, what: str) -> bytes:
        parts, left = [], size
        while left:
            try:
                if not select.select([self._sock], [], [], self._silence)[0]:
                    raise self._silent_error(f"for {what}", self._silence)
                chunk = self._sock.recv(min(left, 1 << 22))
            except InterruptedError:
                continue
            except OSError:
                raise self._gone() from None
            if not chunk:
                raise self._gone()
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _silent_error(self, what: str, seconds: float) -> WorkerLostError:
        self._silent = True
        return WorkerLostError(
            f"the collector process {self._proc.pid} said nothing for {seconds:g} s while the learner waited {what} "
            f"({self._silence_flag} {self._silence:g}; it says it is alive while it runs): it "
            f"is stopped or stuck{self._where_logs()}")

    def _gone(self) -> WorkerLostError:
        self._proc.join(5)
        code = self._proc.exitcode
        when = "" if self._started else " before its games started"
        hint = ""
        if not self._started and code == 1:  # what a script without the guard gets (its process prints the cause)
            hint = (" (a script that calls godot-ppo must start it under `if __name__ == '__main__':`: --async's "
                    "process imports the script again)")
        return WorkerLostError(f"the collector process {self._proc.pid} ended{when} ({describe_exit(code)}){hint}"
                               f"{self._where_logs()}")

    def _where_logs(self) -> str:
        """Where its games' logs are, once they started (a start that failed leaves no run folder)."""
        return f"; its games' logs are in {self._logs}" if self._started and self._logs is not None else ""


def refresh_values(agent, buf: RolloutBuffer) -> None:
    """buf.values, V(s_t) (and V_int with RND) of every stored step, as ``agent``'s critic gives them now instead of
    as the older weights that collected the rollout did: GAE's baseline and the value loss's clipping anchor are then
    the learner's own, as in a synchronous rollout. A recurrent critic replays each env's steps from the rollout's
    initial state, in blocks of whole envs (REFRESH_ROWS rows at most), as the update does."""
    num_steps, num_envs = buf.rewards.shape
    b_obs, b_dones = buf.batch_obs(), torch.from_numpy(buf.dones.reshape(-1))
    flat = np.arange(num_steps * num_envs).reshape(num_steps, num_envs)  # time-major, as env_minibatches'
    per_block = max(1, REFRESH_ROWS // num_steps)
    with torch.no_grad():
        for start in range(0, num_envs, per_block):
            envs = np.arange(start, min(num_envs, start + per_block))
            rows = torch.from_numpy(flat[:, envs].ravel())
            x, done = b_obs.index_select(0, rows), b_dones.index_select(0, rows)
            values = agent.get_value(x, buf.initial_state[envs], done)
            buf.values[:, envs] = values.numpy().reshape(num_steps, len(envs), -1)


def rollout_params(agent, normalizer, bonus, env_params) -> dict:
    """What the collector's RolloutWorker loads for one rollout (ray_rollouts.RayRollouts broadcasts the same)."""
    params = {"model": _numpy_state(agent), "normalizer": normalizer.state_dict(), "env_params": dict(env_params),
              "rnd": None}
    if bonus is not None:
        params["rnd"] = {"model": _numpy_state(bonus), "stats": bonus.stats_state_dict()}
    return params


def _drain(sock, deadline: float) -> bool:
    """Read and drop whatever the collector still sends, as raw bytes, until it closes its end (True), says nothing
    for CLOSE_SILENCE_S (it sends a heartbeat every second while it lives) or ``deadline`` (time.monotonic) passes."""
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            if not select.select([sock], [], [], min(remaining, CLOSE_SILENCE_S))[0]:
                return False  # silent: stopped or stuck
            if not sock.recv(1 << 20):
                return True  # its end is closed
        except InterruptedError:
            continue
        except OSError:
            return True
    return False


def _signal(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _heartbeat_s(step_timeout: float) -> float:
    return min(HEARTBEAT_S, step_timeout / 4)


def _numpy_state(module) -> dict:
    """A module's state_dict as numpy arrays (copies: the update changes the weights in place)."""
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


# ======================================================================================================================
# The collector process
# ======================================================================================================================
def _serve(conn, parent_pid, game, env_kwargs, args) -> None:
    """The child's main: a RolloutWorker on this machine's games, its methods called over ``conn`` in order, each
    answered ("ok", result) or ("error", the exception), until "close" or the learner's end."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's: it checkpoints, then closes us
    worker = RolloutWorker(0, game, env_kwargs, args, None, node=("local", "127.0.0.1"))
    calls: queue.Queue = queue.Queue()  # read by a thread, so that the learner's sends never wait for a rollout
    sending = threading.Lock()  # the answers and the heartbeats share the pipe
    threading.Thread(target=_read_calls, args=(conn, calls), daemon=True).start()
    threading.Thread(target=_beat, args=(conn, sending, _heartbeat_s(args["step_timeout"])), daemon=True).start()
    try:
        while True:
            method, call_args = calls.get()
            if method == "close":
                break
            if method == "drop":  # the calls asked ahead were dropped from the queue: say where the answers end
                answer = ("dropped", call_args[0])
            else:
                try:
                    answer = ("ok", getattr(worker, method)(*call_args))
                except BaseException as e:  # the learner raises it
                    answer = ("error", _portable(e))
            with sending:
                conn.send_bytes(_dumps(answer))
    finally:
        worker.close()


def _read_calls(conn, calls: queue.Queue) -> None:
    """The learner's calls into ``calls``; "drop" and "close" first empty it of the rollouts asked ahead."""
    while True:
        try:
            method, call_args = pickle.loads(conn.recv_bytes())
        except Exception:  # the learner is gone (or its message was cut): end as if asked
            method = "close"
        if method in ("drop", "close"):
            dropped = 0
            while True:
                try:
                    calls.get_nowait()
                    dropped += 1
                except queue.Empty:
                    break
            calls.put((method, (dropped,)))
            if method == "close":
                return
        else:
            calls.put((method, call_args))


def _beat(conn, sending: threading.Lock, every: float) -> None:
    """A heartbeat every ``every`` seconds while the process lives: the learner's wait for an answer runs from the
    last word heard (a rollout or an evaluation may take long; a stopped or stuck collector says nothing)."""
    beat = _dumps(("beat", None))
    while True:
        time.sleep(every)
        try:
            with sending:
                conn.send_bytes(beat)
        except Exception:
            return


def _dumps(message) -> bytes:
    """A message as plain pickle: multiprocessing's own pickler would pass each torch tensor (a normaliser's
    statistics, an LSTM's memories) as a shared file descriptor, a socket handshake with the other process each."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _portable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling, else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")
