"""Export the Godot project as a headless and a windowed binary (`godot-ppo export`).

Both presets in godot_project/export_presets.cfg use Debian's Godot 3.2.3 builds as custom templates:
`godot3-server` for the headless binary and `godot3-runner` for the windowed one. Exporting copies the
template next to a freshly packed `.pck`, so it takes seconds.
"""

import argparse
import shutil
import subprocess
import sys

from python_trainer.paths import BINARY_NAME, EXPORTS_DIR, GODOT_PROJECT, godot_server

PRESETS = {"headless": "Linux Headless", "windowed": "Linux Windowed"}
TEMPLATES = {"headless": "godot3-server", "windowed": "godot3-runner"}
EXPORT_TIMEOUT_S = 180


def export(kinds=("headless", "windowed"), quiet=False):
    server = godot_server()
    for kind in kinds:
        if shutil.which(TEMPLATES[kind]) is None:
            raise FileNotFoundError(
                f"{TEMPLATES[kind]} is not installed (the {kind} export template): "
                f"run `sudo apt-get install {TEMPLATES[kind]}`"
            )
        out = EXPORTS_DIR / kind / BINARY_NAME
        out.parent.mkdir(parents=True, exist_ok=True)
        for old in (out, out.with_suffix(".pck")):
            old.unlink(missing_ok=True)
        cmd = [server, "--path", str(GODOT_PROJECT), "--export", PRESETS[kind], str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"exporting {kind} timed out after {EXPORT_TIMEOUT_S}s: {' '.join(cmd)}") from None
        if not out.is_file() or not out.with_suffix(".pck").is_file():
            raise RuntimeError(
                f"exporting {kind} failed (exit code {proc.returncode}): {' '.join(cmd)}\n"
                + (proc.stdout + proc.stderr)[-3000:]
            )
        if not quiet:
            print(f"exported {kind}: {out}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="godot-ppo export", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(PRESETS), help="export only this kind")
    args = parser.parse_args(argv)
    try:
        export((args.only,) if args.only else tuple(PRESETS))
    except (FileNotFoundError, RuntimeError) as e:
        print(f"godot-ppo export: error: {e}", file=sys.stderr)
        return 1
    return 0
