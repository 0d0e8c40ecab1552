"""README.md and the pages under docs/: every command they show names something real, every relative link resolves.

README.md is the first screen and docs/*.md the reference, one topic a page. Nothing is trained here:
tests/test_own_game.py runs the README's tutorial as written, and the other tests the behaviour each page describes.
This test checks, in a few seconds, what goes stale without anyone noticing when a flag, a target or a page moves:

- every `godot-ppo SUBCOMMAND ...` (in a ```bash block or an inline code span) names a real subcommand, and every
  flag it uses appears in `godot-ppo SUBCOMMAND --help` (each help is run once);
- every `make TARGET` is a target of the Makefile;
- every game binary command (`.../NAME.x86_64 --key=value`) uses keys that docs/binary.md's table documents and the
  addon's GDScript reads (Godot's own `--fixed-fps` aside);
- every `scripts/NAME.py` exists and its flags are the script's own; in a ```bash block it is run with `python` or is
  executable;
- every `ray start`/`ray stop` flag appears in that command's `--help`;
- any other command of a ```bash block is in EXCEPTIONS, with the reason it cannot be checked this way;
- every relative link or image of README.md and docs/*.md points to a file that exists (and a `#anchor` to one of
  that page's headings), and the README links every page of docs/;
- README.md has at most 250 lines, and its "Train your own game" section lies within the first 150.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
HELP_TIMEOUT_S = 60

# Commands of ```bash blocks that cannot be checked by a --help or a file: the exact text, and why.
EXCEPTIONS = {
    "mkdir -p my_game/addons && cp -r godot_project/addons/rl_sync my_game/addons/":
        "the tutorial's set-up in the shell; tests/test_own_game.py runs it as written",
    "scp ~/.ray/auth_token OTHER_HOST:.ray/auth_token": "copies a file to another host of a Ray cluster",
    "rsync -a exports/ OTHER_HOST:$PWD/exports/": "copies the exports to another host of a Ray cluster",
}
# Flags a game binary takes that Godot itself reads (rl_args.gd never sees them).
ENGINE_FLAGS = {"--fixed-fps"}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
FLAG = re.compile(r"(?<![\w/.~$-])(--?[A-Za-z][\w-]*)")


def strip_fences(text: str) -> str:
    return FENCE.sub("", text)


def bash_commands(text: str) -> list[str]:
    """The commands of a page's ```bash blocks: continuation lines joined, comments dropped."""
    commands = []
    for lang, block in FENCE.findall(text):
        if lang != "bash":
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def inline_commands(text: str) -> list[str]:
    """Inline code spans outside the code blocks that are commands of ours: godot-ppo, make, scripts/, a binary."""
    spans = [re.sub(r"\s+", " ", s).strip() for s in re.findall(r"`([^`]+)`", strip_fences(text))]
    spans = [s for s in spans if not re.match(r"godot-ppo \S+: ", s)]  # a message it prints, `godot-ppo train: error: ...`
    return [s for s in spans if re.match(r"(godot-ppo|make)( |$)|scripts/\S+\.py|\S+\.x86_64 --", s)]


def flags(command: str) -> set[str]:
    """The flags a command passes (`--key=value` counts as `--key`; a `$(...)` inside is another command's)."""
    return {f.split("=")[0] for f in FLAG.findall(re.sub(r"\$\([^)]*\)", "", command))}


def all_commands() -> list[tuple[str, str, bool]]:
    """(page name, command, from a ```bash block) for every page."""
    found = []
    for page in PAGES:
        text = page.read_text()
        name = page.relative_to(REPO).as_posix()
        found += [(name, c, True) for c in bash_commands(text)]
        found += [(name, c, False) for c in inline_commands(text)]
    return found


def godot_ppo() -> list[str]:
    script = Path(sys.executable).parent / "godot-ppo"
    return [str(script)] if script.exists() else [sys.executable, "-m", "python_trainer"]


def run_helps(argvs: dict) -> dict:
    """{key: --help output} for {key: argv}, all started at once (the slowest, train's, imports torch)."""
    procs = {key: subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for key, argv in argvs.items()}  # fmt: skip
    out = {}
    try:
        for key, proc in procs.items():
            text, _ = proc.communicate(timeout=HELP_TIMEOUT_S)
            assert proc.returncode == 0, f"{' '.join(argvs[key])} failed:\n{text[-2000:]}"
            out[key] = text
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.fixture(scope="module")
def helps() -> dict:
    """{"godot-ppo": top-level help, "godot-ppo SUB": SUB's help, "ray start"/"ray stop": Ray's}."""
    top = subprocess.run([*godot_ppo(), "--help"], cwd=REPO, capture_output=True, text=True, timeout=HELP_TIMEOUT_S)
    assert top.returncode == 0, top.stderr
    commands_part = top.stdout.split("commands:", 1)[1]
    subcommands = re.findall(r"^  (\S+)\s{2,}", commands_part, re.M)
    assert "train" in subcommands and "play" in subcommands, top.stdout
    argvs = {f"godot-ppo {sub}": [*godot_ppo(), sub, "--help"] for sub in subcommands}
    ray = shutil.which("ray", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert ray, "the `ray` command (installed with the package) is missing"
    argvs.update({f"ray {sub}": [ray, sub, "--help"] for sub in ("start", "stop")})
    return {"godot-ppo": top.stdout, **run_helps(argvs)}


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", (REPO / "Makefile").read_text(), re.M))


def binary_keys() -> set[str]:
    """The keys of docs/binary.md's table of the game binary's command line."""
    table = [line for line in (DOCS / "binary.md").read_text().splitlines() if line.startswith("| `--")]
    return {f.split("=")[0] for line in table for f in re.findall(r"--[\w-]+", line.split("|")[1])}


def gdscript_text() -> str:
    return "\n".join(p.read_text() for p in (REPO / "godot_project").rglob("*.gd"))


def problems_of(command: str, in_bash: bool, helps: dict, targets: set, keys: set, gd: str) -> list[str]:
    words = command.split()
    used = flags(command)
    if command in EXCEPTIONS:
        return []
    if words[0] == "godot-ppo":
        if len(words) == 1 or words[1].startswith("-"):
            return [f"godot-ppo takes no flag {f}" for f in used - {"--help", "-h"}]
        key = f"godot-ppo {words[1]}"
        if key not in helps:
            return [f"no subcommand {words[1]!r} (godot-ppo --help lists {sorted(k[10:] for k in helps if k.startswith('godot-ppo '))})"]
        accepted = set(FLAG.findall(helps[key]))
        return [f"{key} has no flag {f}" for f in sorted(used - accepted)]
    if words[0] == "make":
        return [f"the Makefile has no target {t!r}" for t in words[1:] if not t.startswith("-") and t not in targets]
    if words[0] == "ray" and len(words) > 1 and f"ray {words[1]}" in helps:
        accepted = set(FLAG.findall(helps[f"ray {words[1]}"]))
        return [f"ray {words[1]} has no flag {f}" for f in sorted(used - accepted)]
    script_at = 1 if words[0] == "python" and len(words) > 1 else 0
    if words[script_at].startswith("scripts/") and words[script_at].endswith(".py"):
        path = REPO / words[script_at]
        if not path.is_file():
            return [f"{words[script_at]} does not exist"]
        found = []
        if in_bash and script_at == 0 and not os.access(path, os.X_OK):
            found.append(f"{words[script_at]} is not executable: write `python {words[script_at]}`")
        source = path.read_text()
        declared = set(re.findall(r'"(--?[\w-]+)"', " ".join(re.findall(r"add_argument\(([^)]*)\)", source))))
        return found + [f"{words[script_at]} has no flag {f}" for f in sorted(used - declared - {"--help", "-h"})]
    if words[0].endswith(".x86_64"):
        found = [f"the binary's table (docs/binary.md) has no {f}" for f in sorted(used - keys - ENGINE_FLAGS)]
        found += [f"the addon's GDScript never reads {f}" for f in sorted(used - ENGINE_FLAGS)
                  if f'"{f[2:]}"' not in gd]  # fmt: skip
        return found
    if in_bash:
        return ["not a command this test knows how to check: check it here, or add it to EXCEPTIONS with a reason"]
    return []


def test_every_command_names_real_subcommands_targets_scripts_and_flags(helps):
    targets, keys, gd = make_targets(), binary_keys(), gdscript_text()
    assert {"demo", "test", "play", "export"} <= targets
    assert "--policy" in keys and "--eval_episodes" in keys and "--fixed-fps" in (DOCS / "binary.md").read_text()
    commands = all_commands()
    assert len([c for _, c, in_bash in commands if in_bash]) > 40  # the pages were read
    problems = []
    for page, command, in_bash in commands:
        problems += [f"{page}: `{command}`: {p}" for p in problems_of(command, in_bash, helps, targets, keys, gd)]
    assert not problems, "\n".join(problems)
    unused = set(EXCEPTIONS) - {c for _, c, _ in commands}
    assert not unused, f"EXCEPTIONS that no page shows any more: {unused}"


def test_the_checks_can_fail(helps):
    """A misspelt flag, an unknown subcommand, target, script or binary key, and an unknown tool are each caught."""
    targets, keys, gd = make_targets(), binary_keys(), gdscript_text()

    def problems(command, in_bash=True):
        return problems_of(command, in_bash, helps, targets, keys, gd)

    assert problems("godot-ppo train --env-id CartPole-v1 --num-env 4") == ["godot-ppo train has no flag --num-env"]
    assert problems("godot-ppo train --help") == [] and problems("godot-ppo --help") == []
    assert "no subcommand 'watch'" in problems("godot-ppo watch runs/x")[0]
    assert problems("make demo test") == [] and problems("make deploy") == ["the Makefile has no target 'deploy'"]
    assert problems("exports/headless/rl_games.x86_64 --env=jumper --policy=random --fixed-fps 60") == []
    assert len(problems("exports/headless/rl_games.x86_64 --evaluate_episodes=3")) == 2
    assert problems("python scripts/bench_cartpole.py --seeds 1") == []
    assert problems("python scripts/bench_cartpole.py --seed 1") == ["scripts/bench_cartpole.py has no flag --seed"]
    assert problems("python scripts/nope.py") == ["scripts/nope.py does not exist"]
    assert problems("ray start --head --port=6379") == [] and problems("ray start --heads") != []
    assert problems("tensorboard --logdir runs") != [] and problems("tensorboard --logdir runs", in_bash=False) == []


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", strip_fences(page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    text = re.sub(r"`[^`]*`", "", strip_fences(page.read_text()))
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_points_to_a_file_that_exists():
    problems = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: ({target})"
            if not resolved.exists():
                problems.append(f"{where}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where}: {resolved.name} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_first_screen_that_links_every_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the reference to docs/"
    start = lines.index("## Train your own game")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))  # the next section
    assert end <= 150, f"README's 'Train your own game' ends on line {end}, after the first 150 lines"
    assert start < end - 20  # the tutorial itself, not only a link
    assert ["make demo", "make test"] == [c.split("#")[0].strip() for c in bash_commands("\n".join(lines))[:2]]
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    unlinked = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
