"""The bounds of every size that grows (python_trainer/base/bounds.py): the game's side holds the same values, the
docs' table is the code's, and each bound is refused before any game starts where the flags tell the size."""

import re
import subprocess
import sys

import pytest

from helpers import REPO
from python_trainer.base import bounds

ADDON = REPO / "godot_project" / "addons" / "rl_sync"


def _gdscript_consts(name: str) -> dict:
    """{file: value} of every ``const NAME := <integer expression>`` in the addon."""
    found = {}
    for path in sorted(ADDON.glob("*.gd")):
        for match in re.finditer(rf"^const {name} *:?= *([0-9 *+]+)$", path.read_text(), re.M):
            found[path.name] = eval(match.group(1), {"__builtins__": {}})  # digits, spaces, * and + only
    return found


@pytest.mark.parametrize("name", [n for n, b in bounds.ALL.items() if b.gdscript])
def test_every_bound_the_game_checks_has_the_same_value_in_its_gdscript_twin_and_nowhere_else_another(name):
    bound = bounds.ALL[name]
    file, const = bound.gdscript.split(":")
    found = _gdscript_consts(const)
    assert file in found, f"{bound.gdscript}: no such integer constant in the addon"
    assert found[file] == bound.value, f"{bound.gdscript} is {found[file]}, bounds.{name} {bound.value}"
    assert set(found.values()) == {bound.value}, f"another value of {const} in the addon: {found}"


def test_the_docs_table_of_bounds_is_the_codes():
    page = (REPO / "docs" / "training.md").read_text()
    table = page.split("<!-- bounds:begin -->\n", 1)[1].split("\n<!-- bounds:end -->", 1)[0]
    assert table == bounds.markdown_table(), "regenerate: python -c 'from python_trainer.base import bounds; " \
                                             "print(bounds.markdown_table())'"


def _train(tmp_path, *flags):
    return subprocess.run([sys.executable, "-m", "python_trainer", "train", *flags, "--run-dir-root", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flags, said", [
    (("--env-id", "forager", "--frame-stack", "65"), "--frame-stack 65 is not valid: give 1 to 64"),
    (("--env-id", "forager", "--frame-stack", "100000"), "--frame-stack 100000 is not valid: give 1 to 64"),
    (("--env-id", "ball_chase", "--copies", "256", "--agents-per-instance", "2048"),
     "--agents-per-instance 2048 x --copies 256 = 524,288 agents in one instance, over the 2048"),
    (("--env-id", "ball_chase", "--async", "--max-policy-lag", "3000"), "--max-policy-lag 3000 is not valid"),
])
def test_a_size_over_its_bound_is_refused_in_one_line_before_any_game_starts(tmp_path, flags, said):
    done = _train(tmp_path, *flags)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder


def test_a_camera_whose_features_are_over_the_policy_bounds_is_refused_with_the_largest_side_that_fits():
    from python_trainer.variants.cnn import dense_inputs, encoder_problem

    assert dense_inputs("simple", 512, 512) == 123_008  # the 419 MB policy.json of a 512 x 512 camera
    said = encoder_problem("simple", 512, 512)
    assert "123,008 features" in said and "give the camera at most 379 x 379 pixels" in said
    assert encoder_problem("simple", 379, 379) == "" and encoder_problem("simple", 380, 380) != ""
    assert "at most 211 x 211" in encoder_problem("nature", 256, 256)
