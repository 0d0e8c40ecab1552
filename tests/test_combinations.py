"""The rules between variants (python_trainer/base/combinations.py): docs/training.md's matrix is the table's, and
the command says every refusal in the table, in one line, with the table's text; and each flag of train's that goes
only with another (base/flags.py's GoesWith, as the code declares them) is listed there and refused alone, in one line.

A rule checked on the flags runs the real command (`godot-ppo train ...`, in this process: refused before any game
starts, no run folder left); a rule checked on the game calls the check that says it with the game's facts (what the
game reports, stood in for), so no game starts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from python_trainer import cli
from python_trainer.base import combinations
from python_trainer.base.combinations import RULES, refusal
from python_trainer.base.errors import UserError
from python_trainer.base.flags import RULE, goes_with_fields, parse_flags
from python_trainer.envs.frame_stack import FrameStack
from python_trainer.envs.game import GameError
from python_trainer.envs.drivers import SCRIPTED_KEY
from python_trainer.envs.protocol import GODOT_RL
from python_trainer.normalization import bool_flag_aliases
from python_trainer.run import checks, learners
from python_trainer.run.train import Args
from python_trainer.run.training import TrainingRun
from python_trainer.tools import tune_space
from python_trainer.variants import engine_actors, opponents, self_play

TAG = {"n_agents": 2, "agent_policy_names": ["chaser", "runner"]}
CAMERA = SimpleNamespace(key="camera_2d", height=36, width=36)


def args_of(*argv: str):
    """`godot-ppo train ARGV`'s arguments, parsed as the command parses them."""
    return parse_flags(Args, bool_flag_aliases(list(argv)), "godot-ppo train", check=False)


def resumed(saved: dict, *argv: str):
    """The flags' checks (checks.check_args) of `godot-ppo train --resume runs/r ARGV` on a checkpoint whose run had
    the flags ``saved``."""
    checks.check_args(args_of("--resume", "runs/r", *argv), set(argv), {"args": saved})


def said(call) -> str:
    """The one line ``call`` refuses with."""
    with pytest.raises((UserError, GameError)) as refused:
        call()
    return str(refused.value)


# Each rule: (the command line that breaks it, the table's fields), for the real command; or a check called directly.
COMMANDS = {
    "self_play/ray": (["--self-play", "--ray-address", "local"], {}),
    "async/self_play": (["--async", "--self-play"], {}),
    "async/editor": (["--async", "--editor"], {}),
    "editor/game_flags": (["--editor", "--num-instances", "2"], {"flag": "--num-instances"}),
    "gym/watch": (["--watch"], {"env_id": "CartPole-v1"}),
    "gym/in_engine": (["--in-engine", "--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2"],
                      {"env_id": "CartPole-v1"}),
    "gym/self_play": (["--self-play", "--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2"],
                      {"env_id": "CartPole-v1"}),
}
CHECKS = {
    "in_engine/lstm": (lambda: engine_actors.decide(args_of("--in-engine", "--lstm")), {}),
    "in_engine/async_ray": (lambda: engine_actors.decide(args_of("--in-engine", "--async", "--ray-address", "local")),
                            {}),
    "in_engine/max_policy_lag": (lambda: engine_actors.decide(args_of("--in-engine", "--async", "--max-policy-lag",
                                                                      "2")), {}),
    "in_engine/editor": (lambda: engine_actors.decide(args_of("--in-engine", "--editor")), {}),
    "in_engine/frame_stack": (lambda: engine_actors.decide(args_of("--in-engine", "--frame-stack", "4")), {}),
    "in_engine/godot_rl": (lambda: engine_actors.decide(args_of("--in-engine"), SimpleNamespace(dialect=GODOT_RL)), {}),
    "in_engine/camera": (lambda: engine_actors.decide(args_of("--in-engine"), SimpleNamespace(image_layout=CAMERA)),
                         {}),
    "in_engine/old_export": (lambda: engine_actors.decide(args_of("--in-engine"), SimpleNamespace(
        image_layout=None, instance_env_infos=[{"n_agents": 1}])),
        {"which": "without in-engine actors (older than this trainer"}),
    "policies/ray": (lambda: learners._refuse_ray_policies(args_of("--env-id", "tag", "--ray-address", "local"),
                                                           TAG["agent_policy_names"]),
                     {"env_id": "tag", "names": "chaser, runner"}),
    "policies/async": (lambda: learners.policy_set_of(SimpleNamespace(env_info=TAG),
                                                      args_of("--env-id", "tag", "--async")),
                       {"env_id": "tag", "names": "chaser, runner"}),
    "policies/demos": (lambda: TrainingRun._clone(SimpleNamespace(
        args=args_of("--env-id", "tag", "--demos", "d.json"), first=None, learners=[1, 2],
        policy_set=SimpleNamespace(names=TAG["agent_policy_names"]))),
        {"env_id": "tag", "count": 2, "names": "chaser, runner"}),
    "policies/frame_stack": (lambda: FrameStack(SimpleNamespace(image_layout=CAMERA, policies={"a": 1, "b": 2},
                                                                env_id="tag"), 4), {"k": 4, "env_id": "tag"}),
    "policies/self_play": (lambda: self_play.teams_of(TAG, "tag"), {
        "env_id": "tag", "names": ["chaser", "runner"],
        "fix": "give both sides' controllers the same policy_name and set each one's team to 0 or 1 (pong does: "
               "docs/games.md), or drop --self-play"}),
    "no_camera/frame_stack": (lambda: FrameStack(SimpleNamespace(image_layout=None, env_id="ball_chase"), 4),
                              {"k": 4, "env_id": "ball_chase"}),
    "no_camera/cnn": (lambda: checks.check_images([SimpleNamespace(image_layout=None)],
                                                  args_of("--env-id", "ball_chase"), {"cnn"}, None),
                      {"env_id": "ball_chase"}),
    "camera/rnd": (lambda: checks.check_images([SimpleNamespace(image_layout=CAMERA)],
                                               args_of("--env-id", "forager", "--rnd"), set(), None),
                   {"env_id": "forager", "key": "camera_2d"}),
    "camera/demos": (lambda: checks.check_images([SimpleNamespace(image_layout=CAMERA)],
                                                 args_of("--env-id", "forager", "--demos", "d.json"), set(), None),
                     {"env_id": "forager", "key": "camera_2d"}),
    "resume/lstm": (lambda: resumed({}, "--lstm"), {"where": "--resume runs/r", "had": "no LSTM", "has": "with --lstm"}),
    "resume/lstm_size": (lambda: resumed({"lstm": True, "lstm_size": 64}, "--lstm", "--lstm-size", "32"),
                         {"where": "--resume runs/r", "saved": 64, "asked": 32}),
    "resume/rnd": (lambda: resumed({}, "--rnd"), {"where": "--resume runs/r", "asked": "--rnd", "had": "was trained "
                                                  "without --rnd (no RND networks or statistics)"}),
    "resume/frame_stack": (lambda: resumed({}, "--frame-stack", "4"), {"where": "--resume runs/r", "saved": 1,
                                                                         "asked": 4}),
    "resume/self_play": (lambda: resumed({}, "--self-play"), {"where": "--resume runs/r", "had": "without"}),
    "resume/cnn": (lambda: checks.check_images([SimpleNamespace(image_layout=CAMERA)], args_of(
        "--resume", "runs/r", "--env-id", "forager", "--cnn", "simple"), {"cnn"}, {"args": {"cnn": "nature"}}),
        {"where": "--resume runs/r", "saved": "nature", "asked": "simple"}),
    "resume/policies": (lambda: checks.check_policies([], SimpleNamespace(names=TAG["agent_policy_names"]), {"args": {}},
                                                      args_of("--env-id", "tag"), "runs/r"),
                        {"where": "--resume runs/r", "had": "one policy", "env_id": "tag",
                         "has": "the policies ['chaser', 'runner']"}),
    "resume/policy_names": (lambda: checks.check_policies([], SimpleNamespace(names=TAG["agent_policy_names"]),
                                                          {"policies": {"hunter": {}, "prey": {}}},
                                                          args_of("--env-id", "tag"), "runs/r"),
                            {"where": "--resume runs/r", "saved": ["hunter", "prey"], "env_id": "tag",
                             "now": ["chaser", "runner"]}),
    "opponents/godot_rl": (lambda: opponents.check_opponents(opponents.parse_opponents("pool:1,scripted:1"), {},
                                                             "plugin_game"),
                           {"kinds": "scripted", "env_id": "plugin_game"}),
    "opponents/no_scripted": (lambda: opponents.check_opponents(opponents.parse_opponents("scripted:1"),
                                                                {SCRIPTED_KEY: [True, False]}, "pong"),
                              {"env_id": "pong"}),
    "tune/tune_sets": (lambda: tune_space._name("--space s.toml", "seed", {"seed"}),
                       {"label": "--space s.toml", "key": "seed"}),
}


def test_every_rule_in_the_table_has_a_case_here_and_every_case_a_rule():
    assert sorted(RULES) == sorted({**COMMANDS, **CHECKS})


def test_the_variant_matrix_in_the_training_page_is_the_one_the_table_prints():
    page = combinations.DOCS.read_text(encoding="utf-8")
    assert page == combinations.with_matrix(page, Args), (
        "docs/training.md's variant matrix is not the table's: run .venv/bin/python -m "
        "python_trainer.tools.variant_matrix --write-docs")
    section = page.split(combinations.BEGIN)[1].split(combinations.END)[0]
    for number, key in enumerate(RULES, 1):  # every rule's line is in it, numbered as in the matrix
        assert f"\n{number}. " in section, key
    for name, goes_with in GOES_WITH:  # and every flag that goes only with another, with its refusal
        assert f"\n- `--{name.replace('_', '-')}`: {goes_with.refusal(name)}\n" in section, name


@pytest.mark.parametrize("key", sorted(COMMANDS))
def test_the_train_command_refuses_a_combination_of_flags_in_the_tables_one_line(key, tmp_path, capsys):
    argv, fields = COMMANDS[key]
    status = cli.main(["train", *argv, "--run-dir-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err
    assert len(err) == 1 and err[0].endswith(refusal(key, **fields)), err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("key", sorted(CHECKS))
def test_the_check_of_a_rule_refuses_it_in_the_tables_one_line(key):
    call, fields = CHECKS[key]
    line = said(call)
    assert line == refusal(key, **fields)
    assert "\n" not in line
    assert any(fix in line for fix in ("drop", "re-export", "start a new run", "give", "implement")), line  # the fix


GOES_WITH = goes_with_fields(Args)  # every flag of train's that goes only with another, as the code declares them


def a_value_of(name: str) -> list:
    """The words after the flag of field ``name``: its rule's example, else its default (else any word); none for a
    switch."""
    field = Args.__dataclass_fields__[name]
    rule = field.metadata.get(RULE)
    if field.default is False:
        return []
    return [rule.example if rule is not None else str(field.default) if field.default is not None else "x"]


def test_train_declares_flags_that_go_only_with_another():
    assert {"port", "max_policy_lag", "ray_workers", "opponents", "bc_epochs"} <= {name for name, _ in GOES_WITH}


@pytest.mark.parametrize("name, goes_with", GOES_WITH, ids=[name for name, _ in GOES_WITH])
def test_the_train_command_refuses_a_flag_given_without_the_one_it_goes_with_in_one_line_naming_the_fix(
        name, goes_with, tmp_path, capsys):
    flag = "--" + name.replace("_", "-")
    status = cli.main(["train", flag, *a_value_of(name), "--run-dir-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err
    assert len(err) == 1 and err[0].endswith(goes_with.refusal(name)), err
    assert f"add {goes_with.add}, or drop {flag}" in err[0]  # the fix: the flag it goes with, or none
    assert not (tmp_path / "runs").exists()


def test_an_lstm_batch_that_does_not_split_into_whole_envs_is_refused_in_one_line_before_any_run_folder(tmp_path,
                                                                                                        capsys):
    status = cli.main(["train", "--lstm", "--num-envs", "6", "--num-steps", "8", "--num-minibatches", "4",
                       "--run-dir-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].endswith("--lstm minibatches hold whole envs: 6 envs do not split into --num-minibatches 4; use a "
                           "--num-minibatches that divides 6"), err
    assert not (tmp_path / "runs").exists()
