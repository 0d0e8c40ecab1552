"""The same seed gives the same run, before and after a change of the trainer's code: the runs of
tests/fixtures/same_seed/runs.json (scripts/make_same_seed_fixtures.py) are repeated here and must give the same
episodes.csv, and in model.pt the same model, optimizer, normaliser and RNG states (torch.equal) and the same args
apart from path fields. A checkpoint written by main 7743056's trainer (tests/fixtures/main_7743056/) still resumes
and plays in the engine.

The runs were recorded with main 7743056's trainer, and the restructuring (issue 20) reproduced them bit for bit;
they were re-recorded once, on purpose, by the trainer of issue 21, whose numbers differ in float rounding only:
the rollout acts on numpy (agent.RolloutPolicy: the same sums taken in another order, the actor and the critic's
first layers in one product) and the running statistics merge with scalar weights (running_stats.py). The
acting path's agreement with get_action_and_value is tests/test_acting.py's. The two ball_chase runs were
re-recorded once more, on purpose, by issue 21's second round: the update's tanh on a minibatch of 1024 rows is
numpy's (agent.Tanh: torch's took a quarter of the update), which rounds differently in the last bit; CartPole's
128-row minibatches keep torch's, and its run is unchanged.

The numbers of a float computation depend on the CPU's vector instructions: the fixtures record torch's CPU
capability (AVX2). On an AVX-512 machine the runs are repeated with every library held to its AVX2 kernels (torch's
ATEN_CPU_CAPABILITY, MKL's MKL_ENABLE_INSTRUCTIONS, OpenBLAS's OPENBLAS_CORETYPE, numpy's NPY_DISABLE_CPU_FEATURES),
which gives the recorded numbers bit for bit; on any other machine the comparison is skipped, saying why.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import REPO
from python_trainer import train

FIXTURES = REPO / "tests" / "fixtures" / "same_seed"
OLD_RUNS = REPO / "tests" / "fixtures" / "main_7743056"
TABLE = json.loads((FIXTURES / "runs.json").read_text())
RECORDED = json.loads((FIXTURES / "capability.json").read_text())
PATH_FIELDS = {"run_dir_root", "resume"}  # where the run was written: differs from run to run


# An AVX-512 CPU running the AVX2 kernels: what each library reads (before it loads) to pick its kernels.
AVX2_ON_AVX512 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}


def _same_capability() -> dict:
    """The environment that gives the fixtures' kernels on this CPU ({} when it already has them), or a skip."""
    here, recorded = torch.backends.cpu.get_cpu_capability(), RECORDED["cpu_capability"]
    if here == recorded:
        return {}
    # (some machines set OPENBLAS_CORETYPE=Haswell for everything already: that is the setting wanted)
    if (here, recorded) == ("AVX512", "AVX2") and os.environ.get("OPENBLAS_CORETYPE", "Haswell") in ("", "Haswell"):
        return AVX2_ON_AVX512
    pytest.skip(f"the fixtures were recorded on a CPU with {recorded}, this one has {here}: float results may "
                "differ in the last bits")


def _train(tmp_path, *flags, timeout=600, env=None):
    result = subprocess.run([sys.executable, "-m", "python_trainer", "train", *flags, "--run-dir-root",
                             str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, **(env or {})))  # fmt: skip
    assert result.returncode == 0, f"train failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


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


@pytest.mark.parametrize("name", ["cartpole", "ball_chase_pipelined", "ball_chase_no_pipeline"])
def test_the_same_seed_gives_the_recorded_run(tmp_path, name, headless_export):
    _train(tmp_path, *TABLE["runs"][name], *TABLE["common"], env=_same_capability())
    (run_dir,) = tmp_path.iterdir()
    fixture = FIXTURES / name
    assert (run_dir / "episodes.csv").read_bytes() == (fixture / "episodes.csv").read_bytes()
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


@pytest.mark.parametrize("name, more_steps", [("memory_lstm_rnd", 8192), ("ball_chase_pipelined", 106496)])
def test_an_old_checkpoint_resumes_and_plays(tmp_path, name, more_steps, headless_export):
    """A run folder written by main 7743056 (an --lstm --rnd agent, and an MLP one) resumes for more updates, and
    its policy exports and plays in the engine."""
    from python_trainer import playback

    run_dir = tmp_path / f"{name}_old"
    shutil.copytree(OLD_RUNS / name, run_dir)
    shutil.copy(run_dir / "model.pt", run_dir / "checkpoint.pt")  # the run's checkpoint.pt had the same bytes
    before = torch.load(run_dir / "checkpoint.pt", weights_only=True)["global_step"]
    result = _train(tmp_path / "unused", "--resume", str(run_dir), "--total-timesteps", str(more_steps))
    assert f"resuming {run_dir} at global step {before}" in result.stdout
    after = torch.load(run_dir / "model.pt", weights_only=True)
    assert after["global_step"] == more_steps > before
    # the old file itself plays: exported to a policy file, then evaluated inside the engine
    policy = playback.export_policy(OLD_RUNS / name / "model.pt", tmp_path / "old_policy.json")
    report = playback.evaluate_in_engine(policy, episodes=4, agents=4)
    assert report["episodes"] == 4 and np.isfinite(report["mean_return"])
