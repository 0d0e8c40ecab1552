"""The in-engine LSTM cell (addons/rl_sync/lstm_cell.gd) computes what torch.nn.LSTM computes, step after step,
with per-agent resets, to 1e-5; its weights come from recurrent.LSTMCore.export_weights()."""

import json
import subprocess

import numpy as np
import pytest
import torch

from python_trainer.base import paths
from python_trainer.variants.recurrent import LSTMCore

GODOT = "godot3-server"


def run_cell(tmp_path, case: dict, *extra: str) -> dict:
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps(case))
    proc = subprocess.run(
        [GODOT, "--path", str(paths.GODOT_PROJECT), "-s", "tests/lstm_parity.gd", f"--lstm_case={case_file}", *extra],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0 and "SCRIPT ERROR" not in proc.stderr, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("{"))
    return json.loads(line)


def reference(core: LSTMCore, inputs: np.ndarray, resets: np.ndarray) -> np.ndarray:
    """torch's LSTM one agent at a time, state zeroed where the case resets it."""
    steps, agents, _ = inputs.shape
    out = np.zeros((steps, agents, core.hidden_size))
    with torch.no_grad():
        for a in range(agents):
            state = None
            for t in range(steps):
                if resets[t, a]:
                    state = None
                x = torch.as_tensor(inputs[t, a], dtype=torch.float32).view(1, 1, -1)
                y, state = core.lstm(x, state)
                out[t, a] = y.view(-1).numpy()
    return out


@pytest.mark.parametrize("input_size,hidden_size", [(7, 16), (64, 64)])
def test_gdscript_lstm_matches_torch_over_a_sequence_with_resets(tmp_path, input_size, hidden_size):
    torch.manual_seed(input_size)
    core = LSTMCore(input_size, hidden_size)
    with torch.no_grad():  # non-zero biases and larger weights than the init, so every gate matters
        for p in core.lstm.parameters():
            p.uniform_(-0.5, 0.5)
    rng = np.random.default_rng(0)
    steps, agents = 12, 3
    inputs = rng.uniform(-2, 2, (steps, agents, input_size))
    resets = np.zeros((steps, agents), dtype=bool)
    resets[0] = True
    resets[5, 1] = True  # agent 1's episode begins again at step 5
    resets[6, 2] = True
    got = run_cell(tmp_path, {"weights": core.export_weights(), "agents": agents,
                              "inputs": inputs.tolist(), "resets": resets.tolist()})
    outputs = np.array(got["outputs"])
    expected = reference(core, inputs, resets)
    np.testing.assert_allclose(outputs, expected, atol=1e-5, rtol=0)
    # the reset mattered: without it agent 1 would have gone on differently
    without = resets.copy()
    without[5, 1] = False
    assert np.abs(reference(core, inputs, without)[5:, 1] - expected[5:, 1]).max() > 1e-3


def test_bad_weights_are_refused_with_the_reason(tmp_path):
    weights = LSTMCore(3, 4).export_weights()
    weights["weight_hh"] = weights["weight_hh"][:-1]
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"weights": weights, "agents": 1, "inputs": [[[0, 0, 0]]], "resets": [[True]]}))
    proc = subprocess.run(
        [GODOT, "--path", str(paths.GODOT_PROJECT), "-s", "tests/lstm_parity.gd", f"--lstm_case={case_file}"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "weight_hh must have 4 x hidden_size = 16 rows" in proc.stderr
