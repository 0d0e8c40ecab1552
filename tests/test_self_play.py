"""--self-play (python_trainer/variants/self_play.py): pong's learning team against a pool of its own snapshots, with Elo.

A few updates of pong with small save / swap / team-change counts check the pool (files in the run folder, the window
kept), the ratings (self_play/elo in TensorBoard, each match moving the learner's and the opponent's ratings by the same
amount), the sides changing, and --resume continuing all of it; games that are not two teams of one policy, a pool
that is gone, and self-play flags without --self-play are refused in one line. Whether it learns to win is
scripts/bench_self_play.py's.
"""

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import REPO, event_accumulator, wait_gone
from python_trainer import cli
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer
from python_trainer.run import train
from python_trainer.variants.self_play import (
    POOL_DIR, SelfPlayError, SelfPlayRollouts, elo_update, expected_score, teams_of,
)
from python_trainer.variants.trained_agent import make_agent

OBS = {"obs": {"size": [3], "space": "box"}}


def test_elo_moves_both_ratings_by_the_same_amount():
    assert expected_score(1200, 1200) == 0.5 and expected_score(1600, 1200) == pytest.approx(1 / (1 + 10**-1))
    learner, opponent = elo_update(1200.0, 1200.0, 1.0)
    assert (learner, opponent) == (1208.0, 1192.0)  # K = 16, E = 0.5
    learner, opponent = elo_update(1400.0, 1200.0, 0.5)  # a draw against a weaker opponent costs the stronger one
    assert learner < 1400 and learner + opponent == pytest.approx(2600)


@pytest.mark.parametrize("names, teams, said", [
    (["a", "b"], [0, 1], "agents play the policies ['a', 'b']"),
    (["p", "p"], None, "reports no agent_teams"),
    (["p", "p"], [-1, -1], "reports the teams ['-1']"),
    (["p", "p", "p"], [0, 1, 1], "put 1 in team 0 and 2 in team 1: set their team so that both teams have as many "
                                 "agents (with an odd number of agents no split is even: use an even "
                                 "--agents-per-instance)"),
    (["p"] * 4, [0, 0, 0, 1], "put 3 in team 0 and 1 in team 1: set their team so that both teams have as many agents"),
])
def test_a_game_that_is_not_two_teams_of_one_policy_is_refused_in_one_line(names, teams, said):
    info = {"n_agents": len(names), "agent_policy_names": names, "agent_teams": teams}
    with pytest.raises(SelfPlayError, match=re.escape(said)) as e:
        teams_of(info, "game")
    assert "\n" not in str(e.value)
    if len(names) % 2 == 0:  # an even count that the game splits unevenly: the flag is not the fix
        assert "--agents-per-instance" not in str(e.value)


@pytest.mark.slow
def test_pong_self_play_keeps_its_pool_elo_and_sides_across_a_resume(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    flags = ["--env-id", "pong", "--self-play", "--num-steps", "64", "--agents-per-instance", "8",
             "--self-play-save-steps", "256", "--self-play-swap-steps", "512", "--self-play-window", "3",
             "--self-play-team-change", "1024", "--checkpoint-every", "1", "--eval-episodes", "2",
             "--run-dir-root", str(root)]
    assert train.main([*flags, "--total-timesteps", "2048"]) == 0  # 8 updates of 4 learner agents x 64 steps
    (run_dir,) = root.iterdir()
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert state["steps"] == 2048
    assert [p["step"] for p in state["pool"]] == [1536, 1792, 2048]  # a snapshot every 256 steps; the newest 3 kept
    kept = {p["file"] for p in state["pool"]} | {state["opponent"]["file"]}  # the pool, and the snapshot playing
    assert sorted(p.name for p in (run_dir / "self_play").iterdir()) == sorted(kept)
    # the sides change before a rollout once the count is reached: before update 5 (1024 steps done)
    assert state["learning_team"] == 1 and state["last_team_change"] == 1024
    events = event_accumulator(run_dir)
    elo = [e.value for e in events.Scalars("self_play/elo")]
    teams = [e.value for e in events.Scalars("self_play/learning_team")]
    assert len(elo) == 8 and state["elo"] == pytest.approx(elo[-1]) and len(set(elo)) > 1  # matches moved it
    assert teams[:4] == [0, 0, 0, 0] and teams[4:] == [1, 1, 1, 1]
    assert "charts/episodic_return" in events.Tags()["scalars"]  # the learner's episodes, as for any run

    assert train.main(["--resume", str(run_dir), "--total-timesteps", "2560"]) == 0
    resumed = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert resumed["steps"] == 2560 and resumed["learning_team"] == 0  # 2048 - 1024 >= 1024: back to team 0
    assert [p["step"] for p in resumed["pool"]] == [2048, 2304, 2560]  # the pool went on from the checkpoint's
    capsys.readouterr()

    (run_dir / "self_play" / resumed["pool"][0]["file"]).write_bytes(b"not a snapshot")  # one line, nothing runs
    assert cli.main(["train", "--resume", str(run_dir), "--total-timesteps", "3072"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"the self-play pool's snapshot {run_dir / 'self_play' / resumed['pool'][0]['file']} cannot be read" in err
    assert "move it out of" in err and "\n" not in err
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"] == resumed  # nothing saved altered


@pytest.mark.parametrize("flags, said", [
    (["--env-id", "tag", "--self-play"], "--self-play needs a game whose agents play one policy in two teams; tag's "
                                         "agents play the policies ['chaser', 'runner']"),
    (["--env-id", "ball_chase", "--self-play"], "--self-play needs a game whose agents are split into teams 0 and 1"),
    (["--env-id", "pong", "--self-play-window", "3"], "--self-play-window is for self-play: add --self-play, or drop --self-play-window"),
    (["--env-id", "CartPole-v1", "--self-play"], "CartPole-v1 is a gymnasium env: drop --self-play"),
])
def test_self_play_is_refused_where_it_cannot_run(headless_export, tmp_path, capsys, flags, said):
    assert cli.main(["train", *flags, "--run-dir-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err
    assert not list(tmp_path.iterdir())  # no run folder left behind


# ---------------------------------------------------------------------------------------------- the pool's files
class _TwoTeams:
    """What SelfPlayRollouts reads of its base rollouts: a game of two agents, one policy, teams 0 and 1."""

    envs = game_settings = pipeline = image_layout = None
    agents_per_instance = 2
    env_info = {"n_agents": 2, "agent_policy_names": ["p", "p"], "agent_teams": [0, 1]}
    single_observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    single_action_space = gym.spaces.Discrete(3)


def pool_of(run_dir, **flags):
    """SelfPlayRollouts over _TwoTeams, and a learner (agent, normaliser) of its flags."""
    args = train.Args(env_id="duel", self_play=True, **flags)
    pool = SelfPlayRollouts(_TwoTeams(), args, run_dir)
    pool._opp_raw_obs = np.zeros((1, 3), np.float32)
    return pool, make_agent(3, _TwoTeams.single_action_space, asdict(args)), Normalizer(3, 1, 0.99, False, False)


def files(run_dir) -> list:
    return sorted(p.name for p in (run_dir / POOL_DIR).iterdir())


def snap(step: int) -> str:
    return f"snapshot_{step:012d}.pt"


def test_the_playing_snapshot_keeps_playing_its_rating_and_its_file_when_a_trim_drops_it(tmp_path):
    pool, agent, normalizer = pool_of(tmp_path, self_play_window=1)
    pool._snapshot(agent, normalizer)
    pool._play(pool.pool[-1], agent, normalizer)
    pool.playing["elo"] = 1100.0  # rated by its matches
    for step in (256, 512):  # two snapshots before the next swap: the window of 1 drops the one playing
        pool.steps = step
        pool._snapshot(agent, normalizer)
    assert [p["step"] for p in pool.pool] == [512] and pool.playing["step"] == 0
    assert pool.scalars()["self_play/opponent_elo"] == 1100.0  # its own rating, not another snapshot's
    assert pool.state_dict()["opponent"] == {"file": snap(0), "elo": 1100.0, "step": 0}
    assert files(tmp_path) == [snap(0), snap(512)]  # it plays: its file stays (a resume reloads it)
    pool._play(pool.pool[-1], agent, normalizer)  # the swap: now it can go
    assert files(tmp_path) == [snap(512)]


def test_a_trim_keeps_every_snapshot_the_last_checkpoint_lists_until_the_next_is_written(tmp_path):
    pool, agent, normalizer = pool_of(tmp_path, self_play_window=2)
    for step in (0, 256):
        pool.steps = step
        pool._snapshot(agent, normalizer)
    pool._play(pool.pool[-1], agent, normalizer)
    listed = pool.state_dict()
    pool.checkpoint_saved()  # the checkpoint on disk lists 0 and 256
    for step in (512, 768, 1024):  # the pool moves on past everything it lists
        pool.steps = step
        pool._snapshot(agent, normalizer)
    pool._play(pool.pool[-1], agent, normalizer)
    assert {snap(0), snap(256)} <= set(files(tmp_path))  # a SIGKILL now resumes from that checkpoint
    assert snap(512) not in files(tmp_path)  # no checkpoint lists it: gone at once
    resumed, _, _ = pool_of(tmp_path, self_play_window=2)
    resumed.load_state_dict(listed)
    assert [p["file"] for p in resumed.pool] == [snap(0), snap(256)] and resumed.playing is resumed.pool[-1]
    pool.state_dict()
    pool.checkpoint_saved()  # the next checkpoint is written: what only the old one listed goes
    assert files(tmp_path) == [snap(768), snap(1024)]


def test_a_resume_goes_on_without_listed_snapshots_that_are_gone(tmp_path, capsys):
    pool, agent, normalizer = pool_of(tmp_path)
    for step in (0, 256, 512):
        pool.steps = step
        pool._snapshot(agent, normalizer)
    pool._play(pool.pool[0], agent, normalizer)
    state = pool.state_dict()
    (tmp_path / POOL_DIR / snap(0)).unlink()  # the one playing, and another
    (tmp_path / POOL_DIR / snap(256)).unlink()
    resumed, _, _ = pool_of(tmp_path)
    resumed.load_state_dict(state)
    assert [p["file"] for p in resumed.pool] == [snap(512)] and resumed.playing is None  # the newest plays next
    err = capsys.readouterr().err.strip()
    assert err.startswith("note: --resume: 2 of the self-play pool's snapshots that the checkpoint lists are gone")
    assert "the pool goes on without them" in err and "\n" not in err


@pytest.mark.parametrize("problem, said", [
    ("garbage", "cannot be read as a snapshot (UnpicklingError)"),
    ("other_game", "is of 'pong' with other spaces, not of duel as it runs now"),
    ("lstm", "holds another network than this run's (a run with other --lstm, --lstm-size or --rnd flags made it)"),
])
def test_a_resume_refuses_a_pool_snapshot_that_is_not_this_runs_in_one_line(tmp_path, problem, said):
    pool, agent, normalizer = pool_of(tmp_path)
    pool._snapshot(agent, normalizer)
    state = pool.state_dict()
    path = tmp_path / POOL_DIR / snap(0)
    if problem == "garbage":
        path.write_bytes(b"\x00" * 64)
    else:  # another run's snapshot put in its place: another game's, or an --lstm run's
        other, other_agent, _ = pool_of(tmp_path, lstm=problem == "lstm")
        other.env_id = "pong" if problem == "other_game" else other.env_id
        other._snapshot(other_agent, normalizer)
    resumed, _, _ = pool_of(tmp_path)
    with pytest.raises(SelfPlayError) as e:
        resumed.load_state_dict(state)
    assert str(e.value) == (f"--resume: the self-play pool's snapshot {path} {said}: move it out of "
                            f"{tmp_path / POOL_DIR} and resume again (the pool goes on without it), or start a new run")


def test_a_snapshot_that_cannot_be_read_during_training_leaves_the_pool_with_a_warning(tmp_path, capsys):
    pool, agent, normalizer = pool_of(tmp_path)
    for step in (0, 256):
        pool.steps = step
        pool._snapshot(agent, normalizer)
    (tmp_path / POOL_DIR / snap(256)).write_bytes(b"")  # broken under the running trainer
    pool._play(pool.pool[-1], agent, normalizer)
    assert pool.playing["file"] == snap(0) and [p["step"] for p in pool.pool] == [0]
    err = capsys.readouterr().err.strip()
    assert f"warning: self-play: the pool's snapshot {tmp_path / POOL_DIR / snap(256)} cannot be read" in err
    assert "\n" not in err


KILLED_AT_COLLECT = """
import json, os, signal, sys
import psutil
from python_trainer.run import train
from python_trainer.variants import self_play

collect = self_play.SelfPlayRollouts.collect


def killed(self, *args, **kwargs):  # SIGKILL (the OOM killer, a power cut) once the pool moved on from the checkpoint
    collect(self, *args, **kwargs)
    if self.steps >= int(os.environ["KILL_AT"]):
        print(json.dumps({"pids": [p.pid for p in psutil.Process().children(recursive=True)]}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


self_play.SelfPlayRollouts.collect = killed
sys.exit(train.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_run_killed_after_its_pool_moved_on_resumes_with_a_window_of_one(headless_export, tmp_path, capsys):
    # a window of 1 and a snapshot every update: before, the second update crashed (IndexError) and so did a resume
    root = tmp_path / "runs"
    flags = ["--env-id", "pong", "--self-play", "--num-steps", "64", "--agents-per-instance", "8",
             "--self-play-window", "1", "--self-play-save-steps", "256", "--self-play-swap-steps", "768",
             "--checkpoint-every", "3", "--eval-episodes", "0", "--run-dir-root", str(root)]
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_COLLECT, *flags, "--total-timesteps", "2560"], cwd=REPO,
                            env=dict(os.environ, KILL_AT="1536"), capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    (pids,) = [json.loads(line)["pids"] for line in killed.stdout.splitlines() if line.startswith('{"pids"')]
    left = wait_gone(pids, timeout=10)  # its game ends with its connection
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert pids and left == []
    (run_dir,) = root.iterdir()
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert state["steps"] == 768 and [p["step"] for p in state["pool"]] == [768]  # 3 snapshots later it was killed
    assert {snap(768), state["opponent"]["file"]} <= set(files(run_dir))  # what the checkpoint lists is there

    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    resumed = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert resumed["steps"] == 2560 and [p["step"] for p in resumed["pool"]] == [2560]
    assert files(run_dir) == sorted({snap(2560), resumed["opponent"]["file"]})  # the killed run's extra files went


def test_self_play_learns_on_every_instances_agents(headless_export, tmp_path, capsys):
    # pong's 16 paddles per instance, 2 instances: team 0 is 8 paddles in each, 16 in all (before, instance 0's 8
    # learned and instance 1's steps were thrown away: 8 x 16 = 128 learner steps per update)
    root = tmp_path / "runs"
    assert train.main(["--env-id", "pong", "--num-instances", "2", "--self-play", "--num-steps", "16",
                       "--total-timesteps", "256", "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "self-play: team 0 learns (16 agents)" in out, out
    (run_dir,) = root.iterdir()
    assert [e.step for e in event_accumulator(run_dir).Scalars("self_play/elo")] == [256]  # one update of 16 x 16
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]["steps"] == 256


# ---------------------------------------------------------------------------------------------- in the engine
def test_in_the_engine_each_team_samples_its_own_routes_network_across_a_change_of_sides(headless_export, tmp_path):
    """pong, 1 instance x 4 paddles in the engine with the "logprob" test switch: the learner's team samples the
    learner's weights and the other team the snapshot's (the learner drifts from it after each update), each buffer
    holding the log-probs the game computed for its team to 1e-5, before and after the sides change; each buffer's
    episodes are its team's ended ones."""
    from python_trainer.envs.vec_env import make_vec_env
    from python_trainer.run.learners import engine_rollouts
    from python_trainer.variants.self_play import self_play_rollouts

    envs = make_vec_env("pong", num_instances=1, agents_per_instance=4, run_dir=str(tmp_path), seed=3)
    args = train.Args(env_id="pong", self_play=True, num_steps=64, seed=5, self_play_team_change=128)
    rollouts = engine_rollouts(envs, args, tmp_path, "test", logprob=True)
    try:
        sp = self_play_rollouts(rollouts, args, tmp_path)
        d = sp.single_observation_space.shape[0]
        torch.manual_seed(0)
        agent = make_agent(d, sp.single_action_space, asdict(args))
        normalizer = Normalizer(d, sp.num_envs, 0.99, True, True)
        buf = RolloutBuffer(64, sp.num_envs, d, agent)
        sp.reset(normalizer, buf, seed=3)
        teams, ended = [], 0
        for _ in range(3):
            sp.collect(agent, normalizer, buf)
            opp_buf = sp._opp[2]
            teams.append(sp.learning_team)
            np.testing.assert_allclose(buf.logprobs, rollouts.game_logprobs["learner"], atol=1e-5, rtol=0)
            np.testing.assert_allclose(opp_buf.logprobs, rollouts.game_logprobs["opponent"], atol=1e-5, rtol=0)
            for b in (buf, opp_buf):
                episodes = sum(int(infos["_episode"].sum()) for _, infos in b.episodes)
                assert episodes == int((b.terminated | b.truncated).sum())
                ended += episodes
            with torch.no_grad():  # an update's worth of drift: the snapshot no longer equals the learner
                for p in agent.parameters():
                    p.add_(0.05 * torch.randn_like(p))
        assert teams == [0, 1, 0] and ended > 0  # 2 paddles x 64 steps a rollout: the sides swap before each next one
        assert not np.allclose(buf.logprobs, opp_buf.logprobs)
    finally:
        rollouts.close()


def test_pong_self_play_runs_in_the_engine_with_its_pool_swaps_and_elo(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    assert train.main(["--env-id", "pong", "--self-play", "--in-engine", "--num-steps", "32", "--agents-per-instance",
                       "8", "--self-play-save-steps", "128", "--self-play-swap-steps", "256", "--self-play-window", "3",
                       "--total-timesteps", "768", "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "actors: in the engine (--in-engine)" in out and "self-play: team 0 learns (4 agents)" in out, out
    (run_dir,) = root.iterdir()
    assert json.loads((run_dir / "args.json").read_text())["in_engine"] is True
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert state["steps"] == 768 and [p["step"] for p in state["pool"]] == [512, 640, 768]  # every 128, newest 3
    assert state["last_swap"] == 512  # swapped at 256 and 512 learner steps
    events = event_accumulator(run_dir)
    elo = [e.value for e in events.Scalars("self_play/elo")]
    assert len(elo) == 6 and len(set(elo)) > 1  # the learner's matches against the pool moved it
    assert [e.step for e in events.Scalars("losses/value_loss")] == [128 * k for k in range(1, 7)]  # it trained


def test_pong_trains_in_the_engine_against_its_scripted_paddle_which_the_game_drives(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    assert train.main(["--env-id", "pong", "--self-play", "--in-engine", "--opponents", "scripted:1",
                       "--agents-per-instance", "8", "--num-steps", "16", "--total-timesteps", "128",
                       "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "actors: in the engine (--in-engine)" in out and "self-play: team 0 learns (4 agents)" in out, out
    (run_dir,) = root.iterdir()
    events = event_accumulator(run_dir)
    # 2 fragments of 16 steps: the game chose every action of the other team's 4 paddles in actor mode
    assert [e.value for e in events.Scalars("self_play/game_actions")] == [64.0, 128.0]
    assert [e.value for e in events.Scalars("self_play/opponent_is_pool")] == [0.0, 0.0]
    assert [e.value for e in events.Scalars("self_play/elo")] == [1200.0, 1200.0]
