"""Camera images through the envs layer: the flat row (vector keys, then the image's H*W*C bytes as 0..255 floats), in
both step encodings (hex in JSON, a byte array after the packed float block), the frame stack, the windowed instances
a camera game gets by itself, and the one-line errors of bad images. Against the fake game (tests/fake_game.py,
--fake_image) and fake peers on a socket pair; the real camera game is tested with the forager export."""

import json
import os
import socket
import struct

import numpy as np
import pytest

from helpers import fake_env, fake_export, quiet, wait_gone
from python_trainer.envs.game import GameBugError, GameError
from python_trainer.envs.obs_codec import ObsCodec
from python_trainer.envs.policy_batch import PolicyBatch
from python_trainer.envs.protocol import GodotConnection, GodotConnectionError, unpack_step
from python_trainer.envs.spaces import dict_observation_space, policies_from_env_info

CAMERA = {"size": [2, 3, 1], "space": "box"}


def env_info(obs_space, n=2, names=None):
    return {"n_agents": n, "observation_space": [obs_space] * n, "agent_policy_names": names,
            "action_space": [{"move": {"size": 2, "action_type": "continuous"}}] * n}


def packed(values, frames=None, pad=None, tail=None) -> bytes:
    values = np.asarray(values, dtype="<f4")
    body = struct.pack("<II", 22, values.size) + values.tobytes()
    if frames is not None:
        body += struct.pack("<II", 20, len(frames)) + frames + (pad if pad is not None else b"\0" * (-len(frames) % 4))
    return body + (json.dumps(tail).encode() if tail is not None else b"")


# ---------------------------------------------------------------------------------------------- the flat row
def test_an_image_ends_the_row_after_the_sorted_vector_keys_with_bounds_0_to_255():
    (p,) = policies_from_env_info(env_info({"vel": {"size": [2], "space": "box"}, "camera_2d": CAMERA,
                                            "a": {"size": [1], "space": "box"}}))
    assert [k for k, _ in p.obs_layout] == ["a", "vel", "camera_2d"]
    assert (p.image.key, p.image.shape, p.image.start, p.image.row_size) == ("camera_2d", (2, 3, 1), 3, 9)
    assert p.observation_space.low[3:].tolist() == [0] * 6 and p.observation_space.high[3:].tolist() == [255] * 6
    assert np.isinf(p.observation_space.high[:3]).all()
    assert str(dict_observation_space(p)["camera_2d"]) == "Box(0, 255, (2, 3, 1), uint8)"
    (vector,) = policies_from_env_info(env_info({"obs": {"size": [4], "space": "box"}}))
    assert vector.image is None


@pytest.mark.parametrize("space,message", [
    ({"camera_2d": CAMERA, "top_2d": CAMERA}, "declare 2 image observations (camera_2d, top_2d): the trainer takes one"),
    ({"camera_2d": {"size": [0, 0, 3], "space": "box"}}, "'camera_2d' is declared 0 x 0 x 3: declare it"),
    ({"camera_2d": {"size": [36, 513, 3], "space": "box"}}, "'camera_2d' is declared 36 x 513 x 3: declare it"),
    ({"camera_2d": {"size": [36, 36, 2], "space": "box"}}, "C = 3 (RGB) or 1 (grayscale)"),
    ({"camera_2d": {"size": [36, 36], "space": "box"}}, "sides from 1 to 512"),
], ids=["two", "0x0", "513", "2 channels", "2 sides"])
def test_bad_image_declarations_get_one_line(space, message):
    with pytest.raises(GameBugError) as e:
        policies_from_env_info(env_info(space))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_codec_decodes_hex_and_names_a_frame_of_another_size():
    (p,) = policies_from_env_info(env_info({"obs": {"size": [1], "space": "box"}, "camera_2d": CAMERA}))
    codec = ObsCodec(p.obs_layout, p.image)
    frames = [bytes(range(6)), bytes(range(10, 16))]
    rows = codec.flat([{"obs": [0.5], "camera_2d": f.hex()} for f in frames])
    assert rows.dtype == np.float32 and rows.tolist() == [[0.5, 0, 1, 2, 3, 4, 5], [0.5, 10, 11, 12, 13, 14, 15]]
    # packed vectors (obs_f32): the images come in the "obs" list, as hex
    import base64
    msg = {"obs_f32": base64.b64encode(np.float32([1, 2]).tobytes()).decode(),
           "obs": [{"camera_2d": f.hex()} for f in frames]}
    assert codec.from_reply(msg, 2).tolist() == [[1, 0, 1, 2, 3, 4, 5], [2, 10, 11, 12, 13, 14, 15]]
    with pytest.raises(GameBugError, match="packed observations .* without the agents' images"):
        codec.from_reply({"obs_f32": msg["obs_f32"]}, 2)
    with pytest.raises(GameBugError) as e:
        codec.flat([{"obs": [0], "camera_2d": frames[0].hex()}, {"obs": [0], "camera_2d": "00" * 5}], "instance 0")
    assert str(e.value) == ("instance 0: agent 1's image 'camera_2d' holds 5 bytes, expected 2 x 3 x 1 (6 bytes) as the "
                            "game declared in its env_info (get_obs_space()): a camera must keep the size it declared "
                            "(a size that changes mid-run, or a Viewport of another size than the sensor's)")
    with pytest.raises(GameBugError, match="agent 0's image 'camera_2d' is 'xyz', not a hex string"):
        codec.flat([{"obs": [0], "camera_2d": "xyz"}])


def test_several_policies_with_different_spaces_and_images_are_refused_in_one_line():
    info = env_info({"obs": {"size": [1], "space": "box"}, "camera_2d": CAMERA}, names=["seer", "blind"])
    info["observation_space"][1] = {"obs": {"size": [3], "space": "box"}}
    policies = policies_from_env_info(info)
    with pytest.raises(GameError, match="some see camera images: policies with images must all declare the same"):
        PolicyBatch(policies, np.array([0, 1]), "tag")


# ---------------------------------------------------------------------------------------------- the packed reply
def test_the_packed_reply_carries_the_frames_in_a_byte_array_after_the_floats():
    frames = bytes(range(2 * 3)) + bytes([9, 9, 9])  # 2 agents of 3 bytes, then agent 1's terminal frame
    body = packed([0.5, 1.5, 0.1, 0.2, 0, 2, 7.0], frames, tail={"info": {"1": {"fruits": 1}}})
    obs, rewards, statuses, term, infos, shown, last = unpack_step(body, 2, 1, frame_size=3)
    assert obs.tolist() == [[0.5], [1.5]] and statuses.tolist() == [0, 2] and term.tolist() == [[7.0]]
    assert shown.dtype == np.uint8 and shown.tolist() == [[0, 1, 2], [3, 4, 5]] and last.tolist() == [[9, 9, 9]]
    assert infos == {1: {"fruits": 1}}
    body = packed([0.1, 0.2, 0, 0], bytes(8))  # an image-only agent: no vector values, 8 bytes need no padding
    assert unpack_step(body, 2, 0, frame_size=4)[5].shape == (2, 4)


@pytest.mark.parametrize("body,message", [
    (packed([0, 0, 0, 0, 0, 0]), "without its camera images: expected a byte array of 2 + 0 frames of 3 bytes"),
    (packed([0, 0, 0, 0, 0, 0], bytes(6))[:-16] + struct.pack("<II", 21, 6) + bytes(8), "type word 21"),
    (packed([0, 0, 0, 0, 0, 0], bytes(6), pad=b"\0\1"), "padded with bytes other than zero"),
    (packed([0, 0, 0, 0, 0, 0], bytes(6), pad=b""), "announces 6 bytes of camera images but holds 6"),
    (packed([0, 0, 0, 0, 0, 0], bytes(6), tail={"info": [1]}), "must be {\"info\": {agent index: info}}"),
], ids=["missing", "not bytes", "padding", "short", "tail"])
def test_packed_replies_with_bad_frames_are_refused(body, message):
    with pytest.raises(ValueError) as e:
        unpack_step(body, 2, 1, frame_size=3)
    assert message in str(e.value)


def test_frames_of_another_size_are_a_game_bug_and_undeclared_frames_are_named():
    with pytest.raises(ValueError, match="declares no image observation"):
        unpack_step(packed([0, 0, 0, 0, 0, 0], bytes(6)), 2, 1)
    a, b = socket.socketpair()
    try:
        conn = GodotConnection(a, label="instance 0", timeout=5)
        body = packed([0, 0, 0, 0, 0, 0], bytes(5))
        b.sendall(struct.pack("<I", len(body)) + body)
        with pytest.raises(GameBugError) as e:  # not a broken connection: a restart would repeat it
            conn.step_recv_packed(2, 1, frame_size=3)
        assert str(e.value).startswith("instance 0: a packed step reply holds 5 bytes of camera images, expected 6 "
                                       "(2 agents + 0 ended episodes x 3 bytes")
        assert "a size that changes mid-run" in str(e.value)
        body = packed([0, 0, 0, 0, 0, 0])
        b.sendall(struct.pack("<I", len(body)) + body)
        with pytest.raises(GodotConnectionError, match="malformed step reply .*without its camera images"):
            conn.step_recv_packed(2, 1, frame_size=3)
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------------------------------- the vector env
@pytest.mark.parametrize("encoding", [[], ["--fake_step_encoding=json"]], ids=["binary", "json"])
def test_a_camera_game_runs_windowed_by_itself_and_its_frames_fill_the_image_columns(tmp_path, monkeypatch, encoding):
    """The fake game refuses to reset without a display, as the headless build does: the vector env steps it because
    the launcher saw the camera in env_info and started the instances again, windowed, under one Xvfb."""
    monkeypatch.delenv("DISPLAY", raising=False)
    events = []
    env = fake_env(tmp_path, "--fake_image=camera_2d:2:3:1", "--fake_obs=obs:4", *encoding, report=quiet(events))
    try:
        assert env.env_info.get("step_encoding") == (None if encoding else "binary")
        (line,) = [e for e in events if "camera" in e]
        assert "Xvfb" in line and "2 windowed instance(s): ball_chase observes a camera image (camera_2d, 2 x 3 x 1)" \
            in line and "\n" not in line
        assert not env.launcher.headless and env.image_layout.shape == (2, 3, 1) and env.obs_dim == 10
        obs, _ = env.reset()
        assert (obs[:, 4:] == 1).all()  # every byte of a frame: its episode's step + 1
        ended = False
        for _ in range(30):
            obs, _, term, trunc, infos = env.step(env.action_space.sample())
            np.testing.assert_array_equal(obs[:, 4:], (obs[:, :1] + 1).repeat(6, axis=1))
            if "final_obs" in infos:
                final = infos["final_obs"][infos["_final_obs"]]
                np.testing.assert_array_equal(final[:, 4:], (final[:, :1] + 1).repeat(6, axis=1))
                ended = True
        assert ended
        xvfb = env.launcher.xvfb_pid
    finally:
        env.close()
    assert wait_gone([xvfb]) == []


def test_a_frame_that_shrinks_mid_run_stops_the_run_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", os.environ.get("DISPLAY", ":none"))  # never opened: the fake game only checks it
    env = fake_env(tmp_path, "--fake_image=camera_2d:2:3:1", "--fake_image_shrink=2", instances=1,
                   report=quiet([]))
    try:
        env.reset()
        env.step(env.action_space.sample())
        with pytest.raises(GameBugError, match="holds 17 bytes of camera images, expected 18 .*changes mid-run"):
            env.step(env.action_space.sample())
        assert env.launcher.restarts == [0]
    finally:
        env.close()


def test_vector_games_have_no_image_layout(tmp_path):
    env = fake_env(tmp_path, instances=1)
    try:
        assert env.image_layout is None and env.launcher.headless
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- the frame stack
def test_the_frame_stack_clears_at_episode_start_and_stacks_final_obs_with_its_own_history(tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", os.environ.get("DISPLAY", ":none"))
    env = fake_env(tmp_path, "--fake_image=camera_2d:1:2:1", "--fake_obs=obs:4", agents=2, frame_stack=3,
                   report=quiet([]))
    try:
        assert env.image_layout.shape == (1, 2, 3) and env.single_observation_space.shape == (10,)
        assert env.single_observation_space.high[4:].tolist() == [255] * 6
        obs, _ = env.reset()
        assert obs[:, 4:].tolist() == [[0, 0, 1, 0, 0, 1]] * 4  # per pixel: oldest, middle, newest

        def stack(t):  # the frames of steps t-2, t-1, t of one episode (a frame's bytes are its step + 1)
            return [max(t - 1, 0) * (t >= 2), t * (t >= 1), t + 1] * 2

        seen_end = False
        for _ in range(40):
            obs, _, _, _, infos = env.step(env.action_space.sample())
            assert obs[:, 4:].tolist() == [stack(int(t)) for t in obs[:, 0]]
            if "final_obs" in infos:
                final = infos["final_obs"][infos["_final_obs"]]
                assert final[:, 4:].tolist() == [stack(int(t)) for t in final[:, 0]]
                assert (final[:, 0] >= 1).all() and (obs[infos["_final_obs"], 0] == 0).all()
                seen_end = True
        assert seen_end
        env.step_async(env.action_space.sample()[:2], 0)  # groups: the first instance's envs
        obs, *_ = env.step_wait(0)
        assert obs.shape == (2, 10) and obs[:, 4:].tolist() == [stack(int(t)) for t in obs[:, 0]]
    finally:
        env.close()


def test_a_frame_stack_on_a_game_without_images_is_refused_in_one_line(tmp_path):
    with pytest.raises(GameError) as e:
        fake_env(tmp_path, instances=1, frame_stack=4)
    assert str(e.value) == ("--frame-stack 4: ball_chase observes no camera image (no observation key containing "
                            "\"2d\"), so there are no frames to stack: drop --frame-stack")
    from python_trainer.envs.vec_env import make_vec_env

    with pytest.raises(GameError, match="CartPole-v1 is a gymnasium id: drop --frame-stack"):
        make_vec_env("CartPole-v1", frame_stack=2)


# ---------------------------------------------------------------------------------------------- godot-ppo envs
def test_envs_prints_a_camera_games_space_in_gymnasiums_dict_form_from_a_headless_instance(tmp_path, capsys,
                                                                                           monkeypatch):
    from python_trainer.tools.game_commands import envs_main

    monkeypatch.delenv("DISPLAY", raising=False)  # headless: the fake game would refuse a reset, nothing resets
    export = fake_export(tmp_path / "seer.x86_64", "--fake_image=camera_2d:36:36:3", "--fake_obs=obs:3")
    assert envs_main(["--env-path", str(export)]) == 0
    out = capsys.readouterr().out
    assert ("  observation space:   Dict('camera_2d': Box(0, 255, (36, 36, 3), uint8), 'obs': Box(-inf, inf, (3,), "
            "float32))  (the trainer's flat row: 3891 values; trained on windowed instances)") in out.splitlines()


# ---------------------------------------------------------------------------------------------- godot-ppo profile
def test_profile_refuses_headless_alone_for_a_camera_game_and_measures_windowed_up_to_the_cores(tmp_path, monkeypatch):
    from python_trainer.base.errors import UserError
    from python_trainer.tools.profile import camera
    from python_trainer.tools.profile.command import main

    export = fake_export(tmp_path / "seer.x86_64", "--fake_image=camera_2d:36:36:3")
    with pytest.raises(UserError) as e:
        main(["--env-path", str(export), "--modes", "headless", "--out", str(tmp_path / "out")])
    assert str(e.value) == ("--modes headless: ball_chase observes a camera image (camera_2d, 36 x 36 x 3), which a "
                            "headless build cannot render: profile it with --modes windowed")
    seen = {"key": "camera_2d", "size": [20, 20, 3]}
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    modes, counts, line = camera.camera_modes("forager", seen, ["headless", "windowed"], [1, 2, 4, 8], set())
    assert (modes, counts) == (["windowed"], [1, 2, 3])
    assert line == ("skipping headless: forager observes a camera image (camera_2d, 20 x 20 x 3), which a headless "
                    "build cannot render; measuring windowed x 1,2,3")
    assert camera.camera_modes("forager", seen, ["windowed"], [2], {"num_instances"})[:2] == (["windowed"], [2])


def test_profile_says_a_camera_games_render_cost_and_recommends_a_count():
    from python_trainer.tools.profile.camera import summary

    def ok(n, rate, ms):
        return {"status": "ok", "mode": "windowed", "instances": n, "agent_steps_per_second": rate,
                "engine_only_ms_per_decision": ms}

    report = {"camera": {"key": "camera_2d", "size": [36, 36, 3], "headless_engine_ms_per_decision": 1.5},
              "results": [ok(1, 900.0, 9.0), ok(2, 1500.0, 9.8), ok(3, 1400.0, 11.0)]}
    assert summary(report) == ("Camera game: render cost 7.50 ms per decision frame (engine-only 9.00 ms windowed "
                               "against 1.50 ms headless); recommended --num-instances 2 (windowed, 1,500 "
                               "agent-steps/s)")
    report["camera"]["headless_engine_ms_per_decision"] = None
    assert "render cost is not separated" in summary(report)
    assert summary({"results": report["results"]}) is None  # a vector game: nothing said
