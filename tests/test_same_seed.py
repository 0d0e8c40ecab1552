"""The same seed gives the same run, before and after a change of the trainer's code: the runs of
tests/fixtures/same_seed/runs.json (scripts/make_same_seed_fixtures.py) are repeated here and must give the same
episodes.csv, and in model.pt the same model, optimizer, normaliser and RNG states (torch.equal) and the same args
apart from path fields. A checkpoint written by main 7743056's trainer (tests/fixtures/main_7743056/) still resumes
and plays in the engine.

The runs were recorded with main 7743056's trainer, and the restructuring (issue 20) reproduced them bit for bit;
they were re-recorded once, on purpose, by the trainer of issue 21, whose numbers differ in float rounding only:
the rollout acts on numpy (fast_acting.RolloutPolicy: the same sums taken in another order, the actor and the critic's
first layers in one product) and the running statistics merge with scalar weights (running_stats.py). The
acting path's agreement with get_action_and_value is tests/test_acting.py's. The two ball_chase runs were
re-recorded once more, on purpose, by issue 21's second round: the update's tanh on a minibatch of 1024 rows is
numpy's (fast_acting.Tanh: torch's took a quarter of the update), which rounds differently in the last bit; CartPole's
128-row minibatches keep torch's, and its run is unchanged. Issue 21's third round (the tanh written over its
input, Tanh(inplace=True)) computes the same numbers and left every run as it was.

The numbers of a float computation depend on the kernels the libraries run (same_seed_kernels.py): the runs are
repeated with the recorded instruction set (an AVX-512 machine held to AVX2), and the fixtures come in sets, one per
kind of kernels (kernels.json), since MKL rounds differently on Intel and AMD CPUs. A machine whose kernels'
fingerprint is a set's must repeat that set's runs exactly. On a machine of no recorded fingerprint, the run must
equal one set's (the fingerprint-less set's machines, AVX2 and AMD, pass so); if it equals none, the test cannot tell
other kernels from a change of the numbers and skips, saying so (record a set there with --set NAME).
"""

import dataclasses
import functools
import json
import shutil

import numpy as np
import pytest
import torch

from helpers import REPO, train_child, train_run
from python_trainer.run import train
from same_seed_kernels import fingerprint, kernels_env, read_sets, set_of

FIXTURES = REPO / "tests" / "fixtures" / "same_seed"
OLD_RUNS = REPO / "tests" / "fixtures" / "main_7743056"
TABLE = json.loads((FIXTURES / "runs.json").read_text())
KERNELS = read_sets()
PATH_FIELDS = {"run_dir_root", "resume"}  # where the run was written: differs from run to run


@functools.lru_cache(maxsize=None)
def _kernels() -> tuple:
    """(the environment that holds this machine to the fixtures' instruction set, this machine's fingerprint),
    or a skip when it cannot be held to it."""
    env = kernels_env(KERNELS["cpu_capability"])
    if isinstance(env, str):
        pytest.skip(f"{env}: float results may differ in the last bits")
    return env, fingerprint(env)


def _equal(a, b, where=""):
    """Nested dicts/lists/tuples of tensors and plain values, compared exactly; names the first difference."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(map(str, a))} vs {sorted(map(str, b))}"
        for k in a:
            _equal(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _equal(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _same_run(run_dir, fixture) -> None:
    """Asserts that run_dir holds fixture's run: its episodes.csv, model.pt's states and its args."""
    assert (run_dir / "episodes.csv").read_bytes() == (fixture / "episodes.csv").read_bytes(), "episodes.csv"
    now = torch.load(run_dir / "model.pt", weights_only=True)
    then = torch.load(fixture / "model.pt", weights_only=True)
    for key in ("model", "optimizer", "normalizer", "rng", "global_step", "update", "observation_space",
                "action_space", "rnd"):
        _equal(now[key], then[key], key)
    assert list(now["model"]) == list(then["model"])  # the state_dict keys, in order
    args_now = {k: v for k, v in now["args"].items() if k not in PATH_FIELDS}
    args_then = {k: v for k, v in then["args"].items() if k not in PATH_FIELDS}
    added = set(args_now) - set(args_then)  # flags added since the fixtures were recorded: at their defaults
    defaults = {f.name: f.default for f in dataclasses.fields(train.Args)}
    assert {k: args_now[k] for k in added} == {k: defaults[k] for k in added}
    assert {k: v for k, v in args_now.items() if k not in added} == args_then


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cartpole", "ball_chase_pipelined", "ball_chase_no_pipeline"])
def test_the_same_seed_gives_the_recorded_run(tmp_path, name, headless_export):
    env, here = _kernels()
    run_dir = train_run(tmp_path, *TABLE["runs"][name], *TABLE["common"], timeout=600, env=env)
    ours = set_of(KERNELS, here)
    if ours is not None:  # this machine's kernels recorded these runs: the same numbers, exactly
        _same_run(run_dir, FIXTURES / ours / name)
        return
    differences = {}
    for set_name in KERNELS["sets"]:
        try:
            _same_run(run_dir, FIXTURES / set_name / name)
            return
        except AssertionError as e:
            differences[set_name] = str(e).splitlines()[0]
    pytest.skip(f"no fixture set was recorded with this machine's kernels (fingerprint {here}) and the run equals "
                f"none ({differences}): other kernels or other numbers; record a set here (scripts/"
                "make_same_seed_fixtures.py --set NAME, with the fixtures' trainer) to decide")


@pytest.mark.slow
@pytest.mark.parametrize("name, more_steps", [("memory_lstm_rnd", 8192), ("ball_chase_pipelined", 106496)])
def test_an_old_checkpoint_resumes_and_plays(tmp_path, name, more_steps, headless_export):
    """A run folder written by main 7743056 (an --lstm --rnd agent, and an MLP one) resumes for more updates, and
    its policy exports and plays in the engine."""
    from python_trainer.engine import in_engine
    from python_trainer.tools import policy_export

    run_dir = tmp_path / f"{name}_old"
    shutil.copytree(OLD_RUNS / name, run_dir)
    shutil.copy(run_dir / "model.pt", run_dir / "checkpoint.pt")  # the run's checkpoint.pt had the same bytes
    before = torch.load(run_dir / "checkpoint.pt", weights_only=True)["global_step"]
    result = train_child(tmp_path / "unused", "--resume", str(run_dir), "--total-timesteps", str(more_steps),
                         timeout=600)
    assert f"resuming {run_dir} at global step {before}" in result.stdout
    after = torch.load(run_dir / "model.pt", weights_only=True)
    assert after["global_step"] == more_steps > before
    # the old file itself plays: exported to a policy file, then evaluated inside the engine
    policy = policy_export.export_policy(OLD_RUNS / name / "model.pt", tmp_path / "old_policy.json")
    report = in_engine.evaluate_in_engine(policy, episodes=4, agents=4)
    assert report["episodes"] == 4 and np.isfinite(report["mean_return"])
