"""Runs the GDScript suite (godot_project/tests/run_tests.gd) under godot3-server.

The runner parse-checks every .gd file of the project and runs the test_*.gd files; a script error
under `godot3-server -s` can hang instead of exiting, hence the timeout.
"""

import re
import subprocess

from python_trainer.base.paths import GODOT_PROJECT, godot_server


def test_gdscript_suite_passes():
    result = subprocess.run(
        [godot_server(), "--path", str(GODOT_PROJECT), "-s", "tests/run_tests.gd"],
        capture_output=True, text=True, timeout=120,
    )
    summary = re.search(r"^(\d+) passed, (\d+) failed$", result.stdout, re.MULTILINE)
    assert summary, f"the GDScript runner printed no summary:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    failures = "\n".join(line for line in result.stderr.splitlines() if "FAILED" in line or "SCRIPT ERROR" in line)
    assert result.returncode == 0 and summary.group(2) == "0", failures
    # A script error inside a test stops that test where it stands and the runner still counts it as passed:
    # any SCRIPT ERROR (a parse check's included) fails the suite.
    assert "SCRIPT ERROR" not in result.stderr, failures
    assert int(summary.group(1)) >= 20, "the parse checks and tests did not all run"
