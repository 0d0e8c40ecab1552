"""The exported game against a trainer: godot-rl's own client, our protocol extensions, and bad input.

A deliberately raw trainer (`RawTrainer`) sends exactly the bytes each test needs, including ones a
real client never sends; every wait is bounded, and every process is ended by the test.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import alive, free_port, read_json_line, wait_gone

TIMEOUT = 20  # seconds for any single exchange with an instance


class RawTrainer:
    """Listens on a free port, starts the exported game on it and accepts its connection."""

    def __init__(self, binary, *game_args, cwd=None):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(TIMEOUT)
        self.port = self.server.getsockname()[1]
        self.proc = subprocess.Popen(
            [str(binary), f"--port={self.port}", "--fixed-fps", "60", *game_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
        )
        self.conn = None

    def accept(self):
        self.conn, _ = self.server.accept()
        self.conn.settimeout(TIMEOUT)
        return self

    def send_bytes(self, payload: bytes):
        self.conn.sendall(struct.pack("<I", len(payload)) + payload)

    def send(self, message):
        self.send_bytes(json.dumps(message).encode())

    def recv(self):
        (length,) = struct.unpack("<I", self._exactly(4))
        return json.loads(self._exactly(length).decode("utf-8"))

    def _exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.conn.recv(n - len(data))
            if not chunk:
                raise EOFError(f"the game closed the connection; stderr: {self.stderr()}")
            data += chunk
        return data

    def start(self):
        """Accept, handshake, read env_info and reset; returns (env_info, first observations)."""
        self.accept()
        self.send({"type": "handshake", "major_version": "0", "minor_version": "7"})
        self.send({"type": "env_info"})
        info = self.recv()
        self.send({"type": "reset"})
        return info, self.recv()["obs"]

    def step(self, actions):
        self.send({"type": "action", "action": [{"move": list(map(float, a))} for a in actions]})
        reply = self.recv()
        assert reply["type"] == "step"
        return reply

    def wait(self):
        return self.proc.wait(timeout=TIMEOUT)

    def stderr(self):
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")

    def close(self):
        for s in (self.conn, self.server):
            if s is not None:
                s.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture
def trainer(headless_export):
    made = []

    def make(*args, **kwargs):
        made.append(RawTrainer(headless_export, *args, **kwargs))
        return made[-1]

    yield make
    for t in made:
        t.close()


def obs_array(obs):
    return np.array([o["obs"] for o in obs], dtype=np.float64)


def test_spaces_and_first_observations(trainer):
    info, obs = trainer("--env=ball_chase", "--agents=3").start()
    assert info["type"] == "env_info" and info["n_agents"] == 3 and info["env"] == "ball_chase"
    assert info["observation_space"] == [{"obs": {"size": [12], "space": "box"}}] * 3
    assert info["action_space"] == [{"move": {"size": 2, "action_type": "continuous"}}] * 3
    assert obs_array(obs).shape == (3, 12)
    assert np.all(np.abs(obs_array(obs)) <= 1.0)


def test_same_seed_and_actions_give_identical_observations(trainer):
    actions = np.random.default_rng(0).uniform(-1, 1, size=(300, 4, 2))

    def rollout(seed):
        t = trainer("--env=ball_chase", "--agents=4", f"--env_seed={seed}")
        _, obs = t.start()
        trace = [obs_array(obs)]
        for a in actions:
            reply = t.step(a)
            trace.append(obs_array(reply["obs"]))
            trace.append(np.array(reply["reward"]))
        t.send({"type": "close"})
        assert t.wait() == 0
        return trace

    first, second, other_seed = rollout(7), rollout(7), rollout(8)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not np.array_equal(first[0], other_seed[0])


def test_time_limit_truncates_with_terminal_observation(trainer):
    t = trainer("--env=ball_chase", "--agents=2", "--max_episode_steps=5")
    _, obs = t.start()
    for step in range(1, 6):
        reply = t.step(np.zeros((2, 2)))
        if step < 5:
            assert reply["done"] == [False, False] and reply["info"] == [{}, {}]
    assert reply["done"] == [True, True]
    for i, info in enumerate(reply["info"]):
        assert info["TimeLimit.truncated"] is True
        # Standing still, the last observation equals the episode's first one ...
        assert np.allclose(info["terminal_observation"]["obs"], obs[i]["obs"])
        # ... and the reply already holds the first observation of the next episode.
        assert not np.allclose(reply["obs"][i]["obs"], obs[i]["obs"])


def test_wall_ends_the_episode_as_a_termination(trainer):
    t = trainer("--env=ball_chase", "--agents=1", "--max_episode_steps=1000")
    t.start()
    total = 0.0
    for _ in range(200):  # at full speed right, the wall is at most 400 px = 80 steps away
        reply = t.step([[1.0, 0.0]])
        total += reply["reward"][0]
        if reply["done"][0]:
            break
    assert reply["done"] == [True]
    info = reply["info"][0]
    assert info["TimeLimit.truncated"] is False
    terminal = np.array(info["terminal_observation"]["obs"])
    assert terminal[0] > 0.9, "the ray pointing right touches the wall in the terminal observation"
    assert reply["reward"][0] < -0.5


def test_token_is_sent_first_only_when_given(trainer):
    t = trainer("--env=ball_chase", "--agents=2", "--token=s3cret").accept()
    hello = t.recv()
    assert hello == {"type": "hello", "token": "s3cret", "env": "ball_chase", "n_agents": 2,
                     "pid": t.proc.pid, "protocol": 1}
    t.send({"type": "handshake", "major_version": "0", "minor_version": "7"})
    t.send({"type": "env_info"})
    assert t.recv()["type"] == "env_info"

    plain = trainer("--env=ball_chase", "--agents=2").accept()
    plain.send({"type": "handshake", "major_version": "0", "minor_version": "7"})
    plain.send({"type": "env_info"})
    assert plain.recv()["type"] == "env_info", "without --token the first message is the env_info reply"


def test_call_returns_one_value_per_agent(trainer):
    t = trainer("--env=ball_chase", "--agents=3")
    t.start()
    t.send({"type": "call", "method": "get_action_space"})
    assert t.recv() == {"type": "call", "returns": [{"move": {"size": 2, "action_type": "continuous"}}] * 3}


def test_call_reaches_only_the_controllers_own_methods(trainer):
    """`call` of an engine method (queue_free) used to free the agents under the session: an endless script-error
    loop at 100% CPU, gigabytes of output. Now it returns null and the game plays on."""
    t = trainer("--env=ball_chase", "--agents=2")
    t.start()
    for method in ("queue_free", "free", "_physics_process", "set_script"):
        t.send({"type": "call", "method": method})
        assert t.recv() == {"type": "call", "returns": [None, None]}
    for _ in range(5):
        assert len(t.step([[0.5, 0.0], [0.0, 0.5]])["obs"]) == 2
    t.send({"type": "close"})
    assert t.wait() == 0


def test_close_message_ends_the_instance(trainer):
    t = trainer("--env=ball_chase", "--agents=1")
    t.start()
    t.send({"type": "close"})
    assert t.wait() == 0


def test_trainer_disconnect_ends_the_instance(trainer):
    t = trainer("--env=ball_chase", "--agents=1")
    t.start()
    t.conn.close()
    assert t.wait() == 1
    assert "the trainer disconnected" in t.stderr()


BAD_MESSAGES = {
    "malformed_json": (b'{"type": "reset"', "malformed JSON"),
    "not_an_object": (b"[1, 2]", 'must be a JSON object with a "type"'),
    "unknown_type": (b'{"type": "teleport"}', "unknown message type 'teleport'"),
    "wrong_action_count": (b'{"type": "action", "action": [{"move": [0, 0]}]}', "needs a list of 2 actions"),
    "wrong_action_shape": (b'{"type": "action", "action": [{"move": [0]}, {"move": [0, 0]}]}',
                           "'move' must be a list of 2 numbers"),
    "missing_action_key": (b'{"type": "action", "action": [{"go": [0, 0]}, {"move": [0, 0]}]}',
                           "the key 'move' is missing"),
    "nan_action": (b'{"type": "action", "action": [{"move": [NaN, 0]}, {"move": [0, 0]}]}', "malformed JSON"),
    "string_in_action": (b'{"type": "action", "action": [{"move": ["a", 0]}, {"move": [0, 0]}]}',
                         "not a finite number"),
    "protocol_version": (b'{"type": "handshake", "major_version": "9", "minor_version": "0"}',
                         "protocol version 9.0"),
    # JSON.parse recurses once per level: 50,000 levels crashed the engine with SIGSEGV and no message.
    "nested_50000_deep": (b'{"type": "call", "method": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                          "holds more than"),
    "invalid_utf8": (b'{"type": "\xff\xfe"}', "is not valid UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD_MESSAGES))
def test_bad_messages_end_the_instance_with_a_clear_error(trainer, name):
    payload, expected = BAD_MESSAGES[name]
    t = trainer("--env=ball_chase", "--agents=2")
    t.start()
    t.send_bytes(payload)
    assert t.wait() == 1
    assert expected in t.stderr()


def test_oversized_length_prefix_is_refused(trainer):
    t = trainer("--env=ball_chase", "--agents=1")
    t.start()
    t.conn.sendall(struct.pack("<I", 2**31 - 1))
    assert t.wait() == 1
    assert "the limit is" in t.stderr()


def test_first_message_must_be_a_handshake(trainer):
    t = trainer("--env=ball_chase", "--agents=1").accept()
    t.send({"type": "reset"})
    assert t.wait() == 1
    assert "the first message must be a handshake" in t.stderr()


def run_game(binary, *args, timeout=TIMEOUT, cwd=None):
    return subprocess.run([str(binary), "--fixed-fps", "60", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.parametrize("args, expected", [
    (["--env=snake", "--port=1"], "unknown game 'snake' (--env): valid names are ball_chase, "),
    (["--agents=0", "--port=1"], "--agents=0 is not valid"),  # no --env: the default game checks its flags too
    (["--env=ball_chase", "--agents=many", "--port=1"], "--agents=many is not valid"),
    (["--env=ball_chase", "--agents=0", "--port=1"], "--agents=0 is not valid"),
    (["--env=ball_chase", "--port=abc"], "--port=abc is not valid"),
    (["--env=ball_chase", "--speedup=-2", "--port=1"], "--speedup=-2 is not valid"),
    # Bounds: 100,000 arenas spent minutes building past any connect timeout; port 99999 waited out the timeout.
    (["--env=ball_chase", "--agents=100000", "--port=1"], "--agents=100000 is not valid: give an integer from 1 to 2048"),
    (["--env=ball_chase", "--port=99999"], "--port=99999 is not valid: give an integer from 1 to 65535"),
])
def test_bad_command_lines_fail_fast(headless_export, args, expected):
    result = run_game(headless_export, *args)
    assert result.returncode == 1
    assert expected in result.stderr


def test_the_binary_lists_its_games_and_runs_the_default_without_env(headless_export):
    """godot-rl's scripts start a binary with --port and their own flags only: the default game must run."""
    listing = run_game(headless_export, "--list_envs")
    assert listing.returncode == 0
    listed = json.loads([line for line in listing.stdout.splitlines() if line.startswith('{"envs"')][-1])
    assert {"ball_chase", "cart_pole", "jumper", "memory", "sparse_goal"} <= set(listed["envs"]) and listed["default"] == "ball_chase"
    result = run_game(headless_export, "--port=1", "--connect_timeout=1", "--env_seed=0")
    assert "running the default game 'ball_chase'" in result.stdout
    assert result.returncode == 1 and "no trainer accepted a connection on 127.0.0.1:1" in result.stderr


def test_no_trainer_means_the_instance_quits(headless_export):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    result = run_game(headless_export, "--env=ball_chase", f"--port={port}", "--connect_timeout=1")
    assert result.returncode == 1
    assert f"no trainer accepted a connection on 127.0.0.1:{port} within 1 s" in result.stderr


def test_a_listener_that_never_answers_does_not_keep_the_instance(headless_export):
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts nor sends
        result = run_game(headless_export, "--env=ball_chase", f"--port={silent.getsockname()[1]}",
                          "--connect_timeout=1")
    assert result.returncode == 1
    assert "sent no handshake in time" in result.stderr


def test_list_envs_and_engine_only_benchmark(headless_export, tmp_path):
    # Run from an empty folder: the export needs nothing but its binary and .pck.
    listed = run_game(headless_export, "--list_envs", cwd=tmp_path)
    listing = json.loads(listed.stdout.strip().splitlines()[-1])
    assert {"ball_chase", "cart_pole", "jumper", "memory", "sparse_goal"} <= set(listing["envs"]) and listing["default"] == "ball_chase"
    bench = run_game(headless_export, "--env=ball_chase", "--agents=4", "--benchmark_steps=200", cwd=tmp_path)
    report = json.loads([line for line in bench.stdout.splitlines() if line.startswith("{")][-1])["benchmark"]
    assert report["agents"] == 4 and report["decision_steps"] == 200 and report["agent_steps_per_second"] > 0


@pytest.mark.slow
def test_godot_rl_client_drives_the_game(headless_export):
    """godot-rl 0.8.2's own GodotEnv, unchanged: spaces, reset, thousands of random steps, close."""
    from godot_rl.core.godot_env import GodotEnv

    env = GodotEnv(env_path=str(headless_export), port=free_port(), seed=3, framerate=60,
                   env="ball_chase", agents=4, max_episode_steps=200)
    try:
        assert env.num_envs == 4
        assert env.observation_space["obs"].shape == (12,)
        obs, _ = env.reset()
        assert len(obs) == 4
        ended = 0
        for _ in range(2500):
            actions = list(zip(*[env.action_space.sample() for _ in range(env.num_envs)]))
            obs, reward, done, _, _ = env.step(actions)
            ended += sum(done)
        assert ended > 0 and len(obs) == 4 and len(reward) == 4
    finally:
        env.close()
    assert env.proc.wait(timeout=TIMEOUT) == 0


CHILD = textwrap.dedent("""
    import json, socket, sys
    from godot_rl.core.godot_env import GodotEnv
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    env = GodotEnv(env_path=sys.argv[1], port=port, seed=0, framerate=60, env="ball_chase", agents=2)
    env.reset()
    print(json.dumps({"game_pid": env.proc.pid}), flush=True)
    sys.stdin.read()  # block until killed
""")


def test_game_quits_when_the_python_side_is_killed(headless_export):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(headless_export)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        game_pid = read_json_line(child, timeout=60)["game_pid"]
        assert alive(game_pid)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=TIMEOUT)
        assert wait_gone([game_pid], timeout=10) == [], "the game outlived its killed trainer"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=TIMEOUT)
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="needs xvfb-run (apt-get install xvfb)")
def test_windowed_export_trains_under_xvfb(windowed_export):
    """The windowed binary (godot3-runner template) speaks the same protocol while rendering."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(TIMEOUT)
    t = RawTrainer.__new__(RawTrainer)
    t.server, t.port, t.conn = server, server.getsockname()[1], None
    t.proc = subprocess.Popen(
        ["xvfb-run", "-a", "-s", "-screen 0 1024x768x24", str(windowed_export), f"--port={t.port}",
         "--fixed-fps", "60", "--env=ball_chase", "--agents=4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        _, obs = t.start()
        for _ in range(50):
            reply = t.step(np.zeros((4, 2)))
        assert len(reply["obs"]) == 4
        t.send({"type": "close"})
        assert t.wait() == 0
    finally:
        if t.proc.poll() is None:
            os.killpg(t.proc.pid, signal.SIGKILL)
        t.close()


def test_stats_extension_reports_engine_counters(trainer):
    t = trainer("--env=ball_chase", "--agents=2")
    t.start()
    t.send({"type": "stats"})
    before = t.recv()
    for _ in range(30):
        t.step(np.zeros((2, 2)))
    t.send({"type": "stats"})
    after = t.recv()
    assert after["type"] == "stats" and after["headless"] is True
    assert after["physics_frames"] - before["physics_frames"] == 30, "one physics frame per decision step"
    assert after["time_usec"] > before["time_usec"]
    assert after["engine_version"].startswith("3.2.3")


def test_a_refused_connection_is_reported_as_such(trainer):
    t = trainer("--env=ball_chase", "--agents=1", "--token=wrong").accept()
    assert t.recv()["type"] == "hello"
    t.conn.close()  # what the launcher does to a connection with a wrong token
    assert t.wait() == 1
    assert "the trainer closed the connection before its handshake (a wrong --token?)" in t.stderr()


def test_small_rewards_keep_their_digits(trainer):
    t = trainer("--env=ball_chase", "--agents=1")
    t.start()
    rewards = [t.step([[0.001, 0.0]])["reward"][0] for _ in range(5)]
    # Moving 0.005 px a step changes the shaping by ~1e-5 of the arena: 6 decimals would round it to 0.00001.
    assert any(r != 0 and abs(r) < 1e-4 and round(r, 6) != r for r in rewards), rewards


def test_packed_observations_match_the_json_ones(trainer):
    """Our handshake extension: "obs_encoding": "f32_base64" packs every agent's observation as float32."""
    import base64

    actions = np.random.default_rng(1).uniform(-1, 1, size=(60, 3, 2))

    def rollout(encoding):
        t = trainer("--env=ball_chase", "--agents=3", "--env_seed=4").accept()
        handshake = {"type": "handshake", "major_version": "0", "minor_version": "7"}
        if encoding:
            handshake["obs_encoding"] = encoding
        t.send(handshake)
        t.send({"type": "env_info"})
        assert t.recv()["obs_encoding"] == (encoding or "json")
        t.send({"type": "reset"})
        t.recv()
        trace = []
        for a in actions:
            reply = t.step(a)
            if encoding:
                assert "obs" not in reply
                trace.append(np.frombuffer(base64.b64decode(reply["obs_f32"]), dtype="<f4").reshape(3, 12))
            else:
                trace.append(obs_array(reply["obs"]))
        return np.array(trace)

    packed, text = rollout("f32_base64"), rollout(None)
    assert np.abs(packed - text).max() < 1e-5  # JSON carries 6 decimals, the packed form all of float32


def test_unknown_observation_encoding_is_refused(trainer):
    t = trainer("--env=ball_chase", "--agents=1").accept()
    t.send({"type": "handshake", "major_version": "0", "minor_version": "7", "obs_encoding": "msgpack"})
    assert t.wait() == 1
    assert "the observation encoding 'msgpack'" in t.stderr()


def test_action_repeat_and_speedup_hold_each_action_for_several_physics_frames(trainer):
    t = trainer("--env=ball_chase", "--agents=1", "--action_repeat=4", "--speedup=2")
    t.start()
    t.send({"type": "stats"})
    before = t.recv()
    ended = sum(any(t.step([[1.0, 0.0]])["done"]) for _ in range(10))
    t.send({"type": "stats"})
    after = t.recv()
    # A decision step that ends an episode waits two paused frames for the game's deferred calls (step_order.gd).
    assert after["physics_frames"] - before["physics_frames"] == 40 + 2 * ended
    assert after["physics_ticks_per_second"] == 120
