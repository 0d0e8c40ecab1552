"""The rules between variants: each pair that does not combine, with its one-line refusal, in one table (the matrix in
docs/training.md is printed from it, with the flags that go only with another: `.venv/bin/python -m
python_trainer.tools.variant_matrix --write-docs`).

A check that refuses a combination says ``refusal(KEY, **fields)``, the table's text with the run's names filled in,
so each refusal is written here once; tests/test_combinations.py shows the command saying every one of them. A flag
that means something only beside another says so beside itself (base/flags.py's GoesWith); `goes_with_list` lists a
command's from its arguments dataclass, which a module above this layer hands in (tools/variant_matrix.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from python_trainer.base.flags import goes_with_fields

# The variants (and the kinds of game they meet), in the matrix's order: key -> how the matrix names it.
VARIANTS = {
    "lstm": "`--lstm`", "rnd": "`--rnd`", "demos": "`--demos`", "cnn": "`--cnn`", "camera": "a camera image",
    "no_camera": "no camera image", "frame_stack": "`--frame-stack`", "policies": "several policies",
    "self_play": "`--self-play`", "opponents": "`--opponents` other than the pool",
    "no_scripted": "controllers without get_scripted_action()", "async": "`--async`", "max_policy_lag": "`--max-policy-lag` > 1",
    "ray": "Ray (`--ray-address`)", "in_engine": "`--in-engine`", "editor": "`--editor`",
    "game_flags": "flags that start games", "watch": "`--watch`", "gym": "a gymnasium env",
    "godot_rl": "a godot_rl_agents plugin game", "old_export": "an older export",
    "resume": "`--resume` of a run trained otherwise", "tune": "`tune`'s trials", "tune_sets": "flags tune sets",
}


@dataclass(frozen=True)
class Refusal:
    """``first`` and ``second`` (VARIANTS' keys) do not combine (``also``: a third the rule needs too, or ""); ``text``
    is the line the user sees, its {fields} filled in by the check that says it; ``when``: what it is checked on
    (the flags, the game once it has said what it is, a resumed checkpoint, or a tune space file)."""

    first: str
    second: str
    text: str
    when: str = "flags"
    also: str = ""


_IN_ENGINE = "--in-engine: {what} does not run in the engine yet; drop --in-engine (or that flag)"
# What of a run does not run in the engine (variants/engine_actors.py's rule): key -> (what the line names it, rule).
IN_ENGINE_NAMES = {
    "in_engine/lstm": "--lstm (an LSTM's state would have to live in the engine)",
    "in_engine/async_ray": "--async with Ray (--ray-address)",
    "in_engine/max_policy_lag": "--max-policy-lag above 1",
    "in_engine/editor": "--editor",
    "in_engine/frame_stack": "--frame-stack (a camera)",
    "in_engine/godot_rl": "a game made with godot_rl_agents' plugin",
    "in_engine/camera": "a camera (an image observation; the CNN in GDScript costs about 5 ms per agent-decision)",
    "in_engine/old_export": "an export {which}: re-export it with godot-ppo export)",
}
_SEVERAL = "{env_id} has several policies ({names}): "
_SEES = "{env_id}'s observations hold a camera image ({key!r})"

RULES = {
    "self_play/ray": Refusal("self_play", "ray", "--self-play runs on this machine's games: Ray workers do not play "
                             "against a pool yet; drop --ray-address"),
    "async/self_play": Refusal("async", "self_play", "--async does not swap --self-play's opponents between rollouts "
                               "yet: drop --self-play or --async"),
    "async/editor": Refusal("async", "editor", "--editor trains the game the editor runs, which connects to this "
                            "process: drop --async"),
    "editor/game_flags": Refusal("editor", "game_flags", "--editor trains the one game that Play starts in the Godot "
                                 "editor, with the editor's settings: drop {flag} (or drop --editor, and godot-ppo "
                                 "starts the games)"),
    "policies/ray": Refusal("policies", "ray", _SEVERAL + "training several policies on Ray workers is not supported "
                            "yet; drop --ray-address to train them on this machine", "game"),
    "policies/async": Refusal("policies", "async", _SEVERAL + "--async collects for one policy yet; drop --async",
                              "game"),
    "policies/demos": Refusal("policies", "demos", "--demos clones one policy; {env_id}'s agents play {count} "
                              "({names}): drop --demos", "game"),
    "policies/frame_stack": Refusal("policies", "frame_stack", "--frame-stack {k}: {env_id} has several policies; frame "
                                    "stacks are for a game of one policy: drop --frame-stack", "game"),
    "policies/self_play": Refusal("policies", "self_play", "--self-play needs a game whose agents play one policy in "
                                  "two teams; {env_id}'s agents play the policies {names}: {fix}", "game"),
    "no_camera/frame_stack": Refusal("no_camera", "frame_stack", "--frame-stack {k}: {env_id} observes no camera image "
                                     "(no observation key containing \"2d\"), so there are no frames to stack: drop "
                                     "--frame-stack", "game"),
    "no_camera/cnn": Refusal("no_camera", "cnn", "--cnn chooses the encoder of a camera image, and {env_id}'s "
                             "observations hold none (no observation key containing \"2d\"): drop --cnn", "game"),
    "camera/rnd": Refusal("camera", "rnd", "--rnd's networks are MLPs over the observation row and " + _SEES +
                          ": curiosity from images is not supported yet; drop --rnd", "game"),
    "camera/demos": Refusal("camera", "demos", "--demos: demonstrations with camera images are not supported yet, and "
                            + _SEES + ": drop --demos", "game"),
    "opponents/godot_rl": Refusal("opponents", "godot_rl", "--opponents {kinds}: {env_id} does not say which of its "
                                  "agents the game can drive (no env_info \"agent_scripted\": a game made with "
                                  "godot_rl_agents' plugin or an older rl_sync addon): update the addon, or give "
                                  "--opponents pool:1", "game"),
    "opponents/no_scripted": Refusal("opponents", "no_scripted", "--opponents scripted: {env_id}'s controllers define "
                                     "no get_scripted_action() (agent_controller.gd's optional hook): implement it, or "
                                     "drop scripted from --opponents", "game"),
    "gym/self_play": Refusal("gym", "self_play", "--self-play plays a Godot game's two teams; {env_id} is a gymnasium "
                             "env: drop --self-play", "game"),
    "gym/watch": Refusal("gym", "watch", "--watch shows a Godot game's window; {env_id} is a gymnasium env: drop "
                         "--watch", "game"),
    "gym/in_engine": Refusal("gym", "in_engine", "--in-engine: {env_id} is not a Godot game; drop --in-engine", "game"),
    "in_engine/lstm": Refusal("in_engine", "lstm", _IN_ENGINE),
    "in_engine/async_ray": Refusal("in_engine", "ray", _IN_ENGINE, also="async"),
    "in_engine/max_policy_lag": Refusal("in_engine", "max_policy_lag", _IN_ENGINE, also="async"),
    "in_engine/editor": Refusal("in_engine", "editor", _IN_ENGINE),
    "in_engine/frame_stack": Refusal("in_engine", "frame_stack", _IN_ENGINE),
    "in_engine/godot_rl": Refusal("in_engine", "godot_rl", _IN_ENGINE, "game"),
    "in_engine/camera": Refusal("in_engine", "camera", _IN_ENGINE, "game"),
    "in_engine/old_export": Refusal("in_engine", "old_export", _IN_ENGINE, "game"),
    # --resume: the variants the flags ask for are the ones the checkpoint's run trained with (each variant's module
    # checks its own: recurrent.py, rnd.py, frame_stack.py, self_play.py, cnn_agent.py, policies.py).
    "resume/lstm": Refusal("resume", "lstm", "{where}: the checkpoint's agent has {had}, and this run asks for one {has}: "
                           "resume with the run's own setting (drop the flag) or start a new run", "checkpoint"),
    "resume/lstm_size": Refusal("resume", "lstm", "{where}: the checkpoint's LSTM has --lstm-size {saved}, not {asked}: "
                                "drop --lstm-size or start a new run", "checkpoint"),
    "resume/rnd": Refusal("resume", "rnd", "{where}: the checkpoint {had}, and this run asks for {asked}: resume with the "
                          "run's own setting (drop the flag) or start a new run", "checkpoint"),
    "resume/frame_stack": Refusal("resume", "frame_stack", "{where}: the run was trained with frame stack {saved}, and "
                                  "this run asks for frame stack {asked}: drop --frame-stack or start a new run",
                                  "checkpoint"),
    "resume/cnn": Refusal("resume", "cnn", "{where}: the checkpoint's encoder is --cnn {saved}, not {asked}: drop --cnn "
                          "or start a new run", "checkpoint"),
    "resume/self_play": Refusal("resume", "self_play", "{where}: the run was trained {had} --self-play: resume with the "
                                "run's own setting (drop the flag) or start a new run", "checkpoint"),
    "resume/policies": Refusal("resume", "policies", "{where}: the checkpoint holds {had}, and {env_id} now has {has}: "
                               "start a new run", "checkpoint"),
    "resume/policy_names": Refusal("resume", "policies", "{where}: the checkpoint holds the policies {saved}, and "
                                   "{env_id} now has {now}: start a new run (or give the agents their old policy "
                                   "names)", "checkpoint"),
    "tune/tune_sets": Refusal("tune", "tune_sets", "{label}: {key!r} is set by tune itself (the budget, seed, "
                              "evaluation, game and run folder: --trial-steps, --seed, --env-id / --env-path, --out): "
                              "drop it from the file", "space file"),
}


def refusal(rule: str, /, **fields) -> str:
    """The one line of the rule ``rule`` (RULES' key), its fields filled in (an in-engine rule's ``what``: its name,
    below)."""
    if rule in IN_ENGINE_NAMES:
        fields.setdefault("what", in_engine_name(rule, **fields))
    return RULES[rule].text.format(**fields)


def in_engine_name(key: str, **fields) -> str:
    """What the in-engine rule ``key`` names as not running in the engine (the default's line says it runs step by
    step)."""
    return IN_ENGINE_NAMES[key].format(**fields)


def in_engine_refusal(what: str) -> str:
    """The in-engine rules' one line, for ``what`` (in_engine_name's)."""
    return _IN_ENGINE.format(what=what)


def _shown(text: str) -> str:
    """A rule's text as the matrix's list shows it: its fields as <field>."""
    return re.sub(r"\{(\w+)(![rs])?\}", r"<\1>", text).replace("|", "\\|")


def matrix() -> str:
    """The table as markdown: a matrix of the variants that meet in a rule (a cell: the rule's number), then each
    rule's line."""
    keys = list(RULES)
    used = [v for v in VARIANTS if any(v in (r.first, r.second) for r in RULES.values())]
    cells = {}
    for number, key in enumerate(keys, 1):
        rule = RULES[key]
        for a, b in ((rule.first, rule.second), (rule.second, rule.first)):
            cells.setdefault((a, b), []).append(str(number))
    lines = ["| | " + " | ".join(str(i) for i in range(1, len(used) + 1)) + " |",
             "| --- |" + " --- |" * len(used)]
    for i, a in enumerate(used, 1):
        row = [", ".join(cells.get((a, b), [])) for b in used]
        lines.append(f"| {i}. {VARIANTS[a]} | " + " | ".join(row) + " |")
    lines.append("")
    for number, key in enumerate(keys, 1):
        rule = RULES[key]
        pair = f"{VARIANTS[rule.first]} with {VARIANTS[rule.second]}"
        if rule.also:
            pair += f" and {VARIANTS[rule.also]}"
        text = _shown(rule.text.replace("{what}", IN_ENGINE_NAMES.get(key, "{what}")))
        lines.append(f"{number}. {pair} (checked on {'the ' if rule.when != 'space file' else 'a '}{rule.when}): "
                     f"{text}")
    return "\n".join(lines) + "\n"


def goes_with_list(args_class) -> str:
    """The flags of a command's arguments dataclass ``args_class`` that go only with another, as a markdown list: each
    flag and the one line that refuses it given alone (GoesWith's, which names what it is for and the fix)."""
    return "".join(f"- `--{name.replace('_', '-')}`: {_shown(goes_with.refusal(name))}\n"
                   for name, goes_with in goes_with_fields(args_class))


BEGIN, END = "<!-- variant matrix:begin -->", "<!-- variant matrix:end -->"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def section(args_class) -> str:
    """docs/training.md's generated section: the matrix of the rules between variants, then the flags of the command
    whose arguments are ``args_class`` (train's) that go only with another."""
    return (f"{matrix()}\nFlags that mean something only beside another are refused alone, before any game starts\n"
            f"(each says so beside itself, base/flags.py's `GoesWith`):\n\n{goes_with_list(args_class)}")


def with_matrix(page: str, args_class) -> str:
    """``page`` with its text between the markers replaced by the generated section (``section(args_class)``)."""
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{section(args_class)}{END}{tail}"


if __name__ == "__main__":  # the writer needs train's flags, from a layer above this one
    raise SystemExit("docs/training.md's matrix is written by: .venv/bin/python -m python_trainer.tools.variant_matrix "
                     "--write-docs")
