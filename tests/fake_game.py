"""A stand-in for the exported Godot binary: speaks the game side of godot-rl's protocol (docs/protocol.md).

Accepts the real binary's flags (--port, --env, --agents, --env_seed, --token, --max_episode_steps,
--connect_timeout, ...; unknown ones ignored) and, like it, reads the token from $RL_SYNC_TOKEN before --token;
plus test-only ones:
  --fake_mode=ok | exit_at_start | never_connect | wrong_token | hang_after=N | crash_after=N | oversize_after=N
                                    (oversize: a reply that announces a message over the 64 MiB limit)
  --fake_action=continuous:2 | discrete:3 | continuous:2,continuous:1 | discrete:3,discrete:2 | continuous:2,discrete:2
  --fake_obs=obs:4 | a:2,b:3        (observation keys and sizes); by_seed: one key of size 4 + --env_seed
  --fake_fixed_agents=N             simulate N agents whatever --agents says (as a user's fixed scene does)
  --fake_step_delay=SECONDS         sleep this long before answering each action
  --fake_flood                      once connected, print lines to stderr without end (a per-frame script error)
  --fake_wait_for=PATH              connect (and answer --list_envs) only once PATH exists: a game that loads
                                    slowly (a test orders connections with it)
  --fake_step_encoding=json         ignore a handshake's "step_encoding" (as a game without our binary exchange)
  --fake_info                       an ended episode's info also holds {"fake_length": its length}
  --fake_imported_assets=N          at start, print on stderr what Godot 3.2.3 prints for an export that loads N
                                    imported assets (two lines each: "ERROR: _get_modified_time: ..." and its "At:")
  --fake_image=camera_2d:H:W:C      also a camera image under that key, declared [H, W, C]: every byte of agent j's
                                    frame is (its episode's step + 1) % 256, hex in JSON, raw bytes in the binary
                                    exchange; without $DISPLAY (a headless build renders nothing) the game refuses
                                    its first reset with one "rl_sync: error:" line, as the real headless build does
  --fake_image_shrink=N             from step N on, agent 1's frame is one byte short (a size that changes mid-run)
  --fake_actors                     env_info says "actors": the in-engine actors' exchange (python_trainer/envs/
                                    fragment_wire.py): it reads the policy file's sizes, takes weights, and answers
                                    "fragment" with uniform random actions (no network), a heartbeat every
                                    --fake_alive_s (default 1) seconds; hang_after/crash_after count its steps too
  --fake_dialect=godot_rl           speak exactly as a game made with godot_rl_agents' plugin (Godot 3 branch, see
                                    python_trainer/envs/protocol.py): no --list_envs answer, no hello, one space each in
                                    env_info, no info, done = terminated or time limit; --action_repeat defaults to 8
                                    and each decision reports it in the observation's last value
  --fake_mode=human_fallback        (with that dialect) connect to nothing and run on, as that plugin does when its
                                    one connection attempt fails (crash_after=N works in that dialect too)
  --fake_env_info=KEY,...           (with that dialect) leave these keys out of env_info
  --fake_policy_names=A,B           (with that dialect) send agent_policy_names, the agents' names in turn (the
                                    plugin's Godot 4 branch sends them; its Godot 3 branch does not)
  --fake_first=TYPE                 (with that dialect) answer the handshake with a message of this type instead
  --fake_bug=WHAT:N                 (with that dialect) a game's deterministic bug from step N on, in agent 1:
                                    obs_size (6 values, not 4), obs_empty, obs_string ("abc"), reward_string ("ten");
                                    N = 0: in env_info, actions_empty ({}) or action_size_0 (move of size 0)

Like the game, it speaks the binary step exchange when the handshake asks for "step_encoding": "binary" (see
docs/protocol.md, "Binary step exchange"): a packed action message gets a packed step reply, a JSON one a JSON reply.

Dynamics (deterministic from the seed): agent j's observation is [t, j, seed, last action sum, ...] padded with
zeros; reward = 0.1 + 0.01 * j; an episode terminates when a per-agent RNG draws < 0.05, and is truncated at
max_episode_steps (default 20).
"""

import json
import os
import random
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the trainer's declarations of the wire
from python_trainer.base import contract as C  # noqa: E402
from python_trainer.envs.fragment_wire import ACTORS, ACTORS_VERSION  # noqa: E402


def parse_args(argv):
    args = {}
    for a in argv:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            args[k] = v
    return args


def send(sock, obj):
    body = json.dumps(obj).encode("utf-8")
    sock.sendall(struct.pack("<I", len(body)) + body)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv(sock):
    hdr = recv_exact(sock, 4)
    if hdr is None:
        return None
    (n,) = struct.unpack("<I", hdr)
    body = recv_exact(sock, n)
    if body is None:
        return None
    if body[:1] in (b"\x15", b"\x16"):  # a packed body: Godot's var2bytes of a PoolIntArray / PoolRealArray
        return {C.TYPE_KEY: "_packed", "body": body}
    return json.loads(body.decode("utf-8"))


def unpack_arrays(body):
    """{POOL_INT_ARRAY: [ints], POOL_REAL_ARRAY: [floats]} from a packed body (each array: uint32 type, uint32 count,
    the values)."""
    arrays, at = {C.POOL_INT_ARRAY: [], C.POOL_REAL_ARRAY: []}, 0
    header = C.PACKED_HEADER_BYTES
    while at + header <= len(body):
        kind, count = struct.unpack_from("<II", body, at)
        if kind not in arrays or at + header + 4 * count > len(body):
            break
        kind_char = "i" if kind == C.POOL_INT_ARRAY else "f"
        arrays[kind] = list(struct.unpack_from(f"<{count}{kind_char}", body, at + header))
        at += header + 4 * count
    return arrays, at == len(body)


def send_packed_step(sock, values, infos, frames=None):
    body = struct.pack(f"<II{len(values)}f", C.POOL_REAL_ARRAY, len(values), *values)
    if frames is not None:  # Godot's var2bytes of a PoolByteArray: its type, count, the bytes, zeros to 4 bytes
        body += struct.pack("<II", C.POOL_BYTE_ARRAY, len(frames)) + frames + b"\0" * (-len(frames) % 4)
    if infos:
        body += json.dumps({"info": {str(j): v for j, v in infos.items()}}).encode("utf-8")
    sock.sendall(struct.pack("<I", len(body)) + body)


def flood():
    line = b"SCRIPT ERROR: fake_game: Invalid get index 'position' (on base: 'previously freed instance').\n"
    block = line * 200
    i = 0
    while True:
        os.write(2, b"%d " % i + block)
        i += 1


def main():
    args = parse_args(sys.argv[1:])
    if args.get("fake_dialect") == "godot_rl":
        return plain_game(args)
    if "--list_envs" in sys.argv:
        deadline = time.monotonic() + 120  # a game still loading does not answer yet (--fake_wait_for)
        while "fake_wait_for" in args and not os.path.exists(args["fake_wait_for"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        print(json.dumps({C.ENVS_REPORT: ["ball_chase"], C.ENVS_DEFAULT_KEY: "ball_chase"}), flush=True)
        return
    mode = args.get("fake_mode", "ok")
    env = args.get("env", "")
    if mode == "exit_at_start" or env == "no_such_game":
        print(f"fake_game: unknown env {env!r}; valid: ball_chase", file=sys.stderr, flush=True)
        sys.exit(3)
    print(f"fake_game: pid {os.getpid()} starting {sys.argv[1:]}", flush=True)
    for i in range(int(args.get("fake_imported_assets", 0))):  # verbatim, as Godot 3.2.3 says it for art/*.png
        print(f"ERROR: _get_modified_time: Failed to get modified time for: res://art/sprite_{i}.png.\n"
              "   At: drivers/unix/file_access_unix.cpp:321.", file=sys.stderr, flush=True)
    if mode == "never_connect":
        time.sleep(float(args.get("connect_timeout", C.CONNECT_TIMEOUT_S)))
        print("fake_game: never connected, quitting", flush=True)
        sys.exit(1)
    n = int(args.get("fake_fixed_agents", args.get("agents", 16)))
    seed = int(args.get("env_seed", 0))
    max_steps = int(args.get("max_episode_steps", 20))
    if args.get("fake_obs") == "by_seed":
        obs_spec = [("obs", 4 + seed)]
    else:
        obs_spec = [(k, int(v)) for k, v in (p.split(":") for p in args.get("fake_obs", "obs:4").split(","))]
    act_spec = {}
    for i, p in enumerate(args.get("fake_action", "continuous:2").split(",")):
        kind, size = p.split(":")
        act_spec[f"a{i}" if "," in args.get("fake_action", "") else "move"] = {"size": int(size), "action_type": kind}

    port = int(args["port"])
    deadline = time.monotonic() + float(args.get("connect_timeout", 30))
    while "fake_wait_for" in args and not os.path.exists(args["fake_wait_for"]):
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.01)
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                print("fake_game: could not connect", file=sys.stderr, flush=True)
                sys.exit(1)
            time.sleep(0.05)
    sock.settimeout(None)
    token = os.environ.get("RL_SYNC_TOKEN") or args.get("token")
    if mode == "wrong_token":
        token = "not-the-token"
    if token is not None:
        send(sock, {C.TYPE_KEY: C.kind("hello"), "token": token, "env": env, "n_agents": n, "pid": os.getpid(),
                    "protocol": C.EXTENSION_VERSION})

    if "--fake_flood" in sys.argv:
        threading.Thread(target=flood, daemon=True).start()

    rngs = [random.Random(seed * 1000 + j) for j in range(n)]
    t = [0] * n
    last = [0.0] * n

    def obs_of(j):
        vals = [float(t[j]), float(j), float(seed), last[j]]
        out, pos = {}, 0
        for k, size in obs_spec:
            chunk = (vals + [0.0] * 64)[pos:pos + size]
            out[k] = chunk
            pos += size
        return out

    def flat_obs(j):  # the packed form: every key's values, keys sorted (as the trainer flattens them)
        o = obs_of(j)
        return [v for k in sorted(o) for v in o[k]]

    image = args.get("fake_image")
    if image:
        image_key, *hwc = image.split(":")
        hwc = [int(v) for v in hwc]
    shrink_at = int(args.get("fake_image_shrink", 10 ** 9))

    def frame_of(j):
        size = hwc[0] * hwc[1] * hwc[2] - (1 if j == 1 and steps >= shrink_at else 0)
        return bytes([(t[j] + 1) % 256]) * size

    def with_image(o, j):
        return {**o, image_key: frame_of(j).hex()} if image else o

    actors = None  # actor mode: what the "actors" message set up

    def fragment(sock, msg, actors, n, steps):
        """Act alone for num_steps steps (uniform random actions), as the in-engine actors do, then send the
        fragment: its header and its body in parts of at most --fake_part_floats values (default: one part)."""
        body, episodes, alive_at = [], [], time.monotonic()
        rng = actors["rngs"]
        for _ in range(actors["num_steps"]):
            steps += 1
            fail_on_purpose(steps)
            time.sleep(float(args.get("fake_step_delay", 0)))
            if time.monotonic() - alive_at >= float(args.get("fake_alive_s", 1)):
                send(sock, {C.TYPE_KEY: C.kind("alive"), "step": steps})
                alive_at = time.monotonic()
            obs = [v for j in range(n) for v in flat_obs(j)]
            acts, rew, statuses, final = [], [], [], []
            for j in range(n):
                a = [rng[j].uniform(-1.5, 1.5) for _ in range(floats_per_agent)]
                a += [float(rng[j].randrange(act_spec[k]["size"])) for k in int_keys]
                acts += a
                last[j] = sum(a)
                t[j] += 1
                rew.append(0.1 + 0.01 * j)
                term = rngs[j].random() < 0.05
                trunc = (not term) and t[j] >= max_steps
                statuses.append(C.STATUS_TRUNCATED if trunc else C.STATUS_TERMINATED if term else C.STATUS_RUNNING)
                if term or trunc:
                    final += flat_obs(j)  # every ended episode's last observation
                    episodes.append({"agent": j, "return": round(t[j] * (0.1 + 0.01 * j), 6), "length": t[j],
                                     "info": {"fake_length": t[j]}})
                    t[j], last[j] = 0, 0.0
            body += obs + acts + rew + statuses + final + ([0.0] * n if actors["logprob"] else [])
        body += [v for j in range(n) for v in flat_obs(j)]
        size = int(args.get("fake_part_floats", len(body) or 1))
        chunks = [body[i:i + size] for i in range(0, len(body), size)] or [[]]
        send(sock, {C.TYPE_KEY: C.kind("fragment"), "version": msg["version"], "parts": len(chunks), "floats": len(body),
                     "episodes": episodes})
        for chunk in chunks:
            part = struct.pack(f"<II{len(chunk)}f", C.POOL_REAL_ARRAY, len(chunk), *chunk)
            sock.sendall(struct.pack("<I", len(part)) + part)
        return steps

    float_keys = sorted(k for k, spec in act_spec.items() if spec["action_type"] == "continuous")
    int_keys = sorted(k for k, spec in act_spec.items() if spec["action_type"] == "discrete")
    floats_per_agent = sum(act_spec[k]["size"] for k in float_keys)
    binary = False
    steps = 0
    hang_after = int(mode.split("=")[1]) if mode.startswith("hang_after=") else None
    crash_after = int(mode.split("=")[1]) if mode.startswith("crash_after=") else None

    def fail_on_purpose(steps):
        """--fake_mode=crash_after=N / hang_after=N: past step N, crash or hang (a step or a fragment's step)."""
        if crash_after is not None and steps > crash_after:
            print("fake_game: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(7)
        if hang_after is not None and steps > hang_after:
            print("fake_game: hanging on purpose", flush=True)
            time.sleep(3600)

    oversize_after = int(mode.split("=")[1]) if mode.startswith("oversize_after=") else None
    while True:
        msg = recv(sock)
        if msg is None:
            print("fake_game: trainer disconnected, quitting", flush=True)
            sys.exit(0)
        typ = msg.get(C.TYPE_KEY)
        if typ == C.kind("handshake"):
            if msg.get("major_version") != C.MAJOR_VERSION:
                sys.exit(1)
            if msg.get("step_encoding", C.JSON_ENCODING) not in C.STEP_ENCODINGS:
                print(f"rl_sync: error: the trainer asked for the step encoding {msg['step_encoding']!r}",
                      file=sys.stderr, flush=True)
                sys.exit(1)
            binary = (msg.get("step_encoding") == C.BINARY_STEP_ENCODING
                      and args.get("fake_step_encoding") != C.JSON_ENCODING)
        elif typ == C.kind("env_info"):
            obs_space = {k: {"size": [s], "space": "box"} for k, s in obs_spec}
            if image:
                obs_space[image_key] = {"size": hwc, "space": "box"}
            send(sock, {
                C.TYPE_KEY: C.kind("env_info"), "n_agents": n,
                "observation_space": [obs_space] * n,
                "action_space": [act_spec] * n, "agent_policy_names": ["shared_policy"] * n,
                "env": env, "max_episode_steps": max_steps, "agents_from_flag": "fake_fixed_agents" not in args,
                **({"step_encoding": C.BINARY_STEP_ENCODING} if binary else {}),
                **({ACTORS: ACTORS_VERSION} if "--fake_actors" in sys.argv else {}),
            })
        elif typ == C.kind("reset"):
            if image and not os.environ.get("DISPLAY"):
                message = f"rl_sync: error: {env}'s camera needs the windowed export: a headless build renders nothing"
                print(message, file=sys.stderr, flush=True)
                send(sock, {C.TYPE_KEY: C.kind("error"), "message": message})
                sys.exit(1)
            for j in range(n):
                t[j] = 0
                last[j] = 0.0
            send(sock, {C.TYPE_KEY: C.kind("reset"), "obs": [with_image(obs_of(j), j) for j in range(n)]})
        elif typ == C.kind("actors") or (typ == "_packed" and actors is not None):
            if typ == C.kind("actors"):
                actors = actor_mode(sock, msg, n, sum(s for _, s in obs_spec), floats_per_agent, len(int_keys))
            elif len(unpack_arrays(msg["body"])[0][C.POOL_REAL_ARRAY]) != actors["weights"]:
                print("rl_sync: error: a weights message of the wrong count", file=sys.stderr, flush=True)
                sys.exit(1)
        elif typ == C.kind("fragment"):
            steps = fragment(sock, msg, actors, n, steps)
        elif typ in (C.kind("action"), "_packed"):
            packed = typ == "_packed"
            if packed:
                arrays, whole = unpack_arrays(msg["body"])
                if not binary or not whole or len(arrays[C.POOL_REAL_ARRAY]) != n * floats_per_agent \
                        or len(arrays[C.POOL_INT_ARRAY]) != n * len(int_keys):
                    print(f"rl_sync: error: a packed action message of {len(msg['body'])} bytes does not fit",
                          file=sys.stderr, flush=True)
                    sys.exit(1)
                acts = [{"f": arrays[C.POOL_REAL_ARRAY][j * floats_per_agent:(j + 1) * floats_per_agent],
                         "i": arrays[C.POOL_INT_ARRAY][j * len(int_keys):(j + 1) * len(int_keys)]} for j in range(n)]
            else:
                acts = msg["action"]
            steps += 1
            fail_on_purpose(steps)
            if oversize_after is not None and steps > oversize_after:  # the length of a reply too large to send
                sock.sendall(struct.pack("<I", C.bounds.MESSAGE_BYTES.value + 1))
                continue
            time.sleep(float(args.get("fake_step_delay", 0)))
            if len(acts) != n:
                print("rl_sync: error: wrong action count", file=sys.stderr, flush=True)
                sys.exit(1)
            obs, rew, done, info = [], [], [], []
            statuses, terminal, ended_infos = [], [], {}
            frames, terminal_frames = b"", b""
            for j in range(n):
                s = 0.0
                for v in acts[j].values():
                    s += sum(v) if isinstance(v, list) else float(v)
                last[j] = s
                t[j] += 1
                r = 0.1 + 0.01 * j
                term = rngs[j].random() < 0.05
                trunc = (not term) and t[j] >= max_steps
                rew.append(r)
                if term or trunc:
                    extra = {"fake_length": t[j]} if "--fake_info" in sys.argv else {}
                    term_obs = with_image(obs_of(j), j)
                    terminal += flat_obs(j)
                    terminal_frames += frame_of(j) if image else b""
                    if extra:
                        ended_infos[j] = extra
                    t[j] = 0
                    last[j] = 0.0
                    done.append(True)
                    statuses.append(C.STATUS_TRUNCATED if trunc else C.STATUS_TERMINATED)
                    info.append({**extra, "terminal_observation": term_obs, "TimeLimit.truncated": trunc})
                else:
                    done.append(False)
                    statuses.append(C.STATUS_RUNNING)
                    info.append({})
                obs.append(with_image(obs_of(j), j))
                frames += frame_of(j) if image else b""
            if packed:
                values = [v for j in range(n) for v in flat_obs(j)] + rew + statuses + terminal
                send_packed_step(sock, values, ended_infos, frames + terminal_frames if image else None)
            else:
                send(sock, {C.TYPE_KEY: C.kind("step"), "obs": obs, "reward": rew, "done": done, "info": info})
        elif typ == C.kind("call"):
            send(sock, {C.TYPE_KEY: C.kind("call"), "returns": [msg.get("method")] * n})
        elif typ == C.kind("close"):
            print("fake_game: close received", flush=True)
            sys.exit(0)
        else:
            print(f"rl_sync: error: unknown message type {typ!r}", file=sys.stderr, flush=True)
            sys.exit(1)


def actor_mode(sock, msg, n, obs_size, n_floats, n_ints):
    """The reply to "actors": the weights a policy file of that shape carries (layers' weights and biases, the
    continuous keys' log_std, the normaliser's mean and var), and the sizes; a sampler per agent."""
    with open(msg["path"]) as f:
        policy = json.load(f)
    weights = sum(len(row) for layer in policy["layers"] for row in layer["weight"])
    weights += sum(len(layer["bias"]) for layer in policy["layers"])
    weights += sum(len(k.get("log_std", [])) for k in policy["action_keys"])
    weights += 2 * obs_size if policy.get("obs_normalization") else 0
    send(sock, {C.TYPE_KEY: C.kind("actors"), "weights": weights, "obs_size": obs_size, "action_size": n_floats + n_ints,
                "n_agents": n})
    seed = int(parse_args(sys.argv[1:]).get("env_seed", 0))
    return {"weights": weights, "num_steps": int(msg["num_steps"]), "logprob": bool(msg.get("logprob")),
            "rngs": [random.Random(f"{msg['seed']}-{seed}-{j}") for j in range(n)]}


def plain_game(args):
    """A game made with godot_rl_agents' plugin (godot3 branch, 5b6e1bf), as its sync.gd speaks: it prints what
    its sync.gd prints, waits one second (here: 0.1 s, to keep tests fast), tries once to connect, and plays in human
    mode for ever if that fails; then it answers the handshake with nothing and env_info with one space each."""
    repeat = int(args.get("action_repeat", 8))  # the plugin's default when the flag is absent
    n = int(args.get("fake_fixed_agents", 2))
    seed = int(args.get("env_seed", 1))
    max_steps = int(args.get("max_episode_steps", 20))
    print("getting command line arguments", flush=True)
    print("Waiting for one second to allow server to start", flush=True)
    time.sleep(0.1)
    print("trying to connect to server", flush=True)
    sock = None
    if args.get("fake_mode") != "human_fallback":  # like the plugin, it ignores --list_envs and tries to connect
        try:
            sock = socket.create_connection(("127.0.0.1", int(args.get("port", C.EDITOR_PORT))), timeout=2)
        except OSError:
            pass
    if sock is None:
        if "--quit" in sys.argv:  # the engine's flag: quit after the first frame
            return
        while True:  # human mode: the game plays on, never connecting
            time.sleep(1)
    sock.settimeout(None)
    msg = recv(sock)
    if msg is None or not C.is_message(msg, "handshake"):
        sys.exit(1)
    print("performing handshake", flush=True)
    msg = recv(sock)
    if msg is None or not C.is_message(msg, "env_info"):
        sys.exit(1)
    info = {C.TYPE_KEY: C.kind("env_info"), "observation_space": {"obs": {"size": [4], "space": "box"}},
            "action_space": {"move": {"size": 2, "action_type": "continuous"}}, "n_agents": n}
    if "fake_policy_names" in args:  # as the plugin's Godot 4 branch sends them: one name per agent, in turn
        names = args["fake_policy_names"].split(",")
        info["agent_policy_names"] = [names[j % len(names)] for j in range(n)]
    for key in filter(None, args.get("fake_env_info", "").split(",")):
        info.pop(key, None)
    if "fake_first" in args:
        info = {C.TYPE_KEY: args["fake_first"]}
    bug, _, bug_at = args.get("fake_bug", "none:0").partition(":")
    bug_at = int(bug_at)
    if bug == "actions_empty":
        info["action_space"] = {}
    elif bug == "action_size_0":
        info["action_space"] = {"move": {"size": 0, "action_type": "continuous"}}
    send(sock, info)
    rngs = [random.Random(seed * 1000 + j) for j in range(n)]
    t = [0] * n
    done = [False] * n
    steps = 0
    mode = args.get("fake_mode", "ok")
    crash_after = int(mode.split("=")[1]) if mode.startswith("crash_after=") else None

    def obs_of(j):
        if j == 1 and steps >= bug_at and bug in ("obs_size", "obs_empty", "obs_string"):
            return {"obs": {"obs_size": [0.0] * 6, "obs_empty": [], "obs_string": "abc"}[bug]}
        return {"obs": [float(t[j]), float(j), float(seed), float(repeat)]}

    while True:
        msg = recv(sock)
        if msg is None:
            sys.exit(0)
        typ = msg.get(C.TYPE_KEY)
        if typ == C.kind("close"):
            print("received close message, closing game", flush=True)
            sys.exit(0)
        if typ == C.kind("reset"):
            t = [0] * n
            send(sock, {C.TYPE_KEY: C.kind("reset"), "obs": [obs_of(j) for j in range(n)]})
        elif typ == C.kind("call"):
            send(sock, {C.TYPE_KEY: C.kind("call"), "returns": [msg.get("method")] * n})
        elif typ == C.kind("action"):
            if len(msg["action"]) != n:
                sys.exit(1)
            steps += 1
            if crash_after is not None and steps > crash_after:
                print("fake_game: crashing on purpose", file=sys.stderr, flush=True)
                os._exit(7)
            rew = []
            for j in range(n):
                t[j] += 1
                rew.append("ten" if bug == "reward_string" and j == 1 and steps >= bug_at else 0.1 + 0.01 * j)
                # a termination or the game's own time limit: the plugin's done cannot tell them apart, and the
                # game resets itself (the observation sent is then the next episode's first)
                if rngs[j].random() < 0.05 or t[j] >= max_steps:
                    done[j] = True
                    t[j] = 0
            send(sock, {C.TYPE_KEY: C.kind("step"), "obs": [obs_of(j) for j in range(n)], "reward": rew, "done": done})
            done = [False] * n
        else:
            print("message was not handled", flush=True)


if __name__ == "__main__":
    main()
