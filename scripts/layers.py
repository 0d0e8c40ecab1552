"""The package's layers as a newcomer meets them: every folder and module with its size and one-line job, the imports
between folders, and a check that each import goes down the layer map (`python_trainer.LAYERS`, written once).

    .venv/bin/python scripts/layers.py               # the tree, the folder graph, then the verdict; exit 1 on a problem
    .venv/bin/python scripts/layers.py --write-docs  # write docs/layout.md's module table anew (tests/test_layers.py
                                                     # holds the page to it)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python_trainer"
sys.path.insert(0, str(ROOT))

from python_trainer import LAYERS  # noqa: E402  (the package's face imports nothing heavy)

FOLDERS = [folder for folder, _ in LAYERS]
LAYOUT_MD = ROOT / "docs" / "layout.md"
BEGIN, END = "<!-- layers:begin -->\n", "<!-- layers:end -->\n"


def modules() -> dict:
    """Dotted module name under the package ("ppo", "envs.vec_env") -> its path; a folder's __init__.py is its face."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PACKAGE).with_suffix("")
        found[".".join(rel.parts)] = path
    return found


def folder_of(module: str) -> str:
    return module.split(".")[0] if "." in module else "."


def imports(path: Path, known: set) -> set:
    """The package's modules that ``path`` imports, anywhere in the file (absolute imports: the package uses no others)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "python_trainer":
            stem = node.module[len("python_trainer"):].lstrip(".")
            for alias in node.names:
                name = f"{stem}.{alias.name}" if stem else alias.name
                found.add(name if name in known else stem)
        elif isinstance(node, ast.Import):
            found.update(a.name[len("python_trainer."):] for a in node.names if a.name.startswith("python_trainer."))
    return {m for m in found if m in known}


def graph() -> dict:
    """Module -> the modules it imports (a face, __init__.py, hands names on and counts for none)."""
    mods = modules()
    return {m: set() if p.name == "__init__.py" else imports(p, set(mods)) - {m} for m, p in mods.items()}


def breaks(edges: dict) -> list:
    """The imports that go up the layer map, and the modules in no layer's folder."""
    rank = {folder: i for i, folder in enumerate(FOLDERS)}
    bad = [f"{m}: its folder is not in python_trainer.LAYERS" for m in edges if folder_of(m) not in rank]
    for m, deps in sorted(edges.items()):
        for d in sorted(deps):
            if folder_of(m) in rank and folder_of(d) in rank and rank[folder_of(d)] > rank[folder_of(m)]:
                bad.append(f"{m} ({folder_of(m)}) imports {d} ({folder_of(d)}), a layer above it")
    return bad


def cycles(edges: dict) -> list:
    """The import cycles between modules, each as the list of its modules (depth-first search; the graph is small)."""
    found, done = [], set()

    def visit(m, path):
        if m in path:
            cycle = path[path.index(m):]
            if sorted(cycle) not in found:
                found.append(sorted(cycle))
            return
        if m in done:
            return
        for d in sorted(edges.get(m, ())):
            visit(d, path + [m])
        done.add(m)

    for m in sorted(edges):
        visit(m, [])
    return found


def job(path: Path) -> str:
    """A module's one job: the first line of its docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def layout_table() -> str:
    """docs/layout.md's module table: one row per folder, bottom layer first, each module with its job."""
    mods = modules()
    rows = ["| layer (bottom first) | module | its job |", "| --- | --- | --- |"]
    for folder, what in LAYERS:
        rows.append(f"| **`{folder}/`** {what} | | |" if folder != "." else f"| **the root** {what} | | |")
        for m, path in mods.items():
            if folder_of(m) == folder and path.name != "__init__.py":
                rows.append(f"| | `{m}` | {job(path)} |")
    return "\n".join(rows) + "\n"


def layout_md_table() -> str:
    """The table docs/layout.md holds now, between its markers."""
    text = LAYOUT_MD.read_text()
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def write_docs() -> None:
    text = LAYOUT_MD.read_text()
    LAYOUT_MD.write_text(text[:text.index(BEGIN) + len(BEGIN)] + layout_table() + text[text.index(END):])


def main(argv) -> int:
    if "--write-docs" in argv:
        write_docs()
        return 0
    mods, edges = modules(), graph()
    for folder, what in LAYERS:
        print(f"{folder + '/' if folder != '.' else 'python_trainer/'}  {what}")
        for m, path in mods.items():
            if folder_of(m) == folder and path.name != "__init__.py":
                print(f"    {m:<28} {len(path.read_text().splitlines()):>4}  {job(path)[:100]}")
    print("\nfolders import:")
    folder_edges = {}
    for m, deps in edges.items():
        for d in deps:
            if folder_of(d) != folder_of(m):
                folder_edges.setdefault(folder_of(m), set()).add(folder_of(d))
    for folder in FOLDERS:
        print(f"  {folder} -> {', '.join(f for f in FOLDERS if f in folder_edges.get(folder, ()))  or '(nothing)'}")
    bad, loops = breaks(edges), cycles(edges)
    print(f"\nimport cycles: {loops or 'none'}; layering breaks: {bad or 'none'}")
    return 1 if bad or loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
