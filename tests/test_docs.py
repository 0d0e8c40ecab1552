"""README.md and the pages under docs/: every command they show names something real, every relative link resolves,
and the facts a page states about the code are the code's.

README.md is the first screen and docs/*.md the reference, one topic a page. tests/test_own_game.py runs the
README's tutorial as written, and the other tests the behaviour each page describes. This test checks, in a few
seconds, what goes stale without anyone noticing when a flag, a target or a page moves (and, marked slow, runs
docs/onnx.md's blocks as written):

- every `godot-ppo SUBCOMMAND ...` (in a ```bash block or an inline code span) names a real subcommand, and every
  flag it uses appears in `godot-ppo SUBCOMMAND --help` (each help is run once);
- every `make TARGET` is a target of the Makefile;
- every game binary command (`.../NAME.x86_64 --key=value`) uses keys that docs/binary.md's table documents and the
  addon's GDScript reads (Godot's own `--fixed-fps` aside);
- docs/binary.md's table is the one list of the binary's flags: exactly the flags the addon's GDScript reads, and
  no other page has a table of them;
- every `scripts/NAME.py` exists and its flags are the script's own; in a ```bash block it is run with `python` or is
  executable;
- every `ray start`/`ray stop` flag appears in that command's `--help`;
- any other command of a ```bash block is in EXCEPTIONS, with the reason it cannot be checked this way;
- every relative link or image of README.md, docs/*.md and the addon's README points to a file that exists (and a
  `#anchor` to one of that page's headings), and the README links every page of docs/;
- README.md has at most 250 lines, its "Train your own game" section and every `--env-path` command lie within the
  first 150, and it has exactly two set-up commands, `make demo` and `make test`;
- the controller contract (docs/own_game.md) names every public member of agent_controller.gd, one hop from the
  README;
- "When it does not learn" (docs/training.md) names only tags the trainer writes and every ablation switch;
- docs/benchmarks.md is one row per measurement, each on a machine the page describes;
- the numbers the docs state about the code: ppo.py's size, `make demo`'s steps and training time;
- docs/onnx.md's ```bash and ```python blocks run as written, in order (slow: they play and train a little).
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, free_port

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
ENGINE_FLAGS = {"--fixed-fps", "--disable-render-loop"}
ADDON = REPO / "godot_project" / "addons" / "rl_sync"
ADDON_README = ADDON / "README.md"

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
             for key, argv in argvs.items()}
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
                  if f'"{f[2:]}"' not in gd]
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


def premature_breaks(help_text: str) -> list[str]:
    """The lines of a tyro help box that end before the next line's first word would have fit: a paragraph broken
    where its source line broke, not where the column is full."""
    found = []
    lines = help_text.splitlines()
    for a, b in zip(lines, lines[1:]):
        if not all(line.startswith("│") and line.endswith("│") for line in (a, b)):
            continue
        inner_a, inner_b = a[1:-1], b[1:-1]
        next_line = re.match(r"( {5,})([A-Za-z]\S*)", inner_b)  # help text going on, not a new flag or item
        if not next_line:
            continue
        column = len(next_line.group(1))
        if inner_a[:column].strip() and inner_a[column - 2 : column] != "  " or not inner_a[column:].strip():
            continue  # a flag too long for its column, its help below it
        if len(inner_a.rstrip()) + 1 + len(next_line.group(2)) <= len(inner_a) - 1:
            found.append(f"{inner_a.strip()!r}, then {next_line.group(2)!r}")
    return found


def test_a_flags_help_is_wrapped_as_one_paragraph(helps):
    """A field's docstring spans several source lines; --help wraps it to the column, not line by line."""
    broken = {key: premature_breaks(text) for key, text in helps.items() if key.startswith("godot-ppo ")}
    assert sum("│" in text for key, text in helps.items()) >= 5  # tyro's boxes were read
    assert not any(broken.values()), broken
    assert premature_breaks("│ --a    one two          │\n│        three            │") == ["'--a    one two', then 'three'"]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", strip_fences(page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    text = re.sub(r"`[^`]*`", "", strip_fences(page.read_text()))
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_points_to_a_file_that_exists():
    problems = []
    for page in [*PAGES, ADDON_README]:
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


def test_the_readme_has_two_set_up_commands_and_the_own_game_commands_early():
    lines = README.read_text().splitlines()
    start = lines.index("## The two commands")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    setup = [c.split("#")[0].strip() for c in bash_commands("\n".join(lines[start:end]))]
    assert setup == ["make demo", "make test"], setup
    installs = re.compile(r"\b(pip3? install|apt(-get)? install|python3? -m venv|make (deps|system-deps|export))\b")
    others = [c for c in bash_commands("\n".join(lines)) if installs.search(c)]
    assert not others, f"set-up commands besides make demo / make test: {others}"
    own_game = [i + 1 for i, line in enumerate(lines) if "--env-path" in line and not line.startswith(("`", "-"))]
    assert own_game and max(own_game) <= 150, f"README's --env-path commands are on lines {own_game}, after 150"


# How the addon's GDScript reads a flag: RlArgs' getters (the key first, or after the SceneTree: the index of the
# key's argument), a Dictionary from RlArgs.parse() named `args` (`args.has("key")`, `args.get("key", ...)`, or a
# loop over a list of keys), and the raw command line (`begins_with("--" + FLAG ...)`).
KEY_ARGUMENT = {"get_int": 1, "get_positive_float": 1, "get_string": 0, "has": 0}
GETTER = re.compile(r"\bRlArgs\.(get_int|get_positive_float|get_string|has)\(")


def call_arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose "(" is just before ``start``."""
    args, depth, current = [], 0, ""
    for ch in text[start:]:
        if ch == ")" and depth == 0:
            return [*args, current.strip()]
        if ch == "," and depth == 0:
            args, current = [*args, current.strip()], ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        current += ch
    return args


def addon_flags(folder: Path) -> tuple[set[str], list[str]]:
    """(the `--flags` the GDScript under ``folder`` reads, the reads whose flag this test cannot name)."""
    found, unknown = set(), []
    for path in sorted(folder.rglob("*.gd")):
        if path.name == "rl_args.gd":  # the parser itself reads every key
            continue
        text = path.read_text()
        consts = dict(re.findall(r'^const (\w+)\s*:?=\s*"([^"]*)"', text, re.M))

        def name(expr: str, where: str):
            literal = re.fullmatch(r'"(\w+)"', expr)
            if literal or expr in consts:
                found.add("--" + (literal.group(1) if literal else consts[expr]))
            else:
                unknown.append(f"{path.name}: {where}")

        for m in GETTER.finditer(text):
            args = call_arguments(text, m.end())
            index = KEY_ARGUMENT[m.group(1)]
            name(args[index] if len(args) > index else "", m.group(0) + ", ".join(args) + ")")
        loops = {var: keys for var, keys in re.findall(r"for (\w+) in \[([^\]]*)\]:", text)}
        for m in re.finditer(r"\bargs\.(has|get)\(([^,)]*)", text):
            expr = m.group(2).strip()
            if expr in loops:
                found.update("--" + k for k in re.findall(r'"(\w+)"', loops[expr]))
            else:
                name(expr, m.group(0))
        if "RlArgs.parse()" in text and not re.search(r"\bargs\.(has|get)\(", text):
            unknown.append(f"{path.name}: RlArgs.parse()'s Dictionary read under a name other than `args`")
        if "get_cmdline_args()" in text:
            raw = re.findall(r'begins_with\("--(\w+)=?"\)|begins_with\("--" \+ (\w+)', text)
            for literal, const in raw:
                name(f'"{literal}"' if literal else const, "begins_with(...)")
            if not raw:
                unknown.append(f"{path.name}: OS.get_cmdline_args() read without a begins_with(\"--KEY\")")
    return found, unknown


def test_the_binary_flags_are_listed_once_and_are_the_flags_the_addon_reads():
    read, unknown = addon_flags(ADDON)
    assert not unknown, f"flag reads this test cannot name (use a string literal or a constant): {unknown}"
    assert {"--port", "--agents", "--speedup", "--env_param", "--headless", "--list_envs"} <= read  # every way is seen
    documented = binary_keys()
    assert not read - documented, f"flags the addon reads that docs/binary.md's table lacks: {sorted(read - documented)}"
    assert not documented - read, f"docs/binary.md lists flags the addon never reads: {sorted(documented - read)}"
    copies = []
    for page in [*PAGES, ADDON_README]:
        if page.name == "binary.md":
            continue
        for line in page.read_text().splitlines():
            first = line.split("|")[1] if line.startswith("| `--") else ""  # a row that documents a flag
            if set(re.findall(r"--[\w-]+", first)) & documented:
                copies.append(f"{page.relative_to(REPO)}: {line[:80]}")
    assert not copies, f"tables of the binary's flags outside docs/binary.md (link to it instead): {copies}"


def test_the_flag_check_sees_a_flag_added_to_the_gdscript(tmp_path):
    (tmp_path / "mode.gd").write_text(
        'const FLAG := "raw"\n'
        'func a(tree):\n\tRlArgs.get_int(tree, "new_flag", 0, 1)\n\tRlArgs.has("other")\n'
        '\tfor arg in OS.get_cmdline_args():\n\t\tif arg.begins_with("--" + FLAG + "="):\n\t\t\tpass\n'
        'static func b(args: Dictionary):\n\tfor key in ["x", "y"]:\n\t\tif args.has(key):\n\t\t\tpass\n'
        '\treturn args.get("env", "")\n')
    assert addon_flags(tmp_path) == ({"--new_flag", "--other", "--raw", "--x", "--y", "--env"}, [])
    (tmp_path / "mode.gd").write_text('var KEY = "k"\nfunc a(tree):\n\tRlArgs.get_string(KEY)\n')
    assert addon_flags(tmp_path)[1] == ["mode.gd: RlArgs.get_string(KEY)"]


def section(page: Path, heading: str) -> str:
    """The text of a page's `## heading` section, up to the next `## `."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_the_controller_contract_is_one_hop_from_the_readme_and_names_every_member():
    assert "docs/own_game.md#the-controller-contract" in links(README)
    contract = section(DOCS / "own_game.md", "The controller contract")
    source = (ADDON / "agent_controller.gd").read_text()
    members = re.findall(r"^func ([a-z]\w*)\(", source, re.M) + re.findall(r"^(?:export )?var ([a-z]\w*)", source, re.M)
    assert "get_obs" in members and "reward" in members
    missing = [m for m in members if f"`{m}" not in contract]
    assert not missing, f"public members of agent_controller.gd the contract does not name: {missing}"
    for sensor in ("RaycastSensor2D", "RaycastSensor3D"):
        assert sensor in contract


def trainer_source() -> str:
    return "\n".join(p.read_text() for p in (REPO / "python_trainer").rglob("*.py"))


def test_when_it_does_not_learn_names_real_tags_and_every_ablation_switch():
    from python_trainer import normalization, ppo, rollout

    text = section(DOCS / "training.md", "When it does not learn")
    source = trainer_source()
    tags = set(re.findall(r"`((?:charts|losses|perf|diagnostics|eval|episode_info|actions)/[\w<>]+)`", text))
    assert {"charts/episodic_return", "losses/approx_kl", "perf/update_s"} <= tags
    unwritten = [t for t in sorted(tags) if t not in source and f"{t.split('/')[0]}/{{" not in source]
    assert not unwritten, f"tags the trainer never writes: {unwritten}"
    switches = {f"--no-{f.name.replace('_', '-')}" for cls in (ppo.Args, normalization.NormArgs, rollout.RolloutArgs)
                for f in dataclasses.fields(cls) if "bool" in str(f.type)}
    named = set(re.findall(r"`(--no-[\w-]+)`", text))
    assert switches == named, f"switches without a word: {sorted(switches - named)}; no such switch: {sorted(named - switches)}"


# The families of tags the trainer writes; a `{name}` in the source is a `<name>` in the docs (or one real name).
TAG = re.compile(r"(?<![\w/])((?:charts|losses|perf|diagnostics|eval|demos|curriculum|episode_info)/[\w{}]+)")


def test_the_tensorboard_table_names_every_tag_the_trainer_writes():
    documented = set(re.findall(r"`([\w/<>]+)`", section(DOCS / "training.md", "TensorBoard tags")))
    written = set(TAG.findall(trainer_source()))
    assert {"charts/episodic_return", "losses/approx_kl", "diagnostics/update_epochs_done"} <= written
    missing = []
    for tag in sorted(written):
        pattern = re.sub(r"\\\{\w+\\\}", r"(<\\w+>|\\w+)", re.escape(tag))
        if not any(re.fullmatch(pattern, name) for name in documented):
            missing.append(tag)
    assert not missing, f"tags the trainer writes that docs/training.md's TensorBoard table does not name: {missing}"


MACHINE = re.compile(r"^- \*\*([A-Z])\*\*: ", re.M)


def test_benchmarks_are_one_row_per_measurement_on_a_described_machine():
    text = (DOCS / "benchmarks.md").read_text()
    machines = set(MACHINE.findall(text))
    table = text[text.index("| measurement |"):text.index("\n\n", text.index("| measurement |"))].splitlines()[2:]
    assert len(table) > 15
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in table]
    firsts = [c[0] for c in cells]
    assert len(set(firsts)) == len(firsts), f"measurements with more than one row: {firsts}"
    assert all(c[-1] in machines for c in cells), [c[-1] for c in cells]
    long_rows = [row[:60] for row in text.splitlines() if row.startswith("|") and len(row) > 400]
    assert not long_rows, f"rows over 400 characters (a lab notebook's; the history goes under History): {long_rows}"
    missing = [s for s in re.findall(r"`(bench_\w+\.py)`", text) if not (REPO / "scripts" / s).is_file()]
    assert not missing, f"no such scripts: {missing}"


def test_the_numbers_the_docs_state_about_the_code():
    stated = re.search(r"`python_trainer/ppo.py` is the whole algorithm in one file \(about (\d+) lines\)",
                       (DOCS / "training.md").read_text())
    assert stated, "docs/training.md no longer states ppo.py's size"
    actual = len((REPO / "python_trainer" / "ppo.py").read_text().splitlines())
    assert abs(actual - int(stated.group(1))) <= 0.1 * actual, f"ppo.py has {actual} lines, the docs say about {stated.group(1)}"
    readme = README.read_text()
    demo = re.search(r"`make demo` trains for (\d+)M agent-steps \((\d+)–(\d+) s of training", readme)
    assert demo, "README no longer states make demo's steps and time"
    recipe = re.search(r"^demo:.*?--total-timesteps (\d+)", (REPO / "Makefile").read_text(), re.M | re.S)
    assert int(recipe.group(1)) == int(demo.group(1)) * 1_000_000
    row = next(r for r in (DOCS / "benchmarks.md").read_text().splitlines() if r.startswith("| `make demo`'s training"))
    seconds = [float(s) for s in re.findall(r"(\d+(?:\.\d+)?) s\b", row.split("|")[3])]
    low, high = int(demo.group(2)), int(demo.group(3))
    assert seconds and all(low <= round(s) <= high for s in seconds), f"benchmarks.md measured {seconds} s, README says {low}–{high} s"


# What every ```python block of a page that runs is given first: godot-rl's fixed port (11008) swapped for a free one,
# so that two runs on one machine never meet (its wrappers read GodotEnv.DEFAULT_PORT when they are built).
PYTHON_PRELUDE = "from godot_rl.core.godot_env import GodotEnv\nGodotEnv.DEFAULT_PORT = {port}\n"


@pytest.mark.slow
def test_the_onnx_page_runs_as_written(headless_export, tmp_path):
    """docs/onnx.md's blocks in order, in a scratch folder that sees this repository's exports: the pretrained policy
    to ONNX, back to a policy file and played in the engine; then godot-rl's SB3 example in short, its own exporter
    as it comes (torch's default exporter, with onnxscript), and our import of what it wrote."""
    (tmp_path / "exports").symlink_to(REPO / "exports")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    outputs = []
    for lang, block in FENCE.findall((DOCS / "onnx.md").read_text()):
        if lang == "python":
            runs = [[sys.executable, "-c", PYTHON_PRELUDE.format(port=free_port()) + block]]
        else:
            assert lang == "bash", f"a ```{lang} block in docs/onnx.md: say how to run it here"
            runs = [["bash", "-c", line] for line in bash_commands(f"```bash\n{block}```\n")]
        for argv in runs:
            result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
            assert result.returncode == 0, (argv[-1], result.stderr[-3000:])
            outputs.append(result.stdout)
    report = json.loads(next(x for out in outputs for x in out.splitlines() if x.startswith('{"eval"')))["eval"]
    assert report["episodes"] == 32 and report["mean_return"] > 30, report
    assert (tmp_path / "sb3_model.onnx").is_file() and (tmp_path / "sb3_model.onnx.data").is_file()
    policy = json.loads((tmp_path / "sb3_policy.json").read_text())
    assert policy["env"] == "ball_chase" and [k["key"] for k in policy["action_keys"]] == ["move"]


# Compiles each res://blockN.gd of a scratch project (the addon beside them) and prints one line per file.
COMPILE_CHECK = """extends SceneTree
func _init():
	var dir := Directory.new()
	dir.open("res://")
	dir.list_dir_begin(true)
	var name := dir.get_next()
	while name != "":
		if name.begins_with("block") and name.ends_with(".gd"):
			var file := File.new()
			file.open("res://" + name, File.READ)
			var script := GDScript.new()
			script.source_code = file.get_as_text()
			script.resource_path = "res://" + name
			print("compiled %s: %s" % [name, script.reload() == OK])
		name = dir.get_next()
	quit()
"""


def test_the_own_flow_pages_controllers_compile_against_the_addon_alone(tmp_path):
    """docs/own_flow.md's and own_flow_more.md's ```gdscript blocks (Dodge the Creeps', the Platformer's and Pong's
    controllers) compile in a project that holds only our addon: they preload nothing of the demos', whose code is
    not ours to keep. A block broken on purpose is run beside them, so the check can fail."""
    blocks = [block for page in ("own_flow.md", "own_flow_more.md")
              for lang, block in FENCE.findall((DOCS / page).read_text()) if lang == "gdscript"]
    assert len(blocks) == 3, "the pages show Dodge the Creeps', the Platformer's and Pong's controllers"
    shutil.copytree(ADDON, tmp_path / "addons" / "rl_sync")
    (tmp_path / "project.godot").write_text("config_version=4\n")
    (tmp_path / "check.gd").write_text(COMPILE_CHECK)
    for i, block in enumerate([*blocks, 'extends Node\nfunc f():\n\treturn preload("res://no_such_demo.tscn")\n']):
        (tmp_path / f"block{i}.gd").write_text(block)
    from python_trainer.base.paths import godot_server

    out = subprocess.run([godot_server(), "--path", str(tmp_path), "-s", "check.gd"], capture_output=True, text=True,
                         timeout=60).stdout
    results = dict(re.findall(r"^compiled (block\d+)\.gd: (True|False)$", out, re.M))
    assert results == {**{f"block{i}": "True" for i in range(3)}, "block3": "False"}, out
