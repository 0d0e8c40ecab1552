"""Build Godot's own demo games as agents, exactly as docs/own_flow.md and docs/own_flow_more.md make them.

    .venv/bin/python scripts/demo_games.py GAME DEST --demos PATH [--no-export]

GAME is one of dodge, pong, platformer. PATH is godot-demo-projects: a clone (work tree or bare) or a folder of it.
The game's folder is taken from the branch the docs name (`git archive`), the addon copied in, Godot's file logging
switched off, the scene edited with the docs' ```ini blocks, and the controller written from the docs' ```gdscript
block: the docs are the one place these edits live, so what the benchmarks measure is what a user following them
gets. Then `godot-ppo export --project DEST` (DEST/exports/). The benchmarks (bench_dodge.py, bench_pong_demo.py,
bench_platformer_demo.py) call `build()`.
"""

import argparse
import io
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ADDON = REPO / "godot_project" / "addons" / "rl_sync"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


class Game:
    def __init__(self, doc, branch, folder, scene, controller, binary, marker):
        self.doc, self.branch, self.folder, self.scene = doc, branch, folder, scene
        self.controller, self.binary, self.marker = controller, binary, marker


# marker: the controller's file name; the doc's ```ini blocks up to the next ```gdscript block after the first one
# naming it, and the gdscript block that extends the addon's controller there, are this game's
GAMES = {
    "dodge": Game("own_flow.md", "3.x", "2d/dodge_the_creeps", "Main.tscn", "dodge_agent.gd",
                  "dodge_the_creeps.x86_64", "dodge_agent.gd"),
    "platformer": Game("own_flow_more.md", "3.2", "2d/platformer", "src/Main/Game.tscn", "platformer_agent.gd",
                       "platformer_2d.x86_64", "platformer_agent.gd"),
    "pong": Game("own_flow_more.md", "3.2", "2d/pong", "pong.tscn", "pong_agent.gd",
                 "pong_with_gdscript.x86_64", "pong_agent.gd"),
}


def doc_blocks(game: Game) -> tuple[list, str]:
    """(the scene's ini blocks, the controller's GDScript) of ``game``, from its page."""
    blocks = FENCE.findall((DOCS / game.doc).read_text())
    start = next(i for i, (lang, text) in enumerate(blocks) if lang == "ini" and game.marker in text)
    ini, script = [], None
    for lang, text in blocks[start:]:
        if lang == "ini":
            ini.append(text)
        elif lang == "gdscript":
            script = text
            break
    for lang, text in blocks[start + len(ini) + 1:]:  # a page may give a connection's edit after the controller
        if lang != "ini" or "[connection" not in text:
            break
        ini.append(text)
    return ini, script


def edit_scene(scene: str, ini_blocks: list) -> str:
    """``scene`` (a .tscn) with the ext_resources, nodes and connections of ``ini_blocks`` added; a connection of
    the same signal and source replaces the scene's; load_steps follows."""
    lines = scene.splitlines()
    ext, nodes, connections = [], [], []
    for block in ini_blocks:
        for chunk in re.split(r"\n(?=\[)", block.strip()):
            head = chunk.split("\n", 1)[0]
            if head.startswith("[ext_resource"):
                ext.append(chunk)
            elif head.startswith("[connection"):
                connections.append(chunk)
            else:
                nodes.append(chunk)
    last_ext = max(i for i, line in enumerate(lines) if line.startswith("[ext_resource"))
    lines[last_ext + 1:last_ext + 1] = ext
    for connection in connections:
        key = re.match(r'\[connection signal="([^"]+)" from="([^"]+)"', connection).groups()
        same = [i for i, line in enumerate(lines) if line.startswith(f'[connection signal="{key[0]}" from="{key[1]}"')]
        for i in reversed(same):
            del lines[i]
    first_connection = next((i for i, line in enumerate(lines) if line.startswith("[connection")), len(lines))
    lines[first_connection:first_connection] = [block + "\n" for block in nodes]
    lines += connections
    text = "\n".join(lines) + "\n"
    resources = len(re.findall(r"^\[(ext|sub)_resource ", text, re.M))
    return re.sub(r"load_steps=\d+", f"load_steps={resources + 1}", text, count=1)


def copy_demo(demos: Path, game: Game, dest: Path) -> None:
    """The demo's folder at the docs' branch, into ``dest``."""
    if (demos / game.folder).is_dir() and not (demos / "HEAD").is_file():
        shutil.copytree(demos / game.folder, dest)
        return
    git_dir = demos if (demos / "HEAD").is_file() else demos / ".git"
    data = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "--format=tar", game.branch, game.folder],
                          check=True, capture_output=True, timeout=120).stdout
    dest.mkdir(parents=True)
    prefix = game.folder.rstrip("/") + "/"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                tar.extract(member, dest)


def build(name: str, dest: Path, demos: Path, export: bool = True) -> Path:
    """Make game ``name`` an agent in ``dest`` (replaced) as its docs page says; returns its headless binary."""
    game = GAMES[name]
    if dest.exists():
        shutil.rmtree(dest)
    copy_demo(demos, game, dest)
    shutil.copytree(ADDON, dest / "addons" / "rl_sync")
    project = (dest / "project.godot").read_text()
    if "[logging]" not in project:
        project += "\n[logging]\n\nfile_logging/enable_file_logging.pc=false\n"
    (dest / "project.godot").write_text(project)
    ini, script = doc_blocks(game)
    scene = dest / game.scene
    scene.write_text(edit_scene(scene.read_text(), ini))
    (dest / game.controller).write_text(script)
    if export:
        subprocess.run([sys.executable, "-m", "python_trainer", "export", "--project", str(dest)], cwd=REPO,
                       check=True, timeout=900)
    return dest / "exports" / "headless" / game.binary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=sorted(GAMES))
    parser.add_argument("dest", type=Path)
    parser.add_argument("--demos", type=Path, required=True, help="godot-demo-projects: a clone or a folder of it")
    parser.add_argument("--no-export", action="store_true")
    args = parser.parse_args()
    print(build(args.game, args.dest, args.demos, export=not args.no_export))


if __name__ == "__main__":
    main()
