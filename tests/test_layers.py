"""The package's layers (python_trainer.LAYERS, the one map): every import goes down it, no import cycle, the folders'
faces and docs/layout.md say what the map says, and the sizes a newcomer can read in one sitting."""

import ast
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import layers  # noqa: E402  (scripts/layers.py)
from python_trainer import LAYERS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "python_trainer"


def test_every_import_goes_down_the_layer_map_and_none_closes_a_cycle():
    result = subprocess.run([sys.executable, "scripts/layers.py"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "import cycles: none; layering breaks: none" in result.stdout


def test_a_break_of_the_map_is_found():
    """The check can fail: an import up a layer, and a cycle, are reported."""
    edges = {"base.flags": {"envs.game"}, "envs.game": {"base.flags"}}
    assert layers.breaks(edges) == ["base.flags (base) imports envs.game (envs), a layer above it"]
    assert layers.cycles(edges) == [["base.flags", "envs.game"]]


def test_ppo_is_the_algorithm_alone():
    """ppo.py imports the flags' rules and the optimizer step only (no rollout source, no command), in <= 400 lines."""
    assert layers.graph()["ppo"] == {"base.flags", "optimizer"}
    assert len((PACKAGE / "ppo.py").read_text().splitlines()) <= 400


def test_each_folder_is_a_layer_and_its_face_says_what_the_map_says():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {f for f, _ in LAYERS if f != "."}
    for folder, what in LAYERS:
        if folder != ".":
            doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
            assert doc.rstrip(".").lower() == what.lower(), folder


def test_docs_layout_shows_the_map():
    """docs/layout.md's module table is the one scripts/layers.py makes from the map and the modules' first docstring
    lines (`scripts/layers.py --write-docs` writes it anew when a module moves or its job changes)."""
    assert layers.layout_md_table() == layers.layout_table()


def test_every_module_says_its_job_and_reads_in_one_sitting():
    """Each module's docstring starts with its one job; no module over 500 lines, no function over 80 (ppo.py's
    loop, read top to bottom like CleanRL's, up to 180)."""
    long = []
    for name, path in layers.modules().items():
        text = path.read_text()
        tree = ast.parse(text)
        assert ast.get_docstring(tree), f"{name} has no docstring saying its job"
        assert name == "ppo" or len(text.splitlines()) <= 500, f"{name}: {len(text.splitlines())} lines"
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > (180 if name == "ppo" else 80):
                    long.append(f"{name}.{node.name} {n}")
    assert not long, long
