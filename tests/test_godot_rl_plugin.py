"""Games made with godot_rl_agents' own Godot 3 plugin: the launcher tells their dialect from their first messages and
everything that needs no cooperation from the game works (train, resume, envs, launch, play --python, profile).

The peer is tests/fake_game.py with --fake_dialect=godot_rl, which speaks as that plugin's sync.gd (godot3 branch,
5b6e1bf) does: nothing before the handshake, one space each in env_info, no info in step replies, done = terminated
or time limit with the game resetting itself, no answer to --list_envs, one try to connect. scripts/check_godot_rl_plugin.py
runs the same commands against a real game built on the plugin's own code.
"""

import json
import time

import numpy as np
import pytest

from helpers import plain_export, quiet, wait_gone
from python_trainer import cli
from python_trainer.run import train
from python_trainer.envs.game import godot_game, resolve_env
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.failures import InstanceStartError
from python_trainer.envs.protocol import GODOT_RL
from python_trainer.tools.game_commands import envs_main
from python_trainer.envs.vec_env import make_vec_env

PLAIN = ("--fake_dialect=godot_rl",)


def test_a_plain_game_handshakes_resets_steps_and_closes(fake_binary, tmp_path):
    env = make_vec_env("plain", num_instances=2, binary=fake_binary, extra_args=PLAIN, seed=5, action_repeat=3,
                       run_dir=tmp_path)
    pids = env.launcher.pids()
    try:
        # Told by its first message: env_info without our hello or extension keys.
        assert env.dialect == GODOT_RL
        assert all(inst.hello is None and inst.dialect == GODOT_RL for inst in env.launcher.instances)
        assert env.single_observation_space.shape == (4,) and env.single_action_space.shape == (2,)
        assert env.num_envs == 4 and env.max_episode_steps is None
        assert env.game_settings == {"dialect": GODOT_RL, "env_seed": [5, 6], "speedup": 1, "action_repeat": 3,
                                     "agents": [2, 2]}
        assert "--env_seed=5..6 --speedup=1 --action_repeat=3" in env.startup_line()
        obs, _ = env.reset()
        assert obs[:, 2].tolist() == [5, 5, 6, 6]  # each instance read its --env_seed
        assert (obs[:, 3] == 3).all()  # --action_repeat reached the game (the plugin would take 8 without it)
        steps, ended, counted, lengths = 60, 0, 0, 0
        for _ in range(steps):
            obs, reward, terminated, truncated, infos = env.step(env.action_space.sample())
            assert not truncated.any()  # the plugin cannot say "time limit": every done is a termination
            assert np.allclose(reward, [0.1, 0.11, 0.1, 0.11])
            if terminated.any():
                ended += int(terminated.sum())
                # no terminal observation: the one that came with done stands for it, and the next step goes on from it
                assert np.array_equal(infos["final_obs"][terminated], obs[terminated])
                assert (obs[terminated, 0] == 0).all()  # here the game had already reset: the next episode's first
            if "_episode" in infos:
                counted += int(infos["_episode"].sum())
                lengths += int(infos["episode"]["l"][infos["_episode"]].sum())
        assert ended > 0 and counted == ended  # each episode counted once
        assert lengths + int(obs[:, 0].sum()) == steps * env.num_envs  # every step in exactly one episode
        assert env.call("get_done") == ["get_done"] * 4
    finally:
        env.close()
    assert wait_gone(pids) == []
    for i in range(2):  # each game got the close message and quit by itself
        assert "received close message" in (tmp_path / "logs" / f"instance_{i}.log").read_text()


@pytest.mark.parametrize("extra, said", [
    (["--fake_env_info=observation_space,n_agents"], "its env_info reply lacks 'n_agents', 'observation_space'"),
    (["--fake_first=step"], "its first message is neither our hello nor an env_info reply (type 'step')"),
])
def test_a_peer_speaking_neither_dialect_gets_one_line(fake_binary, tmp_path, extra, said):
    launcher = InstanceLauncher(godot_game("plain", program=fake_binary),
                                LaunchOptions(extra_args=(*PLAIN, *extra), run_dir=tmp_path, connect_timeout=20))
    start = time.monotonic()
    with pytest.raises(InstanceStartError) as e:
        launcher.start()
    assert time.monotonic() - start < 10  # at once, not at the connect timeout
    assert said in str(e.value) and "\n" not in str(e.value)
    assert wait_gone(launcher.pids()) == []


def test_a_plugin_game_in_human_mode_is_timed_out_with_its_log_and_ended(fake_binary, tmp_path):
    launcher = InstanceLauncher(
        godot_game("plain", program=fake_binary),
        LaunchOptions(extra_args=(*PLAIN, "--fake_mode=human_fallback"), run_dir=tmp_path, connect_timeout=1.5))
    with pytest.raises(InstanceStartError) as e:
        launcher.start()
    text = str(e.value)
    assert text.startswith("timed out after 1.5s waiting for instance 0")
    assert "plays in human mode" in text and "trying to connect to server" in text  # the hint, the log tail
    assert wait_gone(launcher.pids()) == []


def test_an_export_without_our_addon_is_one_game_named_after_its_binary(tmp_path):
    game = resolve_env(None, plain_export(tmp_path))
    assert game.env == "reach" and not game.rl_sync
    with pytest.raises(Exception, match="holds one game, named after its binary"):
        resolve_env("ball_chase", plain_export(tmp_path))


@pytest.mark.slow
def test_train_resume_envs_and_play_on_a_plain_export(tmp_path, capsys):
    export = plain_export(tmp_path)
    root = tmp_path / "runs"
    base = ["--env-path", str(export), "--num-instances", "2", "--num-steps", "32", "--eval-episodes", "2",
            "--checkpoint-every", "1", "--run-dir-root", str(root)]
    assert train.main([*base, "--total-timesteps", "256", "--action-repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "speaking godot_rl_agents' plugin protocol" in out and "--action_repeat=2" in out
    assert "eval: deterministic policy, 2 episodes" in out
    (run_dir,) = root.iterdir()
    saved = json.loads((run_dir / "args.json").read_text())
    assert saved["game_settings"] == {"dialect": GODOT_RL, "env_seed": [1, 2], "speedup": 1, "action_repeat": 2,
                                      "agents": [2, 2]}
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "512"]) == 0
    assert "global_step=512" in capsys.readouterr().out

    from python_trainer.tools.play import play_main

    assert cli.main(["play", str(run_dir)]) == 2  # in-engine playback needs our addon: one line says so
    err = capsys.readouterr().err.strip()
    assert "needs the rl_sync addon" in err and "--python" in err and "\n" not in err
    assert play_main([str(run_dir), "--python", "--seconds", "1"]) == 0

    assert envs_main(["--env-path", str(export)]) == 0
    out = capsys.readouterr().out
    assert "speaks:              godot_rl_agents' plugin protocol" in out
    assert "(fixed by the game: --agents does not change it)" in out  # the plugin never reads --agents
    assert cli.main(["train", "--env-path", str(export), "--watch", "--run-dir-root", str(root)]) == 2
    assert "--watch runs the policy inside the game, which needs the rl_sync addon" in capsys.readouterr().err


@pytest.mark.slow
def test_profile_measures_a_plain_game_from_outside(tmp_path, capsys):
    from python_trainer.tools.profile import command as profiling

    out = tmp_path / "profile"
    code = profiling.main(["--env-path", str(plain_export(tmp_path)), "--modes", "headless", "--instances", "1,2",
                           "--steps", "100", "--warmup-steps", "5", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    results = json.loads((out / "profile.json").read_text())["results"]
    assert [r["status"] for r in results] == ["ok", "ok"]
    for r in results:
        assert r["measured"].startswith("from outside") and r["stats_before"] is None
        assert r.get("engine_only_agent_steps_per_second") is None  # no --benchmark_steps in such a game
        assert r["agent_steps_per_second"] > 0
        assert r["physics_fps_per_instance"] == pytest.approx(r["round_trips_per_second"])  # action repeat 1
    assert results[1]["pipelined_agent_steps_per_second"] > 0
    assert "measured from outside" in (out / "profile.md").read_text()


class StrayPlainLauncher(InstanceLauncher):
    """Before the plain game connects (it waits a moment, as the plugin does), a local client connects to its port
    and says nothing, as a plain game does: only the peer check tells it from the game."""

    strays: list = []

    def _spawn(self, index, restarts):
        import socket

        inst = super()._spawn(index, restarts)
        self.strays.append(socket.create_connection(("127.0.0.1", inst.port)))
        return inst


def test_without_a_token_a_stray_client_is_still_refused(fake_binary, tmp_path):
    events = []
    launcher = StrayPlainLauncher(godot_game("plain", program=fake_binary), LaunchOptions(
        extra_args=PLAIN, run_dir=tmp_path, connect_timeout=20, report=quiet(events)))
    try:
        with launcher:
            assert launcher.instances[0].dialect == GODOT_RL and launcher.instances[0].conn.reset()
            assert [e for e in events if "is not the instance" in e] == events and len(events) == 1
            stray = StrayPlainLauncher.strays[0]
            stray.settimeout(5)
            try:  # refused: closed before a byte was sent to it (no handshake reached it)
                assert stray.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in StrayPlainLauncher.strays:
            s.close()
        StrayPlainLauncher.strays.clear()


def test_a_crashed_plain_game_is_restarted_in_its_dialect(fake_binary, tmp_path):
    events = []
    env = make_vec_env("plain", num_instances=2, binary=fake_binary, extra_args=(*PLAIN, "--fake_mode=crash_after=5"),
                       max_restarts=1, run_dir=tmp_path, report=quiet(events))
    try:
        env.reset()
        restarted = None
        for _ in range(6):
            obs, _, terminated, truncated, infos = env.step(env.action_space.sample())
            restarted = infos.get("_instance_restarted", restarted)
        assert restarted is not None and restarted.all()  # both instances crashed at step 6 and came back
        assert truncated.all() and not terminated.any()  # their episodes were cut short, not ended by the game
        assert all(inst.dialect == GODOT_RL and inst.restarts == 1 for inst in env.launcher.instances)
        assert any("crashing on purpose" in e for e in events)
    finally:
        env.close()
