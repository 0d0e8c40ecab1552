"""--self-play (python_trainer/variants/self_play.py): pong's learning team against a pool of its own snapshots, with Elo.

A few updates of pong with small save / swap / team-change counts check the pool (files in the run folder, the window
kept), the ratings (self_play/elo in TensorBoard, each match moving the learner's and the opponent's ratings by the same
amount), the sides changing, and --resume continuing all of it; games that are not two teams of one policy, a pool
that is gone, and self-play flags without --self-play are refused in one line. Whether it learns to win is
scripts/bench_self_play.py's.
"""

import re

import pytest
import torch

from helpers import event_accumulator
from python_trainer import cli
from python_trainer.run import train
from python_trainer.variants.self_play import SelfPlayError, elo_update, expected_score, teams_of

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
    (["p", "p", "p"], [0, 1, 1], "1 in team 0 and 2 in team 1"),
])  # fmt: skip
def test_a_game_that_is_not_two_teams_of_one_policy_is_refused_in_one_line(names, teams, said):
    info = {"n_agents": len(names), "agent_policy_names": names, "agent_teams": teams}
    with pytest.raises(SelfPlayError, match=re.escape(said)) as e:
        teams_of(info, "game")
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_pong_self_play_keeps_its_pool_elo_and_sides_across_a_resume(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    flags = ["--env-id", "pong", "--self-play", "--num-steps", "64", "--agents-per-instance", "8",
             "--self-play-save-steps", "256", "--self-play-swap-steps", "512", "--self-play-window", "3",
             "--self-play-team-change", "1024", "--checkpoint-every", "1", "--eval-episodes", "2",
             "--run-dir-root", str(root)]  # fmt: skip
    assert train.main([*flags, "--total-timesteps", "2048"]) == 0  # 8 updates of 4 learner agents x 64 steps
    (run_dir,) = root.iterdir()
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)["rollouts"]
    assert state["steps"] == 2048
    assert [p["step"] for p in state["pool"]] == [1536, 1792, 2048]  # a snapshot every 256 steps; the newest 3 kept
    assert sorted(p.name for p in (run_dir / "self_play").iterdir()) == [p["file"] for p in state["pool"]]
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

    (run_dir / "self_play" / resumed["pool"][0]["file"]).unlink()  # a pool that is gone: one line, nothing runs
    assert cli.main(["train", "--resume", str(run_dir), "--total-timesteps", "3072"]) == 2
    err = capsys.readouterr().err.strip()
    assert "the self-play pool's snapshot" in err and "cannot be read" in err and "\n" not in err


@pytest.mark.parametrize("flags, said", [
    (["--env-id", "tag", "--self-play"], "--self-play needs a game whose agents play one policy in two teams; tag's "
                                         "agents play the policies ['chaser', 'runner']"),
    (["--env-id", "ball_chase", "--self-play"], "--self-play needs a game whose agents are split into teams 0 and 1"),
    (["--env-id", "pong", "--self-play-window", "3"], "--self-play-window is for self-play: add --self-play, or drop --self-play-window"),
    (["--env-id", "CartPole-v1", "--self-play"], "CartPole-v1 is a gymnasium env: drop --self-play"),
])  # fmt: skip
def test_self_play_is_refused_where_it_cannot_run(headless_export, tmp_path, capsys, flags, said):
    assert cli.main(["train", *flags, "--run-dir-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err
    assert not list(tmp_path.iterdir())  # no run folder left behind
