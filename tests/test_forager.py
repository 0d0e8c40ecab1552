"""forager, the camera game, against the real exports: godot-rl's own GodotEnv on the windowed export sees its
camera as Box(0, 255, (36, 36, 3), uint8) with a real first frame; a frame after a reset shows the new episode (an
agent that starts facing a target sees the target's colour), over the binary step exchange's byte block; the
headless export answers --list_envs and env_info and refuses to step in one line; godot-rl's SB3 wrapper trains it
with SB3's MultiInputPolicy.

Windowed games run under an Xvfb of the test's own (envs/xvfb.py), which the test ends with every game it started."""

import contextlib
import io
import json
import os
import socket
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from helpers import end, free_port, output_of, train_run, wait_gone
from python_trainer.envs.protocol import GodotConnection, pack_actions
from python_trainer.envs.xvfb import Xvfb

SHAPE = (36, 36, 3)
FRAME_BYTES = 36 * 36 * 3
TARGET = np.array([255, 229, 25])  # room.gd's TARGET_COLOR (1.0, 0.9, 0.1), unshaded: what the camera reads
HEADLESS_LINE = ("rl_sync: error: this game's agents observe through camera sensors, and the headless export renders "
                 "nothing: run the windowed export")


def _sees_target_ahead(frame: np.ndarray) -> bool:
    """The middle of the picture (where a target 2.5 m straight ahead is drawn) is mostly the target's colour."""
    middle = frame[15:22, 15:21].reshape(-1, 3).astype(int)
    return int((np.abs(middle - TARGET).max(axis=1) < 40).sum()) >= 8


def _listen():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(30)
    return server, server.getsockname()[1]


@pytest.mark.slow
def test_godot_rl_sees_the_camera_of_16_agents(windowed_export, tmp_path, monkeypatch):
    from godot_rl.core.godot_env import GodotEnv

    with Xvfb(tmp_path / "xvfb.log") as xvfb:
        monkeypatch.setenv("DISPLAY", xvfb.start())
        env = GodotEnv(env_path=str(windowed_export), port=free_port(), show_window=False, seed=3, speedup=20,
                       env="forager")
        try:
            assert env.num_envs == 16
            assert env.observation_space["camera_2d"] == gym.spaces.Box(0, 255, SHAPE, np.uint8)
            assert env.observation_space["obs"].shape == (3,)
            obs, _ = env.reset()
            assert len(obs) == 16
            seen = set()
            for agent_obs in obs:
                frame = agent_obs["camera_2d"]
                assert frame.shape == SHAPE and frame.dtype == np.uint8
                colours = {tuple(p) for p in frame.reshape(-1, 3)}
                assert len(colours) >= 2, f"a blank first frame: {colours}"  # a wall at least, and the floor
                seen |= colours
            assert len(seen) >= 5, f"the rooms' first frames hold only {sorted(seen)}"  # floor, 4 walls, targets
            assert len({agent_obs["camera_2d"].tobytes() for agent_obs in obs}) > 1, "every room shows the same"
            for _ in range(3):
                obs, reward, done, _, info = env.step([np.random.randint(0, 3, size=(16,))])
            assert obs[5]["camera_2d"].shape == SHAPE
        finally:
            env.close()
            pid = env.proc.pid
            left = wait_gone([pid], timeout=15)
            if left:
                env.proc.kill()
            env.proc.wait(timeout=5)
        assert left == [], "the game did not quit after godot-rl's close message"


@pytest.mark.slow
def test_a_reset_frame_shows_the_new_episode(windowed_export, tmp_path):
    """Every episode after the first starts facing a target (target_ahead=1) and lasts 3 decisions, turning left all the time: the
    reset reply's frames, and the frames that follow each episode's end in the binary step reply's byte block, show
    that target in their middle; the terminal frames, turned away, mostly do not."""
    agents = 4
    server, port = _listen()
    with Xvfb(tmp_path / "xvfb.log") as xvfb, server:
        proc = subprocess.Popen(
            [str(windowed_export), "--env=forager", f"--port={port}", f"--agents={agents}", "--disable-render-loop",
             "--speedup=20", "--max_episode_steps=3"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, DISPLAY=xvfb.start()),
        )
        try:
            conn = GodotConnection(server.accept()[0], timeout=30)
            conn.handshake(step_encoding="binary")
            info = conn.env_info()
            assert info["observation_space"][0]["camera_2d"] == {"size": list(SHAPE), "space": "box"}
            # from the next episodes on (the one the game began at its start has its targets anywhere)
            assert conn.request("env_params", values={"target_ahead": 1})["type"] == "env_params"
            for agent_obs in conn.reset():
                frame = np.frombuffer(bytes.fromhex(agent_obs["camera_2d"]), np.uint8).reshape(SHAPE)
                assert _sees_target_ahead(frame), "the first frame is not the episode's"
            last_frames = []
            for step in range(7):
                # turn left every step: by an episode's end the target is out of sight
                conn.send_bytes(pack_actions(ints=np.ones(agents, np.int32)))
                body = bytes(conn.recv_body(30))
                count = int.from_bytes(body[4:8], "little")  # the float block: 3 + 1 + 1 values per agent + terminal
                statuses = np.frombuffer(body, "<f4", count=agents, offset=8 + 4 * (agents * 4))
                ended = int((statuses != 0).sum())
                assert count == agents * 5 + ended * 3
                at = 8 + 4 * count
                assert body[at:at + 4] == (20).to_bytes(4, "little"), "a PoolByteArray follows the float block"
                n_bytes = int.from_bytes(body[at + 4:at + 8], "little")
                assert n_bytes == (agents + ended) * FRAME_BYTES
                tail = at + 8 + n_bytes + (-n_bytes) % 4  # zero padding, then the ended agents' info
                assert body[at + 8 + n_bytes:tail] == b"\0" * ((-n_bytes) % 4)
                assert body[tail:].startswith(b'{"info":') if ended else body[tail:] == b""
                frames = np.frombuffer(body, np.uint8, count=n_bytes, offset=at + 8).reshape(-1, *SHAPE)
                for i in np.flatnonzero(statuses):  # a new episode's first frame: its target ahead
                    assert _sees_target_ahead(frames[i]), f"step {step}, agent {i}: not the new episode's frame"
                # each ended episode's last frame: turned 30 degrees away from its first target (another may be ahead)
                last_frames += [_sees_target_ahead(frames[agents + k]) for k in range(ended)]
            assert len(last_frames) == 2 * agents  # episodes of 3 decisions end at steps 2 and 5
            assert sum(last_frames) < len(last_frames) / 2, "the episodes' last frames still show their first target"
            conn.send({"type": "close"})
            assert proc.wait(timeout=15) == 0
        finally:
            end(proc)


def test_the_headless_export_answers_then_refuses_cameras(headless_export):
    listed = subprocess.run([str(headless_export), "--list_envs"], capture_output=True, text=True, timeout=30)
    assert "forager" in listed.stdout
    server, port = _listen()
    with server:
        proc = subprocess.Popen([str(headless_export), "--env=forager", f"--port={port}", "--agents=2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            conn = GodotConnection(server.accept()[0], timeout=30)
            conn.handshake()
            info = conn.env_info()
            assert info["observation_space"][1]["camera_2d"] == {"size": list(SHAPE), "space": "box"}
            conn.send({"type": "reset"})
            reply = conn.recv(timeout=30)
            assert reply["type"] == "error" and "windowed export" in reply["message"]
            assert proc.wait(timeout=15) == 1
            errors = [line for line in output_of(proc).splitlines() if line.startswith("rl_sync: error:")]
            assert len(errors) == 1 and errors[0].startswith(HEADLESS_LINE), errors
        finally:
            end(proc)


def test_the_vector_baseline_runs_headless(headless_export):
    """vision=0: no camera, the targets' places in "obs" (3 velocity values + 2 per target), as any vector game."""
    server, port = _listen()
    with server:
        proc = subprocess.Popen([str(headless_export), "--env=forager", f"--port={port}", "--agents=2",
                                 "--env_param=vision=0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            conn = GodotConnection(server.accept()[0], timeout=30)
            conn.handshake()
            assert conn.env_info()["observation_space"][0] == {"obs": {"size": [11], "space": "box"}}
            assert [len(o["obs"]) for o in conn.reset()] == [11, 11]
            conn.step_send([{"move": 0}, {"move": 1}])
            assert len(conn.step_recv()["obs"]) == 2
            conn.send({"type": "close"})
            assert proc.wait(timeout=15) == 0
        finally:
            end(proc)


@pytest.mark.slow
def test_training_the_vector_baseline_stays_headless_without_a_camera(headless_export, tmp_path):
    """`train --env-param vision=0`: the parameter is in force before env_info is read (it goes on the binary's
    command line too), so the run trains on the 11 vector values, headless, and its policy sees no camera."""
    run_dir = train_run(tmp_path, "--env-id", "forager", "--env-param", "vision=0", "--num-instances", "1",
                        "--agents-per-instance", "2", "--num-steps", "32", "--total-timesteps", "64",
                        "--eval-episodes", "0", env={"DISPLAY": ""})
    log = (run_dir / "logs" / "instance_0.log").read_text()
    assert "--env_param=vision=0.0" in log and "windowed" not in log and "restart 1" not in log
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy.get("image") is None and policy["observation_size"] == 11


@pytest.mark.slow
def test_stable_baselines3_trains_forager_from_its_camera(windowed_export, tmp_path, monkeypatch):
    """godot-rl's own StableBaselinesGodotEnv with SB3's MultiInputPolicy (its NatureCNN on camera_2d, an MLP on the
    velocity), as godot-rl's SB3 example builds it, for 3 rollouts of 64 steps x 16 agents: every loss finite."""
    import math

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env.vec_monitor import VecMonitor

    from godot_rl.wrappers.stable_baselines_wrapper import StableBaselinesGodotEnv

    with Xvfb(tmp_path / "xvfb.log") as xvfb:
        monkeypatch.setenv("DISPLAY", xvfb.start())
        venv = StableBaselinesGodotEnv(env_path=str(windowed_export), show_window=False, seed=0, n_parallel=1,
                                       speedup=8, port=free_port(), env="forager")
        godot_env = venv.envs[0]
        try:
            assert venv.observation_space["camera_2d"] == gym.spaces.Box(0, 255, SHAPE, np.uint8)
            # No seed=: PPO would call VecEnv.seed(), which godot-rl's wrapper does not implement.
            model = PPO("MultiInputPolicy", VecMonitor(venv), n_steps=64, batch_size=256, n_epochs=2, verbose=0)
            assert type(model.policy.features_extractor.extractors["camera_2d"]).__name__ == "NatureCNN"
            model.learn(total_timesteps=3 * 64 * 16)
            assert model.num_timesteps == 3 * 64 * 16
            for key in ("train/loss", "train/value_loss", "train/policy_gradient_loss", "train/approx_kl"):
                assert math.isfinite(model.logger.name_to_value[key]), key
            assert all(np.isfinite(p.detach().numpy()).all() for p in model.policy.parameters())
        finally:
            venv.close()
            pid = godot_env.proc.pid
            left = wait_gone([pid], timeout=15)
            if left:
                godot_env.proc.kill()
            godot_env.proc.wait(timeout=5)
        assert left == [], "the game did not quit after godot-rl's close message"


@pytest.mark.slow
def test_the_pretrained_policy_forages_inside_the_engine(windowed_export, tmp_path):
    """exports/policies/forager.json (its CNN in GDScript, on the windowed export, its window not drawn) collects far
    more targets than the game's random actions in the same rooms; export-policy's line counts the encoder."""
    from python_trainer import cli
    from python_trainer.engine.in_engine import evaluate_in_engine

    policies = Path(__file__).resolve().parent.parent / "exports" / "policies"
    with Xvfb(tmp_path / "xvfb.log") as xvfb:
        display = xvfb.start()
        trained = evaluate_in_engine(policies / "forager.json", env_id="forager", env_path=windowed_export,
                                     episodes=2, agents=2, seed=5, display=display)
        random = evaluate_in_engine("random", env_id="forager", env_path=windowed_export, episodes=2, agents=2,
                                    seed=5, display=display)
    assert trained["mean_return"] > 10 and random["mean_return"] < 3, (trained, random)
    out, text = tmp_path / "forager.json", io.StringIO()
    with contextlib.redirect_stdout(text):
        assert cli.main(["export-policy", str(policies / "forager_model.pt"), "-o", str(out)]) == 0
    assert "3 observations + camera_2d 36 x 36 x 3 -> move (discrete, 3), 106291 parameters" in text.getvalue()


@pytest.mark.slow
def test_profile_measures_forager_as_training_runs_it_with_the_window_not_drawn(windowed_export, tmp_path):
    """`profile` on a camera game runs its windowed instances as training does (--disable-render-loop): the
    cameras render their own viewports and the window is never drawn, so the engine's drawn frames stay at 0
    (with the window drawn, every physics frame was drawn too: 137 frames/s at 547 agent-steps/s)."""
    from python_trainer.tools.profile import command as profiling

    out = tmp_path / "out"
    assert profiling.main(["--env", "forager", "--instances", "1", "--steps", "100", "--warmup-steps", "10",
                           "--no-engine-benchmark", "--out", str(out)]) == 0
    (result,) = json.loads((out / "profile.json").read_text())["results"]
    assert (result["mode"], result["status"]) == ("windowed", "ok")
    assert result["physics_fps_per_instance"] > 0 and result["rendered_fps_per_instance"] == 0
