"""Where this repository's Godot project and its exports live, and the Godot tools; clear errors when missing.

The games themselves are not listed here: a binary says which games it holds (`game.list_games`).
"""

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GODOT_PROJECT = REPO_ROOT / "godot_project"
# GODOT_PPO_EXPORTS lets an installed package point at exports made elsewhere.
EXPORTS_DIR = Path(os.environ.get("GODOT_PPO_EXPORTS", REPO_ROOT / "exports"))
BINARY_NAME = "rl_games.x86_64"

# A run folder's checkpoint files (written by the train command, read by the tools and profiling).
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
ARGS_JSON = "args.json"  # a run's every flag (run/run_folder.py writes it; play reads its --env-param)


def checkpoint_in(path) -> Path:
    """The checkpoint a path names: a run folder's model.pt (the final model), else its checkpoint.pt (a run that
    stopped before the end); any other path as it is."""
    path = Path(path)
    if path.is_dir():
        return path / MODEL_NAME if (path / MODEL_NAME).is_file() else path / CHECKPOINT_NAME
    return path


class MissingExportError(FileNotFoundError):
    pass


def default_export(headless: bool = True) -> Path:
    """Path of this repository's export (used when no --env-path is given); it may not exist yet."""
    return EXPORTS_DIR / ("headless" if headless else "windowed") / BINARY_NAME


def export_binary(headless: bool = True) -> Path:
    """This repository's exported binary; raises a clear error naming the fix when it is missing."""
    path = default_export(headless)
    if not path.is_file() or not path.with_suffix(".pck").is_file():
        raise MissingExportError(
            f"the {'headless' if headless else 'windowed'} export is missing: {path} (and its .pck). "
            "Run `godot-ppo export` (or `make export`) first."
        )
    return path


def godot_server() -> str:
    """The headless Godot 3 build with editor tools, used to export and to run GDScript tests."""
    exe = shutil.which("godot3-server")
    if exe is None:
        raise FileNotFoundError(
            "godot3-server is not installed: run `sudo apt-get update && sudo apt-get install godot3-server godot3-runner`"
        )
    return exe
