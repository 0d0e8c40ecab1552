"""The wire protocol against a fake peer: framing by UTF-8 byte length, EOF, timeouts, oversize and bad messages."""

import json
import socket
import struct
import threading
import time

import pytest

from python_trainer.envs.protocol import (
    MAX_MESSAGE_BYTES,
    GodotConnection,
    GodotConnectionError,
    decode_body,
    encode_message,
)


def tcp_pair():
    """(our accepted socket, the peer's socket) over real TCP on 127.0.0.1."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    peer = socket.create_connection(lst.getsockname())
    ours, _ = lst.accept()
    lst.close()
    return ours, peer


def frame(obj) -> bytes:
    body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return struct.pack("<I", len(body)) + body


def peer_recv(sock):
    n = struct.unpack("<I", recv_exact(sock, 4))[0]
    return json.loads(recv_exact(sock, n).decode("utf-8"))


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "EOF"
        buf += chunk
    return buf


@pytest.fixture
def pair():
    ours, peer = tcp_pair()
    conn = GodotConnection(ours, label="instance 3 (port 1234, pid 99, game ball_chase)",
                           log_tail=lambda: "line one\nrl_sync: error: boom", timeout=5.0)
    yield conn, peer
    conn.close(send_close=False)
    peer.close()


def test_length_is_utf8_bytes_not_characters():
    msg = {"type": "call", "method": "héllo ☃ 🎮"}
    data = encode_message(msg)
    (n,) = struct.unpack("<I", data[:4])
    assert n == len(data) - 4 == len(json.dumps(msg, separators=(",", ":")).encode("utf-8"))
    assert n > len(json.dumps(msg, separators=(",", ":"), ensure_ascii=False))  # more bytes than characters
    assert decode_body(data[4:]) == msg


def test_non_ascii_both_ways(pair):
    conn, peer = pair
    conn.send({"type": "call", "method": "naïve ☃"})
    assert peer_recv(peer) == {"type": "call", "method": "naïve ☃"}
    peer.sendall(frame({"type": "call", "returns": ["åäö", "日本語", "🎮"]}))
    assert conn.recv(expect="call")["returns"] == ["åäö", "日本語", "🎮"]


def test_tcp_nodelay(pair):
    conn, _ = pair
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_message_split_into_single_bytes(pair):
    conn, peer = pair
    data = frame({"type": "step", "obs": [{"obs": [1.5, -2]}], "reward": [0.5], "done": [False], "info": [{}]})

    def dribble():
        for b in data:
            peer.sendall(bytes([b]))
            time.sleep(0.0005)

    t = threading.Thread(target=dribble)
    t.start()
    msg = conn.step_recv(timeout=5)
    t.join()
    assert msg["obs"][0]["obs"] == [1.5, -2]


def test_eof_raises_naming_instance_and_log_tail(pair):
    conn, peer = pair
    peer.close()
    t0 = time.monotonic()
    with pytest.raises(GodotConnectionError) as ei:
        conn.step_recv()
    assert time.monotonic() - t0 < 1.0
    text = str(ei.value)
    assert "EOF" in text and "port 1234" in text and "pid 99" in text and "ball_chase" in text
    assert "rl_sync: error: boom" in text and ei.value.log_tail.endswith("boom")


def test_eof_mid_message(pair):
    conn, peer = pair
    peer.sendall(struct.pack("<I", 100) + b'{"type": "st')
    peer.close()
    with pytest.raises(GodotConnectionError, match="partial message"):
        conn.recv()


def test_timeout_is_bounded_and_does_not_spin(pair):
    import psutil

    conn, _peer = pair
    me = psutil.Process()
    cpu0 = sum(me.cpu_times()[:2])
    t0 = time.monotonic()
    with pytest.raises(GodotConnectionError, match="timed out") as ei:
        conn.recv(timeout=0.5, expect="step")
    elapsed = time.monotonic() - t0
    cpu = sum(me.cpu_times()[:2]) - cpu0
    assert 0.45 <= elapsed < 2.0
    assert cpu < 0.25, f"waiting burnt {cpu:.2f}s of CPU in {elapsed:.2f}s (busy loop?)"
    assert "instance 3" in str(ei.value)


def test_timeout_counts_the_whole_message(pair):
    """A peer sending a byte now and then cannot stretch one read past its timeout."""
    conn, peer = pair
    stop = threading.Event()

    def trickle():
        peer.sendall(struct.pack("<I", 1000))
        while not stop.wait(0.1):
            try:
                peer.sendall(b" ")
            except OSError:
                return

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(GodotConnectionError, match="timed out"):
        conn.recv(timeout=0.6)
    assert time.monotonic() - t0 < 1.5
    stop.set()
    t.join()


def test_oversize_length_rejected_without_reading(pair):
    conn, peer = pair
    peer.sendall(struct.pack("<I", MAX_MESSAGE_BYTES + 1))
    with pytest.raises(GodotConnectionError, match="limit"):
        conn.recv()


def test_encode_refuses_oversize_and_nan():
    with pytest.raises(ValueError):
        encode_message({"type": "call", "method": "x" * (MAX_MESSAGE_BYTES + 1)})
    with pytest.raises(ValueError):
        encode_message({"type": "action", "action": [{"move": [float("nan"), 0.0]}]})


def test_malformed_json_and_wrong_type(pair):
    conn, peer = pair
    peer.sendall(struct.pack("<I", 5) + b"{nope")
    with pytest.raises(GodotConnectionError, match="malformed"):
        conn.recv()
    peer.sendall(frame({"type": "reset", "obs": []}))
    with pytest.raises(GodotConnectionError, match="expected a 'step'"):
        conn.step_recv()
    peer.sendall(frame([1, 2, 3]))
    with pytest.raises(GodotConnectionError, match="malformed"):
        conn.recv()


def test_send_after_peer_gone_raises(pair):
    conn, peer = pair
    peer.close()
    with pytest.raises(GodotConnectionError):
        for _ in range(100):  # the first sends may still land in the kernel buffer
            conn.send({"type": "action", "action": [{"move": [0.0, 0.0]}] * 1000})


def test_full_conversation_with_fake_peer(pair):
    conn, peer = pair
    log = []

    def game():
        while True:
            try:
                msg = peer_recv(peer)
            except AssertionError:
                return
            log.append(msg)
            t = msg["type"]
            if t == "env_info":
                peer.sendall(frame({"type": "env_info", "n_agents": 2,
                                    "observation_space": [{"obs": {"size": [3], "space": "box"}}] * 2,
                                    "action_space": [{"move": {"size": 2, "action_type": "continuous"}}] * 2}))
            elif t == "reset":
                peer.sendall(frame({"type": "reset", "obs": [{"obs": [0, 0, 0]}, {"obs": [1, 1, 1]}]}))
            elif t == "action":
                peer.sendall(frame({"type": "step", "obs": [{"obs": [0, 0, 1]}, {"obs": [1, 1, 2]}],
                                    "reward": [1.0, 2.0], "done": [False, True],
                                    "info": [{}, {"terminal_observation": {"obs": [9, 9, 9]},
                                                  "TimeLimit.truncated": True}]}))
            elif t == "call":
                peer.sendall(frame({"type": "call", "returns": [msg["method"]] * 2}))
            elif t == "close":
                return

    th = threading.Thread(target=game)
    th.start()
    conn.handshake()
    assert conn.env_info()["n_agents"] == 2
    assert conn.reset()[1]["obs"] == [1, 1, 1]
    conn.step_send([{"move": [0.5, -0.5]}, {"move": [1.0, 1.0]}])
    step = conn.step_recv()
    assert step["done"] == [False, True] and step["info"][1]["TimeLimit.truncated"] is True
    assert conn.call("ping") == ["ping", "ping"]
    conn.close()
    th.join(timeout=5)
    assert not th.is_alive()
    assert [m["type"] for m in log] == ["handshake", "env_info", "reset", "action", "call", "close"]
    assert log[0] == {"type": "handshake", "major_version": "0", "minor_version": "7"}
    assert log[3]["action"][0] == {"move": [0.5, -0.5]}
    with pytest.raises(GodotConnectionError, match="closed"):
        conn.recv()
