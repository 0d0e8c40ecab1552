"""--self-play --opponents (python_trainer/variants/opponents.py): the learning team against a mix of the pool, the
game's scripted opponent, random play and policy files, the last three played by the game itself through the
"drivers" message (python_trainer/envs/drivers.py, godot_project/addons/rl_sync/driver_message.gd)."""

import re
from dataclasses import asdict

import numpy as np
import pytest

from helpers import REPO, event_accumulator
from python_trainer import cli
from python_trainer.base import contract
from python_trainer.base.errors import UserError
from python_trainer.envs import drivers
from python_trainer.normalization import Normalizer
from python_trainer.run import train
from python_trainer.variants.opponents import POOL, check_opponents, draw_opponent, parse_opponents
from python_trainer.variants.self_play import SelfPlayRollouts
from python_trainer.variants.trained_agent import make_agent
from test_self_play import _TwoTeams

DRIVER_GD = REPO / "godot_project" / "addons" / "rl_sync" / "driver_message.gd"


def test_the_drivers_message_is_declared_alike_in_python_and_in_gdscript():
    kinds = {f"Contract.MSG_{kind.upper()}": kind for kind in contract.MESSAGES}  # the contract's message kinds
    consts = {n: kinds.get(v, v.strip('"'))
              for n, v in re.findall(r'^const (\w+) := ("[^"]*"|Contract\.MSG_\w+)', DRIVER_GD.read_text(), re.M)}
    names = ["MESSAGE", "AGENTS_KEY", "DRIVER_KEY", "PATH_KEY", "SEED_KEY", "ACTED_KEY", "TRAINER", "SCRIPTED",
             "RANDOM", "POLICY"]  # (and SCRIPTED_KEY, env_info's: the contract's, held by tests/test_contract.py)
    assert {n: consts.get(n) for n in names} == {n: getattr(drivers, n) for n in names}
    listed = re.search(r"^const DRIVERS := \[(.*)\]", DRIVER_GD.read_text(), re.M).group(1)
    assert tuple(consts[n.strip()] for n in listed.split(",")) == drivers.DRIVERS


def test_the_shares_are_normalised_and_both_kinds_are_drawn_over_several_swaps():
    opponents = parse_opponents("scripted:0.5,pool:0.5")
    assert opponents == [("scripted", None, 0.5), ("pool", None, 0.5)]
    assert parse_opponents("file=/a/b.json:1,pool:3") == [("policy", "/a/b.json", 0.25), ("pool", None, 0.75)]
    rng = np.random.default_rng(1)
    draws = [draw_opponent(opponents, rng)[0] for _ in range(400)]
    assert 150 < draws.count("scripted") < 250 and draws.count("scripted") + draws.count(POOL) == 400
    alone, state = np.random.default_rng(1), np.random.default_rng(1).bit_generator.state
    assert draw_opponent(parse_opponents("pool:1"), alone) == (POOL, None) and alone.bit_generator.state == state


@pytest.mark.parametrize("value", ["bogus:1", "pool", "pool:-1", "pool:0,scripted:0", "file=:1"])
def test_a_bad_opponents_value_is_refused_in_one_line_before_any_game_starts(tmp_path, capsys, value):
    assert cli.main(["train", "--env-id", "pong", "--self-play", "--opponents", value,
                     "--run-dir-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--opponents {value} is not valid" in err and "\n" not in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("info, said", [
    ({"agent_scripted": [True, False]}, "--opponents scripted: duel's controllers define no get_scripted_action()"),
    ({}, "--opponents random/scripted: duel does not say which of its agents the game can drive"),
])
def test_a_game_without_get_scripted_action_refuses_scripted_in_one_line(info, said):
    with pytest.raises(UserError) as e:
        check_opponents(parse_opponents("scripted:1,random:1,pool:1"), info, "duel")
    assert said in str(e.value) and "\n" not in str(e.value)
    check_opponents(parse_opponents("pool:1"), {}, "duel")  # the pool alone needs nothing of the game


def test_matches_against_an_opponent_the_game_plays_leave_the_elo_alone(tmp_path):
    args = train.Args(env_id="duel", self_play=True)
    pool = SelfPlayRollouts(_TwoTeams(), args, tmp_path)
    pool._opp_raw_obs = np.zeros((1, 3), np.float32)
    pool._snapshot(make_agent(3, _TwoTeams.single_action_space, asdict(args)), Normalizer(3, 1, 0.99, False, False))
    pool.playing = pool.pool[-1]
    won = [(None, {"_episode": np.array([True]), "episode": {"r": np.array([1.0])}})]
    pool.opponent = ("scripted", None)
    pool._count_matches(won)
    assert pool.elo == 1200.0 and pool.playing["elo"] == 1200.0 and pool.wins == 1
    pool.opponent = (POOL, None)
    pool._count_matches(won)
    assert pool.elo > 1200.0 > pool.playing["elo"]


def test_pong_trains_against_its_scripted_paddle_which_the_game_plays(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    assert train.main(["--env-id", "pong", "--self-play", "--opponents", "scripted:1", "--num-steps", "16",
                       "--total-timesteps", "256", "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    assert "self-play: team 0 learns (8 agents)" in capsys.readouterr().out
    (run_dir,) = root.iterdir()
    events = event_accumulator(run_dir)
    # 2 updates of 8 learner paddles x 16 steps: the game chose every action of the other 8 paddles, and the
    # learner's buffer (128 samples an update) held only its own team
    assert [e.value for e in events.Scalars("self_play/game_actions")] == [128.0, 256.0]
    assert [e.value for e in events.Scalars("self_play/opponent_is_pool")] == [0.0, 0.0]
    assert [e.value for e in events.Scalars("self_play/elo")] == [1200.0, 1200.0]  # no pool match was played
