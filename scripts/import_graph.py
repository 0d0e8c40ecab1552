"""The import graph of python_trainer/: every module with its size and one-line job, the imports between them (those
inside functions counted, read with ast), the cycles they make and the imports that break the intended layering.

    .venv/bin/python scripts/import_graph.py            # the table, the edges, then the verdict; exit 1 on a problem

The layers, lowest first; a module imports only modules of its own layer or below, and never in a cycle:
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python_trainer"

LAYERS = [
    {"paths", "processes", "errors", "files", "signals", "running_stats", "flags", "optimizer"},  # below everything
    {"protocol", "game", "env_params", "curriculum"},  # the wire protocol; which game, one instance's command line; its parameters
    {"launcher"},  # ports, tokens, logs, Xvfb, restarts
    {"grouped_env", "gym_env", "vec_env"},  # the vector envs
    {"agent", "fast_acting", "recurrent", "rnd", "normalization", "checkpoint", "policy_file", "onnx_policy", "trained_agent",
     "run_folder", "demos", "cloning"},
    {"rollout", "ray_rollouts", "policies", "self_play", "ppo"},  # the algorithm and where its rollouts come from
    {"train", "playback", "profiling", "export", "game_commands", "record_command"},  # the commands
    {"cli", "__main__", "__init__"},  # the command line (the package's make_vec_env shortcut is lazy)
]
# Edges the layers allow but the design does not: the algorithm knows no rollout source by name, and neither the
# rollouts on Ray nor the tools know the algorithm or the train command.
FORBIDDEN = {
    ("ppo", "ray_rollouts"), ("ppo", "rollout"), ("ppo", "policies"), ("ppo", "self_play"),
    ("ray_rollouts", "ppo"), ("rollout", "ppo"), ("policies", "ppo"), ("self_play", "ppo"),
    *((tool, m) for tool in ("playback", "profiling", "export", "game_commands") for m in ("ppo", "train")),
}
__doc__ += "\n".join(f"    {i}: {', '.join(sorted(layer))}" for i, layer in enumerate(LAYERS)) + "\n"


def imports(path: Path, modules: set) -> set:
    """The package modules ``path`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.module == "python_trainer" or (node.level == 1 and not node.module):
                found.update(a.name for a in node.names)
            elif node.module and node.module.startswith("python_trainer."):
                found.add(node.module.split(".")[1])
            elif node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("python_trainer."))
    return found & modules - {path.stem}


def graph() -> dict:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {m: imports(PACKAGE / f"{m}.py", modules) for m in sorted(modules)}


def cycles(edges: dict) -> list:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def layering_breaks(edges: dict) -> list:
    layer = {m: i for i, ms in enumerate(LAYERS) for m in ms}
    bad = [f"{m} is in no layer" for m in edges if m not in layer]
    for m, deps in edges.items():
        for d in sorted(deps):
            if m in layer and d in layer and layer[d] > layer[m]:
                bad.append(f"{m} (layer {layer[m]}) imports {d} (layer {layer[d]})")
            if (m, d) in FORBIDDEN:
                bad.append(f"{m} imports {d}")
    return bad


def job(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")[:110]


def main() -> int:
    edges = graph()
    print(f"{'module':<15} {'lines':>5}  job")
    for m in edges:
        path = PACKAGE / f"{m}.py"
        print(f"{m:<15} {len(path.read_text().splitlines()):>5}  {job(path)}")
    print("\nimports:")
    for m, deps in edges.items():
        if deps:
            print(f"  {m} -> {', '.join(sorted(deps))}")
    found, bad = cycles(edges), layering_breaks(edges)
    print(f"\ncycles: {found or 'none'}; layering breaks: {bad or 'none'}")
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main())
