"""Export a Godot 3 project as a headless and a windowed binary (`godot-ppo export`).

    godot-ppo export                                   # this repository's project -> exports/{headless,windowed}/
    godot-ppo export --project ~/my_game --out ~/my_game/exports

Both binaries use Debian's Godot 3.2.3 builds as custom templates: `godot3-server` for the headless one and
`godot3-runner` for the windowed one. Exporting copies the template next to a freshly packed `.pck`, so it takes
seconds. A project without `export_presets.cfg` gets the two presets written for it; a project with its own presets
is left alone, and its Linux/X11 presets whose custom template is `godot3-server` / `godot3-runner` are used.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import tyro

from python_trainer.base.errors import Fault, one_line
from python_trainer.base.flags import parse_flags
from python_trainer.envs.game import GameError, GameExport, game_environ, list_games
from python_trainer.envs.logs import shown_lines
from python_trainer.base.paths import BINARY_NAME, EXPORTS_DIR, GODOT_PROJECT, godot_server
from python_trainer.base.processes import run_to_end

KINDS = ("headless", "windowed")
TEMPLATES = {"headless": "godot3-server", "windowed": "godot3-runner"}
PRESET_NAMES = {"headless": "Linux Headless", "windowed": "Linux Windowed"}
PRESETS_FILE = "export_presets.cfg"
EXPORT_TIMEOUT_S = 180


class ExportError(Fault, RuntimeError):
    """The project cannot be exported; the message names the problem and the fix (a fault: exit status 1)."""


@dataclass
class ExportArgs:
    """Export a Godot 3 project as a headless and a windowed binary."""

    project: Annotated[Optional[str], tyro.conf.arg(metavar="DIR")] = None
    """the Godot 3 project folder (default: this repository's godot_project/)"""
    out: Annotated[Optional[str], tyro.conf.arg(metavar="DIR")] = None
    """where headless/ and windowed/ go (default: the project's exports/ folder; this repository's exports/ for its
    own project)"""
    only: Optional[Literal[KINDS]] = None  # Literal[KINDS]: the kinds, named once
    """export only this kind"""


def presets_cfg(exclude_filter: str = "") -> str:
    """The two presets this bundle exports with: Debian's godot3-server and godot3-runner as custom templates."""
    sections = []
    for i, kind in enumerate(KINDS):
        template = f"/usr/bin/{TEMPLATES[kind]}"
        sections.append(f"""[preset.{i}]

name="{PRESET_NAMES[kind]}"
platform="Linux/X11"
runnable={'true' if kind == 'windowed' else 'false'}
custom_features=""
export_filter="all_resources"
include_filter=""
exclude_filter="{exclude_filter}"
export_path=""
patch_list=PoolStringArray(  )
script_export_mode=0
script_encryption_key=""

[preset.{i}.options]

texture_format/bptc=false
texture_format/s3tc=true
texture_format/etc=false
texture_format/etc2=false
texture_format/no_bptc_fallbacks=true
binary_format/64_bits=true
binary_format/embed_pck=false
custom_template/release="{template}"
custom_template/debug="{template}"
""")
    return "\n".join(sections)


def _unquote(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def _read_cfg(path: Path) -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False, comment_prefixes=(";",))
    cfg.optionxform = str  # keys are case-sensitive
    try:
        cfg.read_string("[_top]\n" + path.read_text())
    except configparser.Error as e:
        raise ExportError(f"{path}: cannot read it ({one_line(e)})") from None
    return cfg


def binary_name(project: Path) -> str:
    """The binaries' file name: the project's name (application/config/name) in snake_case."""
    # project.godot holds values over several lines (a Dictionary such as rl_sync/games), which configparser
    # cannot read; the one key needed here is a line of its own.
    found = re.search(r'^config/name="(.*)"\s*$', (project / "project.godot").read_text(), re.MULTILINE)
    name = (found.group(1) if found else "") or project.resolve().name
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "game"
    return f"{slug}.x86_64"


def find_presets(project: Path) -> dict:
    """{kind: preset name}: the project's Linux/X11 presets whose custom release template is Debian's
    godot3-server (headless) and godot3-runner (windowed); ExportError naming the fix when one is missing."""
    cfg = _read_cfg(project / PRESETS_FILE)
    found = {}
    for section in cfg.sections():
        if not re.fullmatch(r"preset\.\d+", section) or _unquote(cfg.get(section, "platform", fallback="")) != "Linux/X11":
            continue
        template = Path(_unquote(cfg.get(section + ".options", "custom_template/release", fallback=""))).name
        for kind in KINDS:
            if template == TEMPLATES[kind] and kind not in found:
                found[kind] = _unquote(cfg.get(section, "name", fallback=""))
    for kind in KINDS:
        if kind not in found:
            raise ExportError(
                f"{project / PRESETS_FILE} has no Linux/X11 preset whose custom template is "
                f"/usr/bin/{TEMPLATES[kind]} (needed for the {kind} binary): add one in the editor "
                f"(Project > Export > Add > Linux/X11, Custom Template Release: /usr/bin/{TEMPLATES[kind]}), or move "
                f"{PRESETS_FILE} away and `godot-ppo export --project {project}` writes both presets"
            )
    return found


def _godot_errors(text: str) -> str:
    lines = [line for line in shown_lines(text) if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "error" in line.lower()]
    return "\n".join((errors or lines)[-8:]) or "(Godot printed nothing)"


def export(project=None, out=None, kinds=KINDS, quiet=False) -> dict:
    """Export ``project`` (default: this repository's) into ``out``/{headless,windowed}/ (default: the project's own
    exports/ folder, this repository's for its own project); returns {kind: path}."""
    project = Path(project) if project is not None else GODOT_PROJECT
    own = project.resolve() == GODOT_PROJECT.resolve()
    out = Path(out) if out is not None else (EXPORTS_DIR if own else project / "exports")
    if not (project / "project.godot").is_file():
        raise ExportError(
            f"{project} has no project.godot: give the folder of a Godot 3 project (the one holding project.godot)"
        )
    server = godot_server()
    for kind in kinds:
        if shutil.which(TEMPLATES[kind]) is None:
            raise ExportError(
                f"{TEMPLATES[kind]} is not installed (the {kind} export template): "
                f"run `sudo apt-get install {TEMPLATES[kind]}`"
            )
    if not (project / PRESETS_FILE).is_file():
        (project / PRESETS_FILE).write_text(presets_cfg())
        if not quiet:
            print(f"wrote {project / PRESETS_FILE} (presets {PRESET_NAMES['headless']!r}, {PRESET_NAMES['windowed']!r})")
    presets = find_presets(project)
    name = BINARY_NAME if own else binary_name(project)
    written = {}
    for kind in kinds:
        target = (out / kind / name).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written beside the target, then moved over it (the .pck first): a game started meanwhile opens the old
        # export or the new one, never a half-written one, and a failed export leaves the old one in place.
        scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
        try:
            fresh = scratch / name
            cmd = [server, "--path", str(project.resolve()), "--export", presets[kind], str(fresh)]
            result = run_to_end(cmd, timeout=EXPORT_TIMEOUT_S, env=game_environ())
            if result.returncode is None:
                raise ExportError(f"exporting {kind} did not finish within {EXPORT_TIMEOUT_S} s: {' '.join(cmd)}")
            if not fresh.is_file() or not fresh.with_suffix(".pck").is_file():
                raise ExportError(
                    f"exporting {project} ({kind}, preset {presets[kind]!r}) failed, exit code {result.returncode}; "
                    f"Godot said:\n{_godot_errors(result.stdout + result.stderr)}"
                )
            os.replace(fresh.with_suffix(".pck"), target.with_suffix(".pck"))
            os.replace(fresh, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        written[kind] = target
    if not quiet:
        games = games_text(GameExport.open(next(iter(written.values()))))  # both kinds hold the same .pck
        for kind, target in written.items():
            print(f"exported {kind}: {target} ({games})")
    return written


def games_text(export: GameExport) -> str:
    """The games an export holds, as its binary lists them (--list_envs), for the line that names the export."""
    try:
        listing = list_games(export)
    except GameError:  # a game without our addon or godot_rl_agents' plugin, say; `envs` says why in full
        return f"no games listed: `godot-ppo envs --env-path {export.path}` says why"
    return f"games: {', '.join(listing.envs)}"


def main(argv=None):
    """`godot-ppo export`: the flags, the export, and how to train the exported game."""
    args = parse_flags(ExportArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo export")
    try:
        written = export(args.project, args.out, (args.only,) if args.only else KINDS)
    except FileNotFoundError as e:  # godot3-server is not installed
        raise ExportError(str(e)) from None
    if args.project is not None and "headless" in written:
        print(f"train it: godot-ppo train --env-path {written['headless']}")
    return 0
