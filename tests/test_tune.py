"""`godot-ppo tune` (Optuna over `godot-ppo train` children) and `train --config FILE`: a search writes its study,
trials and best.toml, goes on from its SQLite file after an interruption, and `train --config best.toml` trains the
best trial's flags. The searches use the fake game (tests/fake_game.py) or CartPole with tiny budgets."""

import json
import signal
import subprocess
import sys

import pytest

from helpers import (REPO, fake_export, godot_ppo_child, processes_mentioning, read_line, read_scalars, run_dirs,
                     train_run, wait_gone)

optuna = pytest.importorskip("optuna")

# trial_steps 1024: a trial's batch is at most 512 (16 agents per instance of the fake game: at most 32 steps)
FAKE_SPACE = """
[search]
num_instances = [1, 2]
num_steps = [16, 32, 64]
num_minibatches = [1, 2]
update_epochs = 1
action_repeat = [1, 2]
"""
TUNE_SETS = ("total_timesteps", "seed", "eval_every", "run_dir_root", "exp_name", "resume")


def tune(out, *flags, timeout=300):
    result = godot_ppo_child("tune", "--out", str(out), *flags, timeout=timeout)
    assert result.returncode == 0, f"tune failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def study_trials(out):
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}")
    return study.trials


def args_json(run_dir):
    return json.loads((run_dir / "args.json").read_text())


@pytest.fixture(scope="module")
def fake_search(tmp_path_factory):
    """A search of two trials on the fake game (an 'export' of it), its space narrowed by a space file."""
    root = tmp_path_factory.mktemp("tune")
    game = fake_export(root / "fake.x86_64")
    space = root / "space.toml"
    space.write_text(FAKE_SPACE)
    out = root / "search"
    result = tune(out, "--env-path", str(game), "--space", str(space), "--n-trials", "2", "--trial-steps", "1024",
                  "--evaluations", "0")
    return out, result


def test_a_search_of_two_trials_writes_its_study_its_trials_run_folders_and_the_best_config(fake_search):
    out, result = fake_search
    assert (out / "study.db").is_file()
    trials = study_trials(out)
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["trial_0000", "trial_0001"]
    for t in trials:  # each trial trained in its own run folder, its batch at most half of --trial-steps
        (run_dir,) = run_dirs(out / "trials" / f"trial_{t.number:04d}")
        saved = args_json(run_dir)
        assert saved["total_timesteps"] == 1024 and saved["batch_size"] <= 512
        assert {k: saved[k] for k in t.user_attrs["flags"]} == t.user_attrs["flags"]
    assert [p.name for p in out.rglob("*.toml")] == ["best.toml"]
    best = (out / "best.toml").read_text()
    assert 'env_id = "ball_chase"' in best and "env_path = " in best and "learning_rate = " in best
    assert not any(f"\n{key} =" in best for key in TUNE_SETS)
    assert "godot-ppo train --env-id ball_chase --env-path " in result.stdout.split("best: trial")[1]


def test_train_config_reproduces_the_best_trials_flags(fake_search, tmp_path):
    out, _ = fake_search
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}")
    (best_dir,) = run_dirs(out / "trials" / f"trial_{study.best_trial.number:04d}")
    run_dir = train_run(tmp_path, "--config", str(out / "best.toml"), "--total-timesteps", "512")
    best, again = args_json(best_dir), args_json(run_dir)
    for key in study.best_trial.user_attrs["flags"] | {"env_id": 0, "env_path": 0}:
        assert again[key] == best[key], key
    assert again["total_timesteps"] == 512


def test_an_interrupted_search_goes_on_from_its_sqlite_file(tmp_path):
    out = tmp_path / "search"
    flags = ["--env-id", "CartPole-v1", "--trial-steps", "1024", "--n-trials", "1"]
    cmd = [sys.executable, "-m", "python_trainer", "tune", "--out", str(out), *flags]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        read_line(proc, b"trial 0: ", timeout=120)  # its train has started
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "the same command goes on with it" in err.decode()
    assert wait_gone(processes_mentioning(str(out))) == []  # the trial's train was stopped with it
    assert [t.state.name for t in study_trials(out)] == ["FAIL"]
    result = tune(out, *flags)  # the same command: the search goes on from study.db
    assert "0 trials finished, 1 to run" in result.stdout
    assert [t.state.name for t in study_trials(out)] == ["FAIL", "COMPLETE"]
    assert (out / "best.toml").is_file()


def test_a_config_takes_dashes_or_underscores_and_the_command_line_wins(tmp_path):
    from python_trainer.base.flags import parse_flags
    from python_trainer.normalization import bool_flag_aliases
    from python_trainer.run.config_file import config_argv
    from python_trainer.run.train import Args

    config = tmp_path / "c.toml"
    config.write_text('env-id = "CartPole-v1"\nlearning-rate = 0.001\nnum_steps = 64\nnorm_obs = false\n'
                      'env_param = ["a=1", "b=2"]\n')
    argv = config_argv(["--config", str(config), "--num-steps", "32"], Args)
    args = parse_flags(Args, bool_flag_aliases(argv), "godot-ppo train", check=False)  # as train's main parses
    assert (args.env_id, args.learning_rate, args.num_steps, args.norm_obs) == ("CartPole-v1", 0.001, 32, False)
    assert args.env_param == ("a=1", "b=2")


@pytest.mark.parametrize("line, named", [
    ("learning_rat = 0.001", "unknown key 'learning_rat': not a flag of godot-ppo train (did you mean learning_rate? "
                             "see godot-ppo train --help; `-` or `_` both spell a flag)"),
    ("learning-rate = -1", "learning-rate = -1 is not valid: give a number > 0, e.g. learning-rate = 2.5e-4"),
    ("num_steps = 'many'", "num_steps = 'many' is not valid: give an integer"),
])
def test_a_bad_key_or_value_in_a_config_is_refused_in_one_line_naming_it(tmp_path, capsys, line, named):
    from python_trainer import cli

    config = tmp_path / "bad.toml"
    config.write_text(line + "\n")
    assert cli.main(["train", "--config", str(config), "--run-dir-root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"godot-ppo train: error: --config {config}: {named}"
    assert not (tmp_path / "runs").exists()


def test_a_space_file_narrows_the_search_and_a_trials_batch_fits_half_its_budget(tmp_path):
    from python_trainer.base.flags import FlagError
    from python_trainer.run.train import Args
    from python_trainer.tools.tune_space import Space, load_space, trial_flags

    space_file = tmp_path / "space.toml"
    space_file.write_text('drop = ["ent_coef"]\n[fixed]\ncopies = 2\n[search]\ngamma = 0.99\n'
                          'learning_rate = {low = 1e-4, high = 1e-3, log = true}\nnum_steps = [256, 1024]\n')
    space = load_space(str(space_file), False, Args)
    assert space.fixed == {"copies": 2, "gamma": 0.99}
    assert "ent_coef" not in space.params and "gamma" not in space.params
    assert (space.params["learning_rate"].low, space.params["learning_rate"].log) == (1e-4, True)
    sampled = {"learning_rate": 3e-4, "num_steps": 1024, "num_instances": 2, "num_minibatches": 32,
               "update_epochs": 4, "gae_lambda": 0.95, "clip_coef": 0.2, "action_repeat": 1}
    flags = trial_flags(optuna.trial.FixedTrial(sampled), space, trial_steps=8192, agents_per_instance=4)
    # 2 instances x 2 copies x 4 agents = 16 envs: 1024 steps would be 16384; the largest choice within 4096 is 256
    assert flags["num_steps"] == 256 and flags["copies"] == 2 and 16 * 256 % flags["num_minibatches"] == 0
    small = Space({}, {"num_instances": 1, "num_steps": 32, "num_minibatches": 16})
    flags = trial_flags(optuna.trial.FixedTrial({}), small, trial_steps=8192, agents_per_instance=4)
    assert flags["num_minibatches"] == 2  # 128 samples: minibatches of at least 64 (MIN_MINIBATCH)
    space_file.write_text("[search]\nlearning_rate = {low = -1, high = 1}\n")
    with pytest.raises(FlagError, match=r"^--space .*: learning_rate = -1 is not valid: give a number > 0"):
        load_space(str(space_file), False, Args)
    space_file.write_text("[search]\ntotal_timesteps = [1000]\n")
    with pytest.raises(FlagError, match="'total_timesteps' is set by tune itself"):
        load_space(str(space_file), False, Args)


# A stand-in for a trial's train: progress lines whose mean return falls, then a long wait (as a slow trial's)
FALLING = """
import sys, time
for i, r in enumerate([5.0, 1.0, 0.5]):
    print(f"global_step={(i + 1) * 100} SPS=100 mean_return(last 100)={r}", flush=True)
time.sleep(120)
"""


def runner_and_study(tmp_path, **tune_flags):
    from python_trainer.tools.tune import TrialRunner, TuneArgs
    from python_trainer.tools.tune_space import Space

    args = TuneArgs(out=str(tmp_path), trial_steps=1000, **tune_flags)
    runner = TrialRunner(args, tmp_path, Space({}), {"env_id": "CartPole-v1"}, 4, evaluations=0)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1,
                                                                                         n_warmup_steps=2))
    return runner, study


def test_a_pruned_trials_train_is_stopped_as_soon_as_its_report_falls_below_the_median(tmp_path):
    import time

    runner, study = runner_and_study(tmp_path)
    first = study.ask()
    for index in range(1, 11):
        first.report(10.0, index)
    study.tell(first, 10.0)
    trial = study.ask()
    started = time.monotonic()
    with pytest.raises(optuna.TrialPruned, match="pruned at step 200"):
        runner._run(trial, [sys.executable, "-c", FALLING], tmp_path)
    assert time.monotonic() - started < 60  # stopped by SIGINT, not left to its 120 s
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {1: 5.0, 2: 1.0}
    assert "mean_return(last 100)=1.0" in (tmp_path / "train.log").read_text()
    assert processes_mentioning("time.sleep(120)") == []


def test_a_trial_still_running_at_the_timeout_is_stopped(tmp_path):
    import time

    runner, study = runner_and_study(tmp_path, timeout=2.0)
    trial = study.ask()
    started = time.monotonic()
    with pytest.raises(optuna.TrialPruned, match="stopped at --timeout"):
        runner._run(trial, [sys.executable, "-c", FALLING], tmp_path)
    assert time.monotonic() - started < 60
    assert processes_mentioning("time.sleep(120)") == []


@pytest.mark.slow  # a real game, trained and evaluated in the engine twice (about 30 s)
def test_a_godot_trial_reports_its_in_engine_evaluations_and_its_value_is_the_last(headless_export, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text('drop = ["action_repeat"]\n[fixed]\nnum_instances = 1\n[search]\nnum_steps = [64]\n'
                     'update_epochs = 1\nnum_minibatches = [4]\n')
    out = tmp_path / "search"
    tune(out, "--env-id", "ball_chase", "--space", str(space), "--n-trials", "1", "--trial-steps", "4096",
         "--evaluations", "2")
    (trial,) = study_trials(out)
    (run_dir,) = run_dirs(out / "trials" / "trial_0000")
    logged = read_scalars(run_dir)["eval/random/mean_return"]
    assert trial.state.name == "COMPLETE" and [s for s, _ in logged] == [2048, 4096]
    assert sorted(trial.intermediate_values) == [1, 2]
    assert trial.value == pytest.approx(logged[-1][1]) and (run_dir / "best" / "policy.json").is_file()


@pytest.mark.slow  # three trains that start and refuse (about 15 s on a quiet machine)
def test_a_search_whose_every_trial_fails_stops_after_three_naming_trains_error(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text("[fixed]\nport = 12345\n")  # train refuses it without --editor; tune cannot know
    result = godot_ppo_child("tune", "--out", str(tmp_path / "search"), "--env-id", "CartPole-v1", "--space",
                             str(space), "--n-trials", "5", "--trial-steps", "1024", timeout=180)
    assert result.returncode == 1, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("godot-ppo tune: error: 3 trials in a row failed, the last: train exited 2: godot-ppo "
                           "train: error: --port is for training from the Godot editor")
    assert [t.state.name for t in study_trials(tmp_path / "search")] == ["FAIL"] * 3


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # asked without optimize: no heartbeat needed
def test_the_same_seed_asks_the_same_trials(tmp_path):
    from python_trainer.run.train import Args
    from python_trainer.tools.tune import TuneArgs, _study
    from python_trainer.tools.tune_space import load_space, trial_flags

    space = load_space(None, True, Args)
    asked = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        study = _study(optuna, TuneArgs(out=str(tmp_path / folder), seed=7), tmp_path / folder)
        asked.append([trial_flags(study.ask(), space, 100000, 4) for _ in range(3)])
    assert asked[0] == asked[1] and asked[0][0] != asked[0][1]
