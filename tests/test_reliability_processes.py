"""Reliability of the processes we start (issue 13, items 2, 3, 5 and 8): children die with their parent however it
dies, an ignored SIGINT stays ignored, a game's log flood is capped, and only the started process may connect.

Every case runs real processes (the fake game where the engine adds nothing, the real exports where it does) and
waits by polling with deadlines.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from helpers import FAKE_GAME, REPO, alive, descendants, no_display_env, quiet, read_json_line, read_line, wait_for, wait_gone
from python_trainer.envs.game import godot_game
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.logs import CappedLog, ScriptErrorWatch
from python_trainer.base.processes import end_process_tree, read_log_tail

POLICY = REPO / "exports" / "policies" / "ball_chase.json"


def launch(env, num_instances=1, *, binary=None, **options):
    """Started instances of ``env`` (``binary``: the fake game's argv), launched as training launches them."""
    launcher = InstanceLauncher(godot_game(env, program=binary), LaunchOptions(num_instances=num_instances, **options))
    launcher.start()
    return launcher


def wait_for_children(pid, names, timeout=60.0):
    """Poll until the process tree below ``pid`` holds a process matching each of ``names`` (in its command line);
    returns every descendant's pid then."""

    def all_there():
        found = set()
        for child in descendants(pid):
            try:
                cmdline = " ".join(psutil.Process(child).cmdline())
            except psutil.Error:
                continue
            found |= {name for name in names if name in cmdline}
        return len(found) == len(names) and descendants(pid)

    return wait_for(all_there, timeout, f"{names} all below pid {pid}")


def kill_parent_and_check_children(cmd, names, sig, tmp_path, ready=None):
    """Start ``cmd``, wait until its children ``names`` run, send it ``sig``: every child must be gone soon after."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=no_display_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "parent.stderr", "wb"))
    children = []
    try:
        if ready is not None:
            read_line(proc, ready, timeout=90)
        children = wait_for_children(proc.pid, names)
        assert children
        proc.send_signal(sig)
        proc.wait(timeout=20)
        left = wait_gone(children, timeout=5)
        assert left == [], f"still running after {signal.Signals(sig).name} of their parent: " + ", ".join(
            f"{p} {' '.join(psutil.Process(p).cmdline())}" for p in left if alive(p))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        end_process_tree([p for p in children if alive(p)])  # what a failing case left behind
        proc.stdout.close()


# ---------------------------------------------------------------------------------------------- item 2
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_play_children_die_with_play(windowed_export, tmp_path, sig):
    """`godot-ppo play` without $DISPLAY runs Xvfb and the windowed game; both end with it."""
    cmd = [sys.executable, "-m", "python_trainer", "play", str(POLICY), "--seconds", "60"]
    kill_parent_and_check_children(cmd, ["Xvfb", "--policy="], sig, tmp_path, ready=b"playing")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_launch_window_children_die_with_launch(windowed_export, tmp_path, sig):
    """`godot-ppo launch --window` without $DISPLAY: the windowed instance and its Xvfb end with it."""
    cmd = [sys.executable, "-m", "python_trainer", "launch", "--window", "--seconds", "60", "--agents", "2",
           "--run-dir", str(tmp_path / "run")]
    kill_parent_and_check_children(cmd, ["Xvfb", "--port="], sig, tmp_path, ready=b"launched")


RUN_TO_END_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from python_trainer.base.processes import run_to_end
    print("running", flush=True)
    run_to_end(["sleep", "300"], timeout=600)
""")


def test_run_to_end_child_dies_with_its_parent(tmp_path):
    """The --list_envs probe (and every other run_to_end) ends when the process waiting for it is killed."""
    cmd = [sys.executable, "-c", RUN_TO_END_CHILD, str(REPO)]
    kill_parent_and_check_children(cmd, ["sleep 300"], signal.SIGKILL, tmp_path, ready=b"running")


def test_instances_started_on_a_worker_thread_outlive_the_thread(fake_binary, tmp_path):
    """The parent-death signal fires when the thread that forked exits: a launcher started on a short-lived thread
    must not lose its instances when that thread ends."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(launcher=launch(
        "ball_chase", 2, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary, report=quiet([]))))
    worker.start()
    worker.join(60)
    launcher = box["launcher"]
    try:
        assert not worker.is_alive()
        for inst in launcher.instances:
            inst.conn.reset()
            inst.conn.step_send([{"move": [0.0, 0.0]}])
            inst.conn.step_recv(timeout=10)
            assert inst.proc.poll() is None
    finally:
        pids = launcher.pids()
        launcher.close()
    assert wait_gone(pids, 10) == []


# ---------------------------------------------------------------------------------------------- item 3
IGNORING_CHILD = textwrap.dedent("""
    import json, select, sys
    sys.path.insert(0, sys.argv[1])
    from python_trainer.envs.vec_env import make_vec_env
    env = make_vec_env("ball_chase", num_instances=2, agents_per_instance=2, binary=[sys.executable, sys.argv[2]],
                       run_dir=sys.argv[3], report=lambda msg: print(msg, file=sys.stderr, flush=True))
    env.reset()
    print(json.dumps({"pids": env.launcher.pids()}), flush=True)
    go_at = None
    steps = 0
    while True:
        env.step(env.action_space.sample())
        steps += 1
        if go_at is None and select.select([sys.stdin], [], [], 0)[0]:
            sys.stdin.readline()
            go_at = steps  # the test wrote this line after sending the signal: every step from here is after it
        if go_at is not None and steps == go_at + 200:
            print(json.dumps({"stepped_after_signal": 200}), flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_ignored_signal_stays_ignored(fake_binary, tmp_path, sig):
    """`cmd &` in a script starts the trainer with SIGINT ignored: a SIGINT must not close its instances."""
    proc = subprocess.Popen(
        [sys.executable, "-c", IGNORING_CHILD, str(REPO), str(FAKE_GAME), str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / "child.stderr", "wb"),
        preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN),
    )
    pids = []
    try:
        pids = read_json_line(proc, timeout=60)["pids"]
        proc.send_signal(sig)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert read_json_line(proc, timeout=60) == {"stepped_after_signal": 200}
        assert proc.poll() is None and all(alive(p) for p in pids)
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            stream.close()
    assert wait_gone(pids, 10) == []  # and SIGKILL of the trainer still ends them (item 2)
    assert "launcher is closed" not in (tmp_path / "child.stderr").read_text()


# ---------------------------------------------------------------------------------------------- item 5
def test_a_flooding_instance_is_capped_reported_and_keeps_running(fake_binary, tmp_path):
    cap = 2**20
    events = []
    launcher = launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
                      extra_args=["--fake_flood"], max_log_bytes=cap, report=quiet(events))
    try:
        inst = launcher.instances[0]
        log_path = tmp_path / "logs" / "instance_0.log"
        inst.conn.reset()
        deadline = time.monotonic() + 60
        steps = 0
        while inst.log.bytes_in < 20 * cap:  # the game has printed 20 times the cap
            assert time.monotonic() < deadline, f"the fake game printed only {inst.log.bytes_in} bytes"
            inst.conn.step_send([{"move": [0.0, 0.0]}])
            assert inst.conn.step_recv(timeout=10)["type"] == "step"
            steps += 1
            assert os.path.getsize(log_path) <= cap
        assert steps > 0 and inst.proc.poll() is None
        floods = [e for e in events if "printed more than" in e]
        assert len(floods) == 1, events
        assert inst.label() in floods[0] and str(log_path) in floods[0]
        assert "SCRIPT ERROR" in inst.log_tail()  # error tails still quote the newest output
    finally:
        launcher.close()
    text = log_path.read_bytes()
    assert len(text) <= cap
    assert text.startswith(b"# godot-ppo: starting instance 0") and b"fake_game: pid" in text[:4096]
    assert b"output was cut here, only the newest output follows" in text
    assert "SCRIPT ERROR" in read_log_tail(log_path)


def test_capped_log_keeps_the_start_and_the_newest_whole_lines(tmp_path):
    cap = 2**16
    flooded = []
    log = CappedLog(tmp_path / "game.log", cap, on_flood=lambda: flooded.append(True))
    lines = [f"line {i:06d} {'x' * (i % 50)}\n".encode() for i in range(20000)]
    for line in lines:
        log.write(line)
        assert os.path.getsize(tmp_path / "game.log") <= cap
    log.close()
    text = (tmp_path / "game.log").read_bytes()
    head, tail = text.split(b"\n# godot-ppo: this log is capped at 0.0625 MiB: output was cut here, "
                            b"only the newest output follows\n")
    assert len(text) <= cap and flooded == [True] and log.bytes_in == sum(map(len, lines))
    assert head + b"\n" == b"".join(lines[:head.count(b"\n") + 1]) and len(head) > cap // 2 - 100
    assert tail == b"".join(lines[-tail.count(b"\n"):]) and len(tail) > cap // 4 - 100


def test_a_script_error_whose_at_line_comes_in_the_next_chunk_is_reported_with_it():
    """Godot writes ``SCRIPT ERROR:`` and its ``At:`` line in two writes: a chunk may end between them."""
    said = []
    watch = ScriptErrorWatch(said.append)
    watch.armed = True
    watch.feed(b"hello\nSCRIPT ERROR: _physics_process: Trying to assign.\n")
    assert said == []
    watch.feed(b"   At: res://broken_agent.gd:12.\nSCRIPT ERROR: again\n")
    assert said == ["SCRIPT ERROR: _physics_process: Trying to assign.; At: res://broken_agent.gd:12."]
    assert watch.count == 2
    ended = ScriptErrorWatch(said.append)  # a game that printed its error last and exited is still reported
    ended.armed = True
    ended.feed(b"SCRIPT ERROR: last words\n")
    ended.end()
    assert said[-1] == "SCRIPT ERROR: last words" and ended.count == 1


def test_a_crashed_instance_log_tail_holds_its_last_words(fake_binary, tmp_path):
    """The game's output goes through a pipe: what it printed just before dying must be in the tail we quote."""
    with launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
                extra_args=["--fake_mode=crash_after=1"], report=quiet([])) as launcher:
        inst = launcher.instances[0]
        inst.conn.reset()
        for _ in range(2):
            inst.conn.step_send([{"move": [0.0, 0.0]}])
        inst.proc.wait(timeout=10)
        assert "crashing on purpose" in inst.log_tail()


# Godot 3.2.3's lines, verbatim, from an export of a project with imported pngs (godotengine/godot#25318)
HARMLESS = ("ERROR: _get_modified_time: Failed to get modified time for: res://art/enemyFlyingAlt_1.png.\n"
            "   At: drivers/unix/file_access_unix.cpp:321.\n"
            "ERROR: set_locale: Unsupported locale 'C', falling back to 'en'.\n   At: core/translation.cpp:969.\n")


def test_harmless_godot_lines_are_left_out_of_the_log_file_and_of_what_is_shown(fake_binary, tmp_path):
    from python_trainer.engine.in_engine import game_error
    from python_trainer.envs.logs import shown_lines

    real = "ERROR: _load: Failed loading resource: res://x.tscn.\n   At: core/io/resource_loader.cpp:278.\n"
    assert shown_lines("a\n" + HARMLESS + real + "b") == ["a", *real.splitlines(), "b"]
    failed = subprocess.CompletedProcess([], 1, stdout="", stderr=HARMLESS * 7 + real)
    assert str(game_error(failed, "the run")) == f"the run failed (exit code 1):\n{real.splitlines()[0]}"
    with launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
                extra_args=["--fake_mode=crash_after=1", "--fake_imported_assets=7"], report=quiet([])) as launcher:
        inst = launcher.instances[0]
        inst.conn.reset()
        for _ in range(2):
            inst.conn.step_send([{"move": [0.0, 0.0]}])
        inst.proc.wait(timeout=10)
        tail = inst.log_tail()
        assert "crashing on purpose" in tail and "fake_game: pid" in tail
        assert "_get_modified_time" not in tail and "file_access_unix" not in tail, tail
        log = inst.log_path.read_text()  # they buried a game's real errors there too
        assert "_get_modified_time" not in log and "file_access_unix" not in log and "crashing on purpose" in log


def test_the_harmless_filter_judges_whole_lines_across_chunks_and_only_at_the_start():
    from python_trainer.envs.logs import HarmlessFilter

    text = ("Godot Engine v3.2.3\n" + HARMLESS + "rl_sync: error: a real one\n").encode()
    kept = HarmlessFilter()
    out = b"".join(kept.feed(text[i:i + 7]) for i in range(0, len(text), 7)) + kept.end()
    assert out == b"Godot Engine v3.2.3\nrl_sync: error: a real one\n"
    late = HarmlessFilter(window=16)
    assert late.feed(b"x" * 16 + b"\n") == b"x" * 16 + b"\n" and late.feed(HARMLESS.encode()) == HARMLESS.encode()


# ---------------------------------------------------------------------------------------------- item 8
def test_the_token_is_in_the_environment_not_the_command_line(fake_binary, tmp_path):
    with launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
                report=quiet([])) as launcher:
        inst = launcher.instances[0]
        process = psutil.Process(inst.pid)
        assert inst.token not in " ".join(process.cmdline())  # /proc/PID/cmdline: every local user reads it
        assert process.environ()["RL_SYNC_TOKEN"] == inst.token  # /proc/PID/environ: only the same user
        assert inst.hello["pid"] == inst.pid


HOSTILE = textwrap.dedent("""
    import json, os, socket, struct, sys
    pid, port, claim = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # Read the token the way any local process of the same user can: the environment, else the command line.
    environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    token = next((e[14:].decode() for e in environ if e.startswith(b"RL_SYNC_TOKEN=")), None)
    if token is None:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        token = next(a[8:].decode() for a in argv if a.startswith(b"--token="))
    s = socket.create_connection(("127.0.0.1", port))
    hello = {"type": "hello", "token": token, "env": "ball_chase", "n_agents": 1, "protocol": 1,
             "pid": pid if claim == "instance" else os.getpid()}
    body = json.dumps(hello).encode()
    s.sendall(struct.pack("<I", len(body)) + body)
    print("sent", flush=True)
    s.settimeout(30)
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        data = b""
    print("refused" if not data else "accepted", flush=True)
""")


class HostileLauncher(InstanceLauncher):
    """Before the instance connects (it waits for a gate file), a local process that read its token connects to
    its port and says hello with it."""

    claim = "instance"
    hostiles = []

    def _spawn(self, index, restarts):
        inst = super()._spawn(index, restarts)
        hostile = subprocess.Popen([sys.executable, "-c", HOSTILE, str(inst.pid), str(inst.port), self.claim],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.hostiles.append(hostile)
        read_line(hostile, b"sent", timeout=30)
        (self.run_dir / "gate").touch()  # now the real instance may connect
        return inst


@pytest.mark.parametrize("claim", ["instance", "own"])
def test_a_local_process_with_the_token_is_refused(fake_binary, tmp_path, claim):
    events = []
    HostileLauncher.claim = claim
    launcher = HostileLauncher(
        godot_game("ball_chase", program=fake_binary),
        LaunchOptions(agents_per_instance=1, extra_args=(f"--fake_wait_for={tmp_path / 'gate'}",), run_dir=tmp_path,
                      connect_timeout=30, report=quiet(events)))
    try:
        with launcher:
            inst = launcher.instances[0]
            assert inst.hello["pid"] == inst.pid and inst.env_info["n_agents"] == 1  # the real instance
            inst.conn.reset()
            hostile = HostileLauncher.hostiles[0]
            assert read_line(hostile, b"", timeout=30) == b"refused"
            refused = [e for e in events if e.startswith("refused")]
            assert len(refused) == 1 and "is not the instance" in refused[0], events
    finally:
        for hostile in HostileLauncher.hostiles:
            hostile.kill()
            hostile.wait()
            hostile.stdout.close()
            hostile.stderr.close()
        HostileLauncher.hostiles.clear()


def test_lower_priority_renices_every_thread_and_never_raises_a_priority_back():
    """--async's learner (processes.lower_priority): every thread of the process, one started before included, gets
    the niceness, a later call asking less leaves it, and a thread started after inherits it. In a child process:
    a niceness once raised cannot be lowered again."""
    script = textwrap.dedent("""
        import json, os, threading
        from python_trainer.base.processes import lower_priority
        start = os.nice(0)
        hold = threading.Event()
        before = threading.Thread(target=hold.wait); before.start()
        first = lower_priority(start + 5)
        again = lower_priority(start + 3)
        after = threading.Thread(target=hold.wait); after.start()
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        print(json.dumps({"start": start, "first": first, "again": again, "after": after.native_id,
                          "threads": {t: os.getpriority(os.PRIO_PROCESS, t) for t in tids}}))
        hold.set()
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    want = min(19, seen["start"] + 5)
    assert seen["first"] == seen["again"] == want, seen
    assert len(seen["threads"]) == 3 and set(seen["threads"].values()) == {want}, seen
    assert str(seen["after"]) in seen["threads"], seen
