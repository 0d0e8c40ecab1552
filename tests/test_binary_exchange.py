"""The binary step exchange ("step_encoding": "binary" in the handshake): packed actions in, one packed block of
observations, rewards and statuses out (see docs/protocol.md, "Binary step exchange").

Unit tests of the bytes (python_trainer.envs.protocol), the vector env against the fake game in both encodings, and the
real export: the binary exchange gives the same trajectories as the JSON one, and bad packed input gets clear
errors. Tests marked real use the headless export; every wait is bounded and every process ended by the test.
"""

import json
import socket
import struct
import subprocess

import numpy as np
import pytest

from helpers import fake_env, wait_gone
from python_trainer.envs.protocol import (
    BINARY_STEP_ENCODING,
    GodotConnection,
    GodotConnectionError,
    is_packed,
    pack_actions,
    unpack_step,
)
from python_trainer.envs.vec_env import make_vec_env

TIMEOUT = 20


def packed_reply(values, tail=None) -> bytes:
    values = np.asarray(values, dtype="<f4")
    body = struct.pack("<II", 22, values.size) + values.tobytes()
    return body + (json.dumps(tail).encode() if tail is not None else b"")


# ---------------------------------------------------------------------------------------------- the bytes
def test_packed_actions_are_godots_var2bytes_of_pool_arrays():
    frame = pack_actions(floats=np.array([[0.5, -1.0], [0.25, 1.0]]))
    # length 24; PoolRealArray (type 22), 4 values, little-endian float32
    assert frame.hex() == ("18000000" "16000000" "04000000" "0000003f" "000080bf" "0000803e" "0000803f")
    frame = pack_actions(ints=np.array([[2], [0]]))
    assert frame.hex() == "10000000" "15000000" "02000000" "02000000" "00000000"  # PoolIntArray (type 21)
    mixed = pack_actions(floats=[0.5], ints=[1])
    assert mixed[4:] == struct.pack("<IIf", 22, 1, 0.5) + struct.pack("<IIi", 21, 1, 1)
    assert is_packed(frame[4:]) and not is_packed(b'{"type":"action"}')
    with pytest.raises(ValueError, match="at least one value"):
        pack_actions(floats=np.zeros((0, 2)))


def test_unpack_step_reads_the_layout():
    n, d = 3, 2
    obs = [[0.5, 1.0], [2.0, 3.0], [4.0, 5.0]]
    rewards = [0.1, -1.0, 1e-6]
    statuses = [0, 1, 2]
    terminal = [[9.0, 8.0], [7.0, 6.0]]
    body = packed_reply(np.concatenate([np.ravel(obs), rewards, statuses, np.ravel(terminal)]),
                        {"info": {"1": {"fruits": 2}}})
    o, r, s, t, infos = unpack_step(body, n, d)
    assert o.dtype == np.float32 and o.tolist() == obs
    assert r.tolist() == np.float32(rewards).tolist()
    assert s.tolist() == statuses and t.tolist() == terminal
    assert infos == {1: {"fruits": 2}}
    o, r, s, t, infos = unpack_step(packed_reply(np.concatenate([np.ravel(obs), rewards, [0, 0, 0]])), n, d)
    assert t.shape == (0, 2) and infos == {}


@pytest.mark.parametrize("body,message", [
    (b'{"type":"step"}', "expected a packed step reply"),
    (packed_reply(np.zeros(11)), "11 float32 values does not fit 3 agents"),
    (packed_reply(np.zeros(12))[:-4], "announces 12 float32 values but holds 44 bytes"),
    (packed_reply(np.r_[np.zeros(9), 1, 0, 0]), "for 1 ended episodes; expected 14"),
    (packed_reply(np.r_[np.zeros(9), 3, 0, 0, 1, 1]), "statuses must be 0 (running), 1 (terminated) or 2"),
    (packed_reply(np.zeros(12), {"info": [1]}), "must be {\"info\": {agent index: info}}"),
    (packed_reply(np.zeros(12), {"info": {"7": {}}}), "must be {\"info\": {agent index: info}}"),
    (packed_reply(np.zeros(12)) + b"\xff", "not UTF-8"),
])
def test_unpack_step_refuses_other_layouts(body, message):
    with pytest.raises(ValueError) as e:
        unpack_step(body, 3, 2)
    assert message in str(e.value)


def test_connection_names_a_packed_reply_where_json_was_expected():
    a, b = socket.socketpair()
    try:
        conn = GodotConnection(a, label="instance 0", timeout=5)
        body = packed_reply(np.zeros(12))
        b.sendall(struct.pack("<I", len(body)) + body)
        with pytest.raises(GodotConnectionError, match="sent a packed message \\(56 bytes\\) where a 'step' reply"):
            conn.step_recv()
        b.sendall(struct.pack("<I", 8) + struct.pack("<II", 22, 5))
        with pytest.raises(GodotConnectionError, match="malformed step reply .*announces 5 float32 values"):
            conn.step_recv_packed(3, 2)
        conn.send_bytes(pack_actions(floats=[1.0]))
        assert b.recv(100) == struct.pack("<IIIf", 12, 22, 1, 1.0)
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------------------------------- the fake game
def json_steps(env):
    """As if the instances had not offered the binary exchange: JSON actions get JSON replies."""
    for inst in env.launcher.instances:
        inst.env_info["step_encoding"] = "json"
    return env


def rollout(env, actions):
    out = [env.reset(seed=0)[0]]
    for a in actions:
        obs, rew, term, trunc, infos = env.step(a)
        final = infos.get("final_obs", np.zeros_like(obs))
        final_info = infos.get("final_info", np.full(len(obs), None, dtype=object))
        out.append((obs, rew, term, trunc, final, [json.dumps(x, sort_keys=True) for x in final_info]))
    return out


def eighths(actions):
    """Actions exact in float32 and in 7 decimals (a hybrid space's dict too), so both encodings carry the same."""
    if isinstance(actions, dict):
        return {key: eighths(value) for key, value in actions.items()}
    return np.round(actions * 8) / 8


@pytest.mark.parametrize("spec", ["continuous:2", "discrete:3", "discrete:3,discrete:2", "continuous:2,continuous:1",
                                  "continuous:2,discrete:3", "discrete:4,continuous:1,discrete:2"])
def test_fake_game_gives_the_same_steps_both_ways(tmp_path, spec):
    runs = {}
    for mode in ("binary", "json"):
        env = fake_env(tmp_path / mode, f"--fake_action={spec}", "--fake_info", "--max_episode_steps=7")
        if mode == "json":
            json_steps(env)
        try:
            assert env.launcher.instances[0].env_info["step_encoding"] == mode
            env.action_space.seed(5)
            actions = [eighths(env.action_space.sample()) for _ in range(40)]
            runs[mode] = rollout(env, actions)
        finally:
            env.close()
    binary, text = runs["binary"], runs["json"]
    np.testing.assert_array_equal(binary[0], text[0])
    ended = 0
    for b, t in zip(binary[1:], text[1:]):
        np.testing.assert_array_equal(b[1], t[1].astype(np.float32))  # packed rewards are float32
        for k in (0, 2, 3, 4):
            np.testing.assert_array_equal(b[k], t[k])
        assert b[5] == t[5]
        ended += b[2].sum() + b[3].sum()
        if b[3].any():
            assert all('"fake_length": 7' in x for x, trunc in zip(b[5], b[3]) if trunc)
    assert ended > 10


def test_a_game_without_the_binary_exchange_keeps_json(tmp_path):
    env = fake_env(tmp_path, "--fake_step_encoding=json", instances=1)
    try:
        assert "step_encoding" not in env.launcher.instances[0].env_info
        env.reset()
        obs, rew, *_ = env.step(np.full((3, 2), 0.5))
        assert obs[:, 3].tolist() == [1.0, 1.0, 1.0] and rew.dtype == np.float64
    finally:
        env.close()


def test_fake_game_refuses_a_packed_message_of_the_wrong_length(tmp_path):
    env = fake_env(tmp_path, instances=1, max_restarts=0)
    try:
        env.reset()
        inst = env.launcher.instances[0]
        inst.conn.send_bytes(pack_actions(floats=np.zeros(5)))
        with pytest.raises(GodotConnectionError, match="EOF") as e:
            inst.conn.step_recv_packed(3, 4, timeout=10)
        assert "a packed action message of 28 bytes does not fit" in str(e.value)
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- the real game
def real_actions(steps, n, seed):
    """Actions exact in float32 and in JSON's 7 decimals; some agents hold a direction long enough to hit a wall."""
    rng = np.random.default_rng(seed)
    a = rng.choice([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0], size=(steps, n, 2))
    for j in range(0, n, 2):  # half the agents run straight for 40 steps at a time
        for start in range(0, steps, 40):
            a[start:start + 40, j] = rng.choice([-1.0, 1.0], size=2)
    return a


def test_real_binary_exchange_matches_the_json_one(headless_export, tmp_path):
    steps, n = 300, 16
    actions = real_actions(steps, n, seed=2)
    runs = {}
    for mode in ("binary", "json"):
        env = make_vec_env("ball_chase", num_instances=1, agents_per_instance=n, seed=4, max_episode_steps=25,
                           run_dir=tmp_path / mode)
        try:
            info = env.launcher.instances[0].env_info
            assert info["step_encoding"] == BINARY_STEP_ENCODING  # our launcher always asks
            if mode == "json":
                info["step_encoding"] = "json"  # JSON actions get JSON replies (with packed observations)
            runs[mode] = rollout(env, actions)
        finally:
            env.close()
    binary, text = runs["binary"], runs["json"]
    np.testing.assert_array_equal(binary[0], text[0])
    terminations = truncations = 0
    for i, (b, t) in enumerate(zip(binary[1:], text[1:])):
        obs_b, rew_b, term_b, trunc_b, final_b, finfo_b = b
        obs_t, rew_t, term_t, trunc_t, final_t, finfo_t = t
        np.testing.assert_array_equal(obs_b, obs_t, err_msg=f"step {i}: observations")
        # JSON rewards carry 9 decimals; packed ones are float32
        np.testing.assert_allclose(rew_b, rew_t.astype(np.float32), rtol=1.2e-7, atol=1e-9, err_msg=f"step {i}")
        np.testing.assert_array_equal(term_b, term_t, err_msg=f"step {i}: terminated")
        np.testing.assert_array_equal(trunc_b, trunc_t, err_msg=f"step {i}: truncated")
        # JSON terminal observations are text (to_json's digits), packed ones float32
        np.testing.assert_allclose(final_b, final_t, rtol=0, atol=1e-6, err_msg=f"step {i}: final_obs")
        assert finfo_b == finfo_t, f"step {i}: final_info"
        terminations += term_b.sum()
        truncations += trunc_b.sum()
    assert terminations > 5 and truncations > 5, (terminations, truncations)


class RawGame:
    """The exported game on a port of ours, spoken to byte by byte."""

    def __init__(self, binary, *args, env="ball_chase"):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(TIMEOUT)
        port = self.server.getsockname()[1]
        self.proc = subprocess.Popen([str(binary), f"--port={port}", "--fixed-fps", "60", f"--env={env}", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.conn, _ = self.server.accept()
        self.conn.settimeout(TIMEOUT)

    def send_bytes(self, body: bytes):
        self.conn.sendall(struct.pack("<I", len(body)) + body)

    def send(self, message):
        self.send_bytes(json.dumps(message).encode())

    def recv_body(self):
        def exactly(n):
            data = b""
            while len(data) < n:
                chunk = self.conn.recv(n - len(data))
                if not chunk:
                    raise EOFError("the game closed the connection")
                data += chunk
            return data
        return exactly(struct.unpack("<I", exactly(4))[0])

    def start(self, **handshake):
        self.send({"type": "handshake", "major_version": "0", "minor_version": "7", **handshake})
        self.send({"type": "env_info"})
        info = json.loads(self.recv_body())
        self.send({"type": "reset"})
        json.loads(self.recv_body())
        return info

    def ended(self):
        """(exit code, stderr) once the game has quit."""
        code = self.proc.wait(timeout=TIMEOUT)
        return code, self.proc.stderr.read().decode(errors="replace")

    def close(self):
        self.conn.close()
        self.server.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def raw_game(headless_export):
    made = []

    def make(*args, env="ball_chase"):
        made.append(RawGame(headless_export, *args, env=env))
        return made[-1]

    yield make
    for game in made:
        game.close()


def test_real_packed_steps_stats_and_kinds(raw_game):
    game = raw_game("--agents=2")
    info = game.start(step_encoding="binary", obs_encoding="f32_base64")
    assert info["step_encoding"] == "binary" and info["obs_encoding"] == "f32_base64"
    game.send_bytes(pack_actions(floats=np.zeros((2, 2)))[4:])
    obs, rew, status, terminal, infos = unpack_step(game.recv_body(), 2, 12)
    assert obs.shape == (2, 12) and status.tolist() == [0, 0] and terminal.shape == (0, 12)
    # a JSON action still gets a JSON reply (godot-rl's tools may mix them in)
    game.send({"type": "action", "action": [{"move": [0.0, 0.0]}] * 2})
    assert json.loads(game.recv_body())["type"] == "step"
    game.send({"type": "stats"})
    session = json.loads(game.recv_body())["session"]
    assert session["steps"] == 2 and {"reply_usec", "wait_usec", "read_usec", "apply_usec",
                                      "outside_usec"} <= set(session)


def test_real_packed_message_of_the_wrong_length_is_an_error(raw_game):
    game = raw_game("--agents=16")
    game.start(step_encoding="binary")
    game.send_bytes(pack_actions(floats=np.zeros(31))[4:])
    code, stderr = game.ended()
    assert code == 1
    assert ("rl_sync: error: a packed action message of 132 bytes; this game expects 136 (32 float32 values for "
            "continuous keys, 0 int32 values for discrete keys") in stderr


def test_real_packed_message_needs_the_binary_handshake(raw_game):
    game = raw_game("--agents=1")
    game.start()  # godot-rl's handshake: JSON only
    game.send_bytes(pack_actions(floats=np.zeros(2))[4:])
    code, stderr = game.ended()
    assert code == 1
    assert ("rl_sync: error: a packed (binary) message of 16 bytes, but the handshake did not ask for the step "
            'encoding "binary"') in stderr


def test_real_non_finite_packed_action_is_an_error(raw_game):
    game = raw_game("--agents=2")
    game.start(step_encoding="binary")
    game.send_bytes(pack_actions(floats=np.array([[0.0, 0.0], [np.nan, 0.0]]))[4:])
    code, stderr = game.ended()
    assert code == 1
    assert "rl_sync: error: the action for agent 1 is invalid: 'move' holds nan, which is not a finite number" in stderr


# jumper's hybrid space: "jump" (discrete, 2 choices) and "move" (2 continuous values); 2 agents
@pytest.mark.parametrize("body, error", [
    (pack_actions(floats=np.zeros((2, 2)), ints=[[0], [2]]),
     "the action for agent 1 is invalid: 'jump' must be an integer in [0, 2), got 2"),
    (pack_actions(floats=np.zeros((2, 2)), ints=[[-1], [0]]),
     "the action for agent 0 is invalid: 'jump' must be an integer in [0, 2), got -1"),
    (pack_actions(floats=[[0.0, 0.0], [0.0, np.nan]], ints=[[0], [1]]),
     "the action for agent 1 is invalid: 'move' holds nan, which is not a finite number"),
    (pack_actions(floats=np.zeros((2, 2))),
     "a packed action message of 24 bytes; this game expects 40 (4 float32 values for continuous keys, 2 int32 "
     "values for discrete keys"),
    (pack_actions(floats=np.zeros((2, 3)), ints=[[0], [1]]),
     "a packed action message of 48 bytes; this game expects 40"),
    (pack_actions(ints=[[0, 0, 0], [1, 0, 0]]), "a packed action message of 32 bytes; this game expects 40"),
    (json.dumps({"type": "action", "action": [{"move": [0, 0], "jump": 0.5}] * 2}).encode(),
     "the action for agent 0 is invalid: 'jump' must be an integer in [0, 2), got 0.5"),
    (json.dumps({"type": "action", "action": [{"move": [0, 0], "jump": 1}, {"move": [0, 0]}]}).encode(),
     "the action for agent 1 is invalid: the key 'jump' is missing"),
    (json.dumps({"type": "action", "action": [{"move": [0, 0], "jump": "up"}] * 2}).encode(),
     "the action for agent 0 is invalid: 'jump' must be an integer in [0, 2), got up"),
    (json.dumps({"type": "action", "action": [{"move": [0, 0, 0], "jump": 1}] * 2}).encode(),
     "the action for agent 0 is invalid: 'move' must be a list of 2 numbers, got [0,0,0]"),
], ids=["jump-2", "jump-minus-1", "move-nan", "no-ints", "three-floats", "ints-only", "json-jump-half",
        "json-jump-missing", "json-jump-text", "json-move-3"])
def test_real_bad_hybrid_actions_are_errors(raw_game, body, error):
    game = raw_game("--agents=2", env="jumper")
    info = game.start(step_encoding="binary")
    assert info["action_space"][0] == {"jump": {"size": 2, "action_type": "discrete"},
                                       "move": {"size": 2, "action_type": "continuous"}}
    game.send_bytes(body[4:] if body[:1] != b"{" else body)
    code, stderr = game.ended()
    assert code == 1
    assert "rl_sync: error: " + error in stderr
    assert wait_gone([game.proc.pid], 5) == []


def test_real_hybrid_actions_both_ways(raw_game):
    """The same hybrid actions, packed and as JSON, give the same step (jumper's start is seeded)."""
    replies = []
    for mode in ("binary", "json"):
        game = raw_game("--agents=2", "--env_seed=3", env="jumper")
        game.start(step_encoding="binary")
        for t in range(30):
            move, jump = [[1.0, 0.25], [0.5, -1.0]], [[t % 2], [0]]
            if mode == "binary":
                game.send_bytes(pack_actions(floats=move, ints=jump)[4:])
                obs, *_ = unpack_step(game.recv_body(), 2, 26)
            else:
                game.send({"type": "action", "action": [{"move": m, "jump": j[0]} for m, j in zip(move, jump)]})
                obs = np.array([o["obs"] for o in json.loads(game.recv_body())["obs"]], np.float32)
        replies.append(np.array(obs))
    np.testing.assert_allclose(replies[0], replies[1], atol=1e-6)
    assert np.abs(replies[0]).max() > 0


def test_real_unknown_step_encoding_is_refused(raw_game):
    game = raw_game("--agents=1")
    game.send({"type": "handshake", "major_version": "0", "minor_version": "7", "step_encoding": "msgpack"})
    code, stderr = game.ended()
    assert code == 1
    assert "rl_sync: error: the trainer asked for the step encoding 'msgpack'; this game knows [json, binary]" in stderr
    assert wait_gone([game.proc.pid], 5) == []
