"""A Godot project's import, so that the project runs from its folder with no export (`--project DIR`).

Godot loads an image, a sound or a 3D model only as its editor imported it (into DIR/.import/, with DIR/ASSET.import
beside each asset), and knows a script's ``class_name`` only from the list the editor keeps in project.godot. An
export imports first; a project run from its folder needs that done once. `ensure_imported` has Godot's editor do it
the way `godot-ppo export` does, with ``godot3-server --path DIR --export PRESET``, but to a preset no project has:
the editor scans and imports everything, then finds no such preset and quits. (``--editor --quit`` quits before the
import is done, and ``--editor`` alone never exits.) It is skipped while the import is up to date: a stamp in
DIR/.import/ keeps the fingerprint of what was imported (each asset's and its .import file's size and time) and the
``class_name``s project.godot's list lacked then. A project with neither assets nor class names never runs the editor.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Callable, Optional

from python_trainer.base.contract import ENGINE_ERROR
from python_trainer.base.errors import say
from python_trainer.base.files import write_atomic
from python_trainer.base.paths import godot_server
from python_trainer.base.processes import run_to_end

IMPORT_TIMEOUT_S = 180  # the import of a big project's assets, as long as an export may take
STAMP = Path(".import") / "godot-ppo-imported"  # in the folder Godot imports into: deleting .import resets both
NO_PRESET = "godot-ppo: import only (no such preset)"
# The files Godot 3.2's editor imports, by extension (its importers: textures, layered textures, images, atlases and
# bitmaps from images; WAV, Ogg Vorbis and MP3; CSV; OBJ; scenes from COLLADA, glTF, ESCN and FBX). Scripts, scenes
# and resources (.gd, .tscn, .tres, fonts) are read as they are, so editing them never needs an import.
IMPORTED = frozenset("bmp exr hdr jpeg jpg png svg svgz tga webp wav ogg mp3 csv obj dae escn fbx glb gltf".split())
_NOTHING = hashlib.sha256().hexdigest() + "\n\n"  # the state of a project with no assets and no class names
_CLASS_NAME = re.compile(r"^class_name\s+([A-Za-z_]\w*)", re.MULTILINE)


class ImportFailed(ValueError):
    """The editor could not import the project's assets; the message names the asset or what Godot said, and the fix."""


def project_files(project: Path):
    """Every file of the project Godot's editor sees, relative to it: folders and files whose names start with a
    dot are skipped, and so are folders holding a .gdignore file, as the editor does."""
    for root, dirs, files in os.walk(project):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(root) / d / ".gdignore").exists())
        for name in sorted(files):
            if not name.startswith("."):
                yield (Path(root) / name).relative_to(project)


def fingerprint(project: Path) -> str:
    """The size and modification time of every asset Godot imports and of its .import file (its import settings)."""
    digest = hashlib.sha256()
    for rel in project_files(project):
        if rel.suffix[1:].lower() in IMPORTED:
            for path in (project / rel, project / f"{rel}.import"):
                st = path.stat() if path.exists() else None
                digest.update(f"{path.relative_to(project)}\0{st and st.st_size}\0{st and st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def unregistered_classes(project: Path) -> list[str]:
    """The ``class_name``s of the project's scripts that project.godot's list (_global_script_classes) lacks."""
    listed = (project / "project.godot").read_text(errors="replace")
    missing = []
    for rel in project_files(project):
        if rel.suffix == ".gd":
            found = _CLASS_NAME.search((project / rel).read_text(errors="replace"))
            res = "res://" + rel.as_posix()
            if found and not (f'"class": "{found.group(1)}"' in listed and f'"path": "{res}"' in listed):
                missing.append(found.group(1))
    return missing


def import_state(project: Path) -> str:
    """What the stamp keeps: the assets' fingerprint, and the class names project.godot lacked after the import."""
    return fingerprint(project) + "\n" + ",".join(sorted(unregistered_classes(project))) + "\n"


def is_up_to_date(project: Path) -> bool:
    """Whether running the project needs no import: it has no assets and no class name to register, or nothing of
    them changed since the last import (the stamp)."""
    state, stamp = import_state(project), project / STAMP
    return state == _NOTHING or (stamp.is_file() and stamp.read_text() == state)


def ensure_imported(project, timeout: Optional[float] = None, env=None,
                    report: Optional[Callable[[str], None]] = None) -> bool:
    """Import the project's assets unless that is up to date; True when the editor ran. ImportFailed (one line,
    naming the fix) when it fails or takes more than ``timeout`` seconds (default IMPORT_TIMEOUT_S)."""
    project, timeout = Path(project), IMPORT_TIMEOUT_S if timeout is None else timeout
    if is_up_to_date(project):
        return False
    check_writable(project)
    (report or (lambda msg: say(f"godot-ppo: {msg}")))(
        f"importing {project}'s assets with Godot's editor (once: kept in {project / '.import'})")
    with tempfile.TemporaryDirectory(prefix="godot-ppo-import-") as scratch:
        cmd = [godot_server(), "--path", str(project), "--export", NO_PRESET, str(Path(scratch) / "none")]
        result = run_to_end(cmd, timeout=timeout, env=env, cwd=scratch)
    fix = f"open {project} once in the Godot 3 editor, which imports it and shows why"
    if result.returncode is None:
        raise ImportFailed(f"importing {project}'s assets did not finish within {timeout:g} s (ended it): {fix}")
    said = result.stdout + result.stderr
    failed = re.findall(r"Error importing '([^']+)'", said)
    if failed:
        raise ImportFailed(f"Godot could not import {', '.join(dict.fromkeys(failed))} of {project}: fix or remove "
                           f"the file, or {fix}")
    if NO_PRESET not in said:  # the editor stopped before its scan ended (a damaged project.godot, a crash)
        errors = [line.strip() for line in said.splitlines() if line.startswith(ENGINE_ERROR) and "locale" not in line]
        raise ImportFailed(f"Godot's editor did not import {project} (exit code {result.returncode}; it said "
                           f"{(errors or ['nothing'])[0][:200]!r}): {fix}")
    (project / STAMP).parent.mkdir(exist_ok=True)
    write_atomic(project / STAMP, import_state(project))
    return True


def check_writable(project: Path) -> None:
    """ImportFailed (one line, naming the folder and the fix) unless the import can write where Godot's editor puts
    it: DIR/.import/ and an ASSET.import file beside each asset (a read-only mount, a folder of another user's)."""
    where = project / ".import"
    try:
        where.mkdir(exist_ok=True)
        problem = next((f"{p} is not writable" for p in (project, where) if not os.access(p, os.W_OK)), None)
    except OSError as e:
        problem = f"cannot make {where} ({e.strerror or e})"
    if problem is not None:
        raise ImportFailed(f"{project}'s assets need an import, and {problem}: Godot's editor writes it into "
                           f"{where} and beside each asset; make the folder writable, or copy the project to one "
                           "that is and give that to --project")


def keep_out_of_projects(folder) -> None:
    """A folder of ours inside a Godot project (runs/, when training from the project's folder) gets a .gdignore
    file, so that Godot's editor skips it: it would import every run's learning curve, and fail on every
    episodes.csv, which it takes for a table of translations."""
    folder = Path(folder).resolve()
    if not (folder / ".gdignore").exists() and any((p / "project.godot").is_file() for p in (folder, *folder.parents)):
        (folder / ".gdignore").touch()
