"""The launcher: parallel connection with tokens, bad input as clear errors, no orphans, restarts.

Tests run against the fake game (tests/fake_game.py) and, where marked "real", the headless export."""

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from helpers import FAKE_GAME, REPO, TESTS, alive, quiet, read_json_line, read_line, wait_gone
from python_trainer.base import paths
from python_trainer.envs.game import GameError, godot_game
from python_trainer.envs.failures import InstanceCrashedError, InstanceStartError
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.protocol import GodotConnectionError


@pytest.fixture(params=["fake", "real"])
def binary(request):
    """None (the real export) or the fake game's argv prefix."""
    if request.param == "real":
        request.getfixturevalue("headless_export")
        return None
    return [sys.executable, str(FAKE_GAME)]


def launch(env, num_instances=1, *, binary=None, start=True, **options):
    """Instances of ``env`` in the real export (binary None) or the fake game, launched as training launches them
    (started, unless ``start`` is False)."""
    launcher = InstanceLauncher(godot_game(env, program=binary), LaunchOptions(num_instances=num_instances, **options))
    if start:
        launcher.start()
    return launcher


def test_start_connect_close(binary, tmp_path):
    with launch("ball_chase", 3, agents_per_instance=2, run_dir=tmp_path, binary=binary,
                connect_timeout=20) as launcher:
        pids = launcher.pids()
        ports = [inst.port for inst in launcher.instances]
        assert len(set(ports)) == 3 and len(set(pids)) == 3
        for i, inst in enumerate(launcher.instances):
            assert inst.hello["type"] == "hello" and inst.hello["token"] == inst.token
            assert inst.env_info["n_agents"] == 2
            assert inst.seed == i
            assert (tmp_path / "logs" / f"instance_{i}.log").is_file()
            assert inst.proc.poll() is None
            # each instance runs in its own process group / session
            assert os.getpgid(inst.pid) == inst.pid
            cmd = psutil.Process(inst.pid).cmdline()
            assert f"--port={inst.port}" in cmd and "--fixed-fps" in cmd
            assert cmd[cmd.index("--fixed-fps") + 1] == "60"
            assert inst.token not in " ".join(cmd) and f"--env_seed={i}" in cmd  # every local user can read argv
            assert psutil.Process(inst.pid).environ()["RL_SYNC_TOKEN"] == inst.token
    assert wait_gone(pids, 10) == []
    for inst in launcher.instances:
        assert inst.proc.returncode == 0  # each quit by itself on "close" (and was reaped: no zombies)


@pytest.mark.parametrize("async_rl, policy", [(False, os.SCHED_BATCH), (True, os.SCHED_OTHER)])
def test_games_are_batch_scheduled_except_beside_an_async_learner(async_rl, policy, headless_export, tmp_path):
    """Train's games run as SCHED_BATCH (a woken game leaves the trainer its core); under --async they do not, since
    the learner's update then runs beside them and a woken game must be able to take its core."""
    from python_trainer.run import learners, train

    args = train.Args(env_id="ball_chase", num_instances=2, agents_per_instance=2, async_rl=async_rl)
    game = godot_game("ball_chase")
    kwargs = learners.env_kwargs(args, game, 0, tmp_path)
    options = {k: v for k, v in kwargs.items() if k not in ("num_envs", "seed", "run_dir")}
    with launch("ball_chase", **dict(options, run_dir=tmp_path)) as launcher:
        assert [os.sched_getscheduler(pid) for pid in launcher.pids()] == [policy, policy]


def test_close_is_fast_and_idempotent(fake_binary, tmp_path):
    launcher = launch("ball_chase", 2, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary)
    pids = launcher.pids()
    t0 = time.monotonic()
    launcher.close()
    launcher.close()
    assert time.monotonic() - t0 < 3.0
    assert wait_gone(pids, 5) == []
    assert [inst.proc.returncode for inst in launcher.instances] == [0, 0]  # they quit on "close"


def test_exception_inside_with_block_ends_instances(binary, tmp_path):
    with pytest.raises(ZeroDivisionError):
        with launch("ball_chase", 2, agents_per_instance=1, run_dir=tmp_path, binary=binary,
                    connect_timeout=20) as launcher:
            pids = launcher.pids()
            1 / 0
    assert wait_gone(pids, 10) == []


def test_missing_export_says_run_export(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "EXPORTS_DIR", tmp_path / "nowhere")
    with pytest.raises(GameError, match="godot-ppo export"):
        launch("ball_chase", 1)


def test_unknown_game_lists_valid_ones(headless_export):
    with pytest.raises(GameError, match="its games: ball_chase, .*jumper, .*sparse_goal"):
        launch("pong_deluxe", 1)


def test_instance_crashing_at_start_is_reported_at_once(binary, tmp_path):
    """A bad --env makes the game exit 1 at start: reported with exit code and log tail, long before the timeout."""
    t0 = time.monotonic()
    launcher = launch("ball_chase", 2, binary=binary, agents_per_instance=1, extra_args=("--env=no_such_game",),
                      run_dir=tmp_path, connect_timeout=60, start=False)
    with pytest.raises(InstanceStartError) as ei:
        launcher.start()
    assert time.monotonic() - t0 < 15
    text = str(ei.value)
    assert "exited before connecting" in text and "exit code" in text
    assert "no_such_game" in text or "ball_chase" in text  # the game's own message, from the log tail
    assert wait_gone([inst.pid for inst in launcher.instances if inst], 5) == []


def test_never_connects_times_out_naming_the_instance(fake_binary, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(InstanceStartError) as ei:
        launch("ball_chase", 2, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
               connect_timeout=1.5, extra_args=["--fake_mode=never_connect"])
    elapsed = time.monotonic() - t0
    assert 1.4 < elapsed < 8
    text = str(ei.value)
    assert "timed out after 1.5s" in text and "instance 0 (port" in text and "instance 1 (port" in text
    assert "fake_game: pid" in text  # log tail
    assert "still running" in text


def test_instance_with_wrong_token_is_refused(fake_binary, tmp_path):
    events = []
    # Refused, the fake game quits (its connection dropped); the launcher reports it instead of accepting it.
    with pytest.raises(InstanceStartError, match="exited before connecting|timed out"):
        launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=fake_binary,
               connect_timeout=3, extra_args=["--fake_mode=wrong_token"], report=quiet(events))
    assert any("wrong or missing token" in e for e in events)


class StrayLauncher(InstanceLauncher):
    """Before each instance can connect, strangers connect to its port: a wrong token, garbage, and a mute one."""

    strays = []

    def _spawn(self, index, restarts):
        inst = super()._spawn(index, restarts)
        a = socket.create_connection(("127.0.0.1", inst.port))
        body = b'{"type":"hello","token":"guess","env":"ball_chase"}'
        a.sendall(len(body).to_bytes(4, "little") + body)
        b = socket.create_connection(("127.0.0.1", inst.port))
        b.sendall(b"GET / HTTP/1.0\r\n\r\n")
        c = socket.create_connection(("127.0.0.1", inst.port))  # says nothing at all
        self.strays += [a, b, c]
        return inst


def test_stray_clients_are_refused_and_the_run_goes_on(binary, tmp_path, monkeypatch):
    import python_trainer.envs.vec_env as ve

    events = []
    monkeypatch.setattr(ve, "InstanceLauncher", StrayLauncher)  # the vec env starts its instances with it
    env = ve.make_vec_env("ball_chase", num_instances=2, agents_per_instance=2, run_dir=tmp_path, binary=binary,
                          connect_timeout=20, report=quiet(events))
    try:
        env.reset()
        for _ in range(50):
            env.step(env.action_space.sample())
        # Refused as they connect, before a byte is read or sent: a connection must come from the started process
        # (a game made with godot_rl_agents' plugin has no token to tell it by).
        refused = [e for e in env.launcher.events if e.startswith("refused")]
        assert len(refused) == 3 * 2 and all("is not the instance" in e for e in refused), refused
        for s in StrayLauncher.strays:  # every stranger was disconnected
            s.settimeout(5)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        env.close()
        for s in StrayLauncher.strays:
            s.close()
        StrayLauncher.strays.clear()


def test_holding_many_ports_does_not_matter(binary, tmp_path):
    held = []
    try:
        for _ in range(300):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            held.append(s)
        # also hold godot-rl's default ports
        for port in range(11008, 11016):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                s.listen(1)
                held.append(s)
            except OSError:
                s.close()
        held_ports = {s.getsockname()[1] for s in held}
        with launch("ball_chase", 2, agents_per_instance=1, run_dir=tmp_path, binary=binary,
                    connect_timeout=20) as launcher:
            assert not held_ports & {inst.port for inst in launcher.instances}
            for inst in launcher.instances:  # each answers a reset (packed observations if it can, as asked)
                inst.conn.reset_send()
                assert {"obs", "obs_f32"} & set(inst.conn.recv(expect="reset"))
    finally:
        for s in held:
            s.close()


def test_windowed_without_display_or_xvfb_says_install_it(fake_binary, tmp_path, monkeypatch):
    from python_trainer.envs import xvfb

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(xvfb, "xvfb_binary", lambda: None)
    t0 = time.monotonic()
    with pytest.raises(InstanceStartError, match="apt-get install xvfb"):
        launch("ball_chase", 1, headless=False, run_dir=tmp_path, binary=fake_binary)
    assert time.monotonic() - t0 < 3


def test_windowed_without_display_starts_and_stops_xvfb(fake_binary, tmp_path, monkeypatch):
    if launcher_which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    monkeypatch.delenv("DISPLAY", raising=False)
    events = []
    with launch("ball_chase", 1, agents_per_instance=1, headless=False, run_dir=tmp_path,
                binary=fake_binary, report=quiet(events)) as launcher:
        xvfb_pid = launcher._xvfb.pid
        assert launcher.display and launcher.display.startswith(":")
        assert any("started Xvfb" in e for e in events)
        assert psutil.Process(launcher.instances[0].pid).environ().get("DISPLAY") == launcher.display
    assert wait_gone([xvfb_pid], 5) == []


def launcher_which(name):
    import shutil

    return shutil.which(name)


@pytest.mark.slow
def test_windowed_real_instance_under_xvfb(windowed_export, tmp_path, monkeypatch):
    from python_trainer.envs.vec_env import make_vec_env

    monkeypatch.delenv("DISPLAY", raising=False)
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, headless=False, run_dir=tmp_path,
                       connect_timeout=30, report=lambda m: None)
    try:
        pids = env.launcher.pids() + [env.launcher._xvfb.pid]
        env.reset()
        for _ in range(20):
            env.step(env.action_space.sample())
    finally:
        env.close()
    assert wait_gone(pids, 10) == []


# ---------------------------------------------------------------------------------------------- restarts
def test_a_reply_over_the_message_limit_stops_the_run_in_one_line_and_restarts_nothing(fake_binary, tmp_path):
    from python_trainer.envs.game import GameBugError
    from python_trainer.envs.vec_env import make_vec_env

    events = []
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, run_dir=tmp_path, binary=fake_binary,
                       max_restarts=3, extra_args=["--fake_mode=oversize_after=2"], report=quiet(events))
    try:
        env.reset()
        pids = env.launcher.pids()
        with pytest.raises(GameBugError) as caught:
            for _ in range(4):
                env.step(env.action_space.sample())
        said = str(caught.value)
        assert "\n" not in said and "over the 67,108,864-byte limit of one message" in said
        assert "--agents-per-instance" in said and "--max-restarts" not in said
        assert env.launcher.pids() == pids and not any("restart" in e for e in map(str, events))  # nothing restarted
    finally:
        env.close()


def test_crash_mid_run_is_reported_and_restarted(fake_binary, tmp_path):
    from python_trainer.envs.vec_env import make_vec_env

    events = []
    env = make_vec_env("ball_chase", num_instances=2, agents_per_instance=3, run_dir=tmp_path, binary=fake_binary,
                       max_restarts=2, extra_args=["--fake_mode=crash_after=5"], report=quiet(events))
    try:
        env.reset()
        first_pids = env.launcher.pids()
        last = None
        for step in range(5):
            last, *_ = env.step(env.action_space.sample())
        obs, rew, term, trunc, infos = env.step(env.action_space.sample())  # both instances crash here
        assert trunc.all() and not term.any() and (rew == 0).all()
        assert infos["_final_obs"].all()
        assert (infos["final_obs"] == last).all()  # last known observations
        assert (obs[:, 0] == 0).all()  # fresh episodes after the restart
        assert infos["_episode"].all() and (infos["episode"]["l"] == 6).all()
        assert env.launcher.restarts == [1, 1]
        assert set(env.launcher.pids()).isdisjoint(first_pids)
        assert wait_gone(first_pids, 5) == []
        text = "\n".join(events)
        assert "exit code 7" in text and "crashing on purpose" in text and "restarting it (1/2)" in text
        for _ in range(5):
            env.step(env.action_space.sample())
        env.step(env.action_space.sample())  # second crash: restart 2/2
        assert env.launcher.restarts == [2, 2]
        for _ in range(5):
            env.step(env.action_space.sample())
        with pytest.raises(InstanceCrashedError, match="max_restarts=2"):
            env.step(env.action_space.sample())
    finally:
        pids = env.launcher.pids()
        env.close()
    assert wait_gone(pids, 5) == []


def test_silent_instance_times_out_and_is_restarted(fake_binary, tmp_path):
    from python_trainer.envs.vec_env import make_vec_env

    events = []
    env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, run_dir=tmp_path, binary=fake_binary,
                       step_timeout=0.5, extra_args=["--fake_mode=hang_after=3"], report=quiet(events))
    try:
        env.reset()
        hung = env.launcher.pids()[0]
        for _ in range(3):
            env.step(env.action_space.sample())
        t0 = time.monotonic()
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        assert time.monotonic() - t0 < 5
        assert trunc.all() and not term.any()
        assert "timed out" in events[0] and "hanging on purpose" in events[0]
        assert wait_gone([hung], 5) == []
    finally:
        env.close()


def test_sigkill_of_a_real_instance_is_recovered(headless_export, tmp_path):
    from python_trainer.envs.vec_env import make_vec_env

    events = []
    env = make_vec_env("ball_chase", num_instances=2, agents_per_instance=4, run_dir=tmp_path,
                       report=quiet(events), connect_timeout=30)
    try:
        env.reset()
        for _ in range(20):
            last, *_ = env.step(env.action_space.sample())
        victim = env.launcher.instances[1].pid
        os.kill(victim, signal.SIGKILL)
        obs, rew, term, trunc, infos = env.step(env.action_space.sample())
        assert trunc[4:].all() and not term[4:].any()
        assert (infos["final_obs"][4:] == last[4:]).all()
        assert "instance 1" in events[0] and "SIGKILL" in events[0]
        assert env.launcher.restarts == [0, 1]
        for _ in range(100):
            env.step(env.action_space.sample())
    finally:
        pids = env.launcher.pids()
        env.close()
    assert wait_gone(pids + [victim], 10) == []


# ---------------------------------------------------------------------------------------------- no orphans
def start_child(kind, tmp_path, mode="step", instances=2):
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "env_child.py"), kind, str(instances), mode, str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        pids = read_json_line(proc, timeout=60)["pids"]
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    assert all(alive(p) for p in pids)
    return proc, pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_no_orphans_after_sigint_sigterm(binary, tmp_path, sig):
    kind = "fake" if binary else "real"
    proc, pids = start_child(kind, tmp_path)
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=15)
    finally:
        proc.kill()
    assert wait_gone(pids, 10) == []
    if sig == signal.SIGTERM:
        assert code == -signal.SIGTERM  # died of the re-raised signal
    else:
        assert code != 0  # KeyboardInterrupt


def test_no_orphans_after_sigkill(binary, tmp_path):
    """Python SIGKILLed: no cleanup code runs; the games notice the dropped connection and quit by themselves."""
    kind = "fake" if binary else "real"
    proc, pids = start_child(kind, tmp_path)
    proc.kill()
    proc.wait(timeout=10)
    assert wait_gone(pids, 10) == []


def test_no_orphans_after_uncaught_exception(binary, tmp_path):
    kind = "fake" if binary else "real"
    proc, pids = start_child(kind, tmp_path, mode="raise")
    code = proc.wait(timeout=30)
    assert code == 1
    assert b"uncaught on purpose" in proc.stderr.read()
    assert wait_gone(pids, 10) == []


def test_connection_error_names_instance_and_log(binary, tmp_path):
    with launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=binary,
                connect_timeout=20) as launcher:
        inst = launcher.instances[0]
        os.kill(inst.pid, signal.SIGKILL)
        inst.conn.step_send([{"move": [0.0, 0.0]}])
        with pytest.raises(GodotConnectionError) as ei:
            inst.conn.step_recv(timeout=10)
        assert f"port {inst.port}" in str(ei.value) and f"pid {inst.pid}" in str(ei.value)
        assert "ball_chase" in str(ei.value)


def test_launch_command_exits_0_on_ctrl_c(headless_export, tmp_path):
    import re

    proc = subprocess.Popen(
        [sys.executable, "-m", "python_trainer", "launch", "--env", "ball_chase", "--num-instances", "2",
         "--agents-per-instance", "4", "--run-dir", str(tmp_path), "--report-every", "0.2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        line = read_line(proc, b"launched", timeout=60)
        pids = [int(p) for p in re.search(rb"pids \[([0-9, ]+)\]", line).group(1).split(b",")]
        read_line(proc, b"", timeout=30)  # a steps/s line: it is stepping
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
        proc.wait()
    assert wait_gone(pids, 10) == []
    assert b"closing the instances" in proc.stderr.read()


def test_close_ends_whole_process_trees(tmp_path):
    """A wrapper that leaves a child behind (here a `sleep`) loses it too when the launcher closes."""
    wrapper = ["bash", "-c", f'sleep 300 & "{sys.executable}" "{FAKE_GAME}" "$@"; exit 0', "wrapper"]
    with launch("ball_chase", 1, agents_per_instance=1, run_dir=tmp_path, binary=wrapper) as launcher:
        root = psutil.Process(launcher.instances[0].pid)
        sleeper = [p.pid for p in root.children(recursive=True) if p.name() == "sleep"]
        assert len(sleeper) == 1
    assert wait_gone(sleeper + [root.pid], 10) == []
