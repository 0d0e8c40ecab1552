"""The contract between the game and the trainer (python_trainer/base/contract.py): the addon's generated copy is
current, the binary's flags the trainer passes are all declared in it, and a game started with a misspelt flag of ours
says so in one line and runs on."""

import json
import re
import socket
import subprocess
import sys

import pytest

from python_trainer.base import bounds, contract
from python_trainer.base.paths import GODOT_PROJECT, godot_server
from python_trainer.base.processes import run_to_end
from python_trainer.envs.game import game_environ
from python_trainer.envs.protocol import GodotConnection

from helpers import end


def test_the_addons_contract_gd_is_the_one_generated_from_contract_py():
    assert contract.CONTRACT_GD.read_text() == contract.gdscript(), (
        "addons/rl_sync/contract.gd is stale: run python -m python_trainer.base.contract --write")
    assert contract.main(["--check"]) == 0


def test_a_flag_is_asked_for_by_name_and_an_undeclared_one_is_a_key_error():
    assert contract.flag("agents") == "--agents"
    with pytest.raises(KeyError):
        contract.flag("agnets")


def test_every_flag_the_addon_reads_by_name_is_in_the_contract():
    """The addon's RlArgs reads (get_int(tree, "agents", ...), has("port"), get_string("policy")...) name only
    declared flags: a flag read but not declared would be warned about as unknown when a user gives it."""
    addon = contract.CONTRACT_GD.parent
    read = set()
    for path in list(addon.glob("*.gd")) + list((addon.parent.parent / "games").rglob("*.gd")):
        text = path.read_text()
        read |= set(re.findall(r'RlArgs\.(?:get_int|get_string|get_positive_float|has)\((?:[\w().]+, )?"([a-z]\w*)"',
                               text))
        read |= set(re.findall(r'^const (?:\w+_)?FLAG := "([a-z]\w*)"', text, re.M))  # a flag's name kept in a constant
    assert read and read <= set(contract.FLAGS), sorted(read - set(contract.FLAGS))


def test_docs_binary_md_lists_exactly_the_contracts_flags_but_the_tests_own():
    rows = [line for line in (contract.CONTRACT_GD.parents[3] / "docs" / "binary.md").read_text().splitlines()
            if line.startswith("| `--")]
    documented = {name for row in rows for name in re.findall(r"`--([a-z_]+)", row.split("|")[1])}
    assert documented == {name for name, reader in contract.FLAGS.items() if reader != contract.TESTS}


def test_a_game_started_with_a_misspelt_flag_says_it_in_one_line_and_runs_on(headless_export):
    out = run_to_end([str(headless_export), "--env=ball_chase", "--agents=2", "--agnets=4", "--benchmark_steps=20",
                      "--fixed-fps", "60"], timeout=60, env=game_environ())
    said = [line for line in out.stderr.splitlines() if "unknown flag" in line]
    assert said == ["rl_sync: warning: unknown flag --agnets=4; did you mean --agents?"], out.stderr[-2000:]
    assert out.returncode == 0 and '"benchmark"' in out.stdout


def test_a_game_started_with_our_flags_and_godot_rls_says_nothing_of_them(headless_export):
    out = run_to_end([str(headless_export), "--env=ball_chase", "--env_seed=3", "--speedup=2", "--action_repeat=1",
                      "--headless", "--benchmark_steps=20", "--fixed-fps", "60"], timeout=60, env=game_environ())
    assert out.returncode == 0 and "unknown flag" not in out.stderr, out.stderr[-2000:]


def test_the_trainer_writes_the_binarys_flags_through_the_contract_never_as_literals():
    """No module but contract.py spells a game flag as a string: `"--name=..."` (the binary's form; the trainer's
    own flags take a space) or a bare `"--name"` of an underscored flag; they go through contract.arg and flag."""
    root = contract.CONTRACT_GD.parents[3] / "python_trainer"
    names = "|".join(sorted(contract.FLAGS, key=len, reverse=True))
    underscored = "|".join(n for n in contract.FLAGS if "_" in n)
    spelt = re.compile(r'(?<![\w-])f?["\']--(?:(?:%s)=|(?:%s)["\'])' % (names, underscored))
    found = [f"{path.relative_to(root.parent)}:{i}" for path in root.rglob("*.py") if path.name != "contract.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if spelt.search(line)]
    assert found == [], found


def test_the_contract_module_runs_as_a_command():
    result = subprocess.run([sys.executable, "-m", "python_trainer.base.contract", "--check"], capture_output=True,
                            text=True, cwd=contract.CONTRACT_GD.parents[3], timeout=60)
    assert result.returncode == 0, result.stderr


# --- The rest of the contract: each group's values, read by GDScript through the addon's own files, are Python's ---

_PROBE = """extends SceneTree
const Contract = preload("res://addons/rl_sync/contract.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const TrainerHandshake = preload("res://addons/rl_sync/trainer_handshake.gd")
const RunFlags = preload("res://addons/rl_sync/run_flags.gd")
const FragmentWire = preload("res://addons/rl_sync/fragment_wire.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")
const ConvNetwork = preload("res://addons/rl_sync/conv_network.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")
const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const PolicyNetwork = preload("res://addons/rl_sync/policy_network.gd")
const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const EnvInfoExtras = preload("res://addons/rl_sync/env_info_extras.gd")
const DriverMessage = preload("res://addons/rl_sync/driver_message.gd")
const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")
const ErrorWatch = preload("res://addons/rl_sync/error_watch.gd")
func _init():
	print("contract-probe " + to_json({%s}))
	quit()
"""


def _wire_pairs():
    """(GDScript expression, the Python value it must be) of the wire's facts, as each side reads them."""
    from python_trainer.base import flags
    from python_trainer.envs import editor, fragment_wire, protocol

    pairs = [(f"Contract.{name}", getattr(protocol, name)) for name in (
        "MAJOR_VERSION", "MINOR_VERSION", "EXTENSION_KEY", "ENV_INFO_KEYS", "PACKED_OBS_ENCODING",
        "BINARY_STEP_ENCODING", "POOL_BYTE_ARRAY", "POOL_INT_ARRAY", "POOL_REAL_ARRAY", "PACKED_HEADER_BYTES",
        "STATUS_RUNNING", "STATUS_TERMINATED", "STATUS_TRUNCATED", "MAX_MESSAGE_BYTES")]
    return pairs + [
        ("Wire.MAX_MESSAGE_BYTES", protocol.MAX_MESSAGE_BYTES),
        ("Wire.PACKED_HEADER_BYTES", protocol.PACKED_HEADER.size),
        ("[Wire.STATUS_RUNNING, Wire.STATUS_TERMINATED, Wire.STATUS_TRUNCATED]",
         [protocol.STATUS_RUNNING, protocol.STATUS_TERMINATED, protocol.STATUS_TRUNCATED]),
        ("[FragmentWire.STATUS_RUNNING, FragmentWire.STATUS_TERMINATED, FragmentWire.STATUS_TRUNCATED]",
         [fragment_wire.STATUS_RUNNING, fragment_wire.STATUS_TERMINATED, fragment_wire.STATUS_TRUNCATED]),
        ("[TYPE_RAW_ARRAY, TYPE_INT_ARRAY, TYPE_REAL_ARRAY]",  # Godot's own Variant types: what var2bytes() writes
         [protocol.POOL_BYTE_ARRAY, protocol.POOL_INT_ARRAY, protocol.POOL_REAL_ARRAY]),
        ("TrainerHandshake.MAJOR_VERSION", protocol.MAJOR_VERSION),
        ("TrainerHandshake.EXTENSION_VERSION", contract.EXTENSION_VERSION),
        ("TrainerHandshake.OBS_ENCODINGS", [contract.JSON_ENCODING, protocol.PACKED_OBS_ENCODING]),
        ("TrainerHandshake.STEP_ENCODINGS", [contract.JSON_ENCODING, protocol.BINARY_STEP_ENCODING]),
        ("RunFlags.DEFAULT_EDITOR_PORT", editor.DEFAULT_EDITOR_PORT),
        ("RunFlags.DEFAULT_CONNECT_TIMEOUT_S", flags.DEFAULT_CONNECT_TIMEOUT_S),
        ("RunFlags.DEFAULT_CONNECT_TIMEOUT_S", protocol.DEFAULT_TIMEOUT_S),
    ]


IMAGE_KEYS = ["camera_2d", "2d", "obs", "pixels", "camera_3d", "2D"]


def _image_pairs():
    """The image-key rule (as each side applies it to the same keys), the camera side and the frame stack."""
    from python_trainer.envs import images
    from python_trainer.engine import policy_cnn

    return [
        (f"[{', '.join(f'Observations.is_image_key({k!r})' for k in IMAGE_KEYS)}]".replace("'", '"'),
         [images.is_image_key(k) for k in IMAGE_KEYS]),
        ("Contract.IMAGE_KEY_MARK", contract.IMAGE_KEY_MARK),
        ("[CameraFrames.MAX_SIDE, ConvNetwork.MAX_SIDE]", [images.MAX_SIDE, policy_cnn.bounds.CAMERA_SIDE.value]),
        ("ConvNetwork.MAX_FRAME_STACK", bounds.FRAME_STACK.value),
        ("ArenaGrid.MAX_AGENTS", bounds.AGENTS_PER_INSTANCE.value),
    ]


def _policy_file_pairs():
    """A policy file's format tag, limits and activations, and the demo files' format tag."""
    from python_trainer import demos
    from python_trainer.engine import onnx_policy, policy_format

    return [
        ("PolicyRunner.FORMAT", policy_format.FORMAT),
        ("[PolicyRunner.VERSION, Contract.POLICY_VERSIONS, Contract.POLICY_BUNDLE_VERSION, Contract.POLICY_CAMERA_VERSION]",
         [policy_format.VERSION, list(policy_format.READABLE_VERSIONS), policy_format.MLP_VERSION,
          policy_format.CAMERA_VERSION]),
        ("[BlockCompiler.MAX_SIZE, BlockCompiler.MAX_WEIGHTS, BlockCompiler.MAX_FILE_BYTES, BlockCompiler.MAX_LAYERS]",
         [policy_format.MAX_SIZE, bounds.POLICY_WEIGHTS.value, policy_format.MAX_FILE_BYTES, policy_format.MAX_LAYERS]),
        ("PolicyNetwork.ACTIVATIONS.keys()", list(onnx_policy.ACTIVATIONS)),  # each side's runner, the contract's order
        ("Contract.ACTIVATIONS", list(onnx_policy.ACTIVATIONS)),
        ("DemoRecorder.FORMAT", demos.FORMAT),
    ]


def _env_info_pairs():
    """env_info's keys: godot-rl's, and ours as the addon's modules and the trainer's name them."""
    from python_trainer.envs import drivers, spaces

    return [
        ("Contract.ENV_INFO_KEYS", contract.ENV_INFO_KEYS),
        ("Contract.ENV_INFO_EXTENSIONS", contract.ENV_INFO_EXTENSIONS),
        ("[EnvInfoExtras.ARENAS_KEY, EnvInfoExtras.DECISION_FRAMES_KEY, EnvInfoExtras.PHYSICS_FPS_KEY]",
         [spaces.ARENAS_KEY, spaces.DECISION_FRAMES_KEY, spaces.PHYSICS_FPS_KEY]),
        ("DriverMessage.SCRIPTED_KEY", drivers.SCRIPTED_KEY),
    ]


# A game's output with a script error, the line that says where, then a line of its own.
SCRIPT_ERROR_OUTPUT = "ready\nSCRIPT ERROR: get_obs: Invalid get index 'x'.\n   At: res://agent.gd:12.\nplaying\n"


def _output_line_pairs():
    """Lines of a game's output: --list_envs's line as the game writes it, and the first script error of an output
    (with the Godot marks' line that says where) as the addon's error watch and the trainer's logs read it."""
    from python_trainer.envs import logs

    return [
        ('parse_json(GameRegistry.list_line({"b": "", "a": ""}, "a", {"a": {"gap": 1}}))',
         {contract.ENVS_REPORT: ["a", "b"], contract.ENVS_DEFAULT_KEY: "a",
          contract.ENVS_PARAMS_KEY: {"a": {"gap": 1}}}),
        ('GameRegistry.list_line({"a": ""}, "a").find(Contract.ENVS_PARAMS_KEY)', -1),  # only when a game declares some
        (f"ErrorWatch.first_script_error({contract._gd_string(SCRIPT_ERROR_OUTPUT)})".replace("\n", "\\n"),
         logs.first_script_error(SCRIPT_ERROR_OUTPUT)),
    ]


GROUPS = {"wire": _wire_pairs, "images": _image_pairs, "policy files": _policy_file_pairs, "env_info": _env_info_pairs,
          "output lines": _output_line_pairs}


def _declared_env_info_keys() -> set:
    from python_trainer.envs.fragment_wire import ACTORS  # the in-engine actors' version (fragment_wire's own fact)

    return {"type", *contract.ENV_INFO_KEYS, contract.POLICY_NAMES_KEY, *contract.ENV_INFO_EXTENSIONS, ACTORS}


def test_a_games_env_info_holds_godot_rls_keys_and_no_key_the_contract_does_not_declare(headless_export):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)
    proc = subprocess.Popen([str(headless_export), "--env=pong", f"--port={server.getsockname()[1]}",
                             "--fixed-fps", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=game_environ())
    try:
        with server:
            conn = GodotConnection(server.accept()[0], timeout=30)
        conn.handshake()
        keys = set(conn.env_info())
        conn.close()
    finally:
        end(proc)
    assert set(contract.ENV_INFO_KEYS) <= keys and keys <= _declared_env_info_keys(), keys - _declared_env_info_keys()
    assert {contract.TEAMS_KEY, contract.ARENAS_KEY, contract.SCRIPTED_KEY} <= keys  # pong's: two sides per court


def test_the_trainer_reads_only_env_info_keys_the_contract_declares():
    root = contract.CONTRACT_GD.parents[3] / "python_trainer"
    read = {key for path in root.rglob("*.py")
            for key in re.findall(r'env_info(?:\.get\(|\[)"(\w+)"', path.read_text())}
    declared = _declared_env_info_keys() | {"message"}  # (an error reply's text, which comes in an env_info's stead)
    assert read and read <= declared, read - declared


@pytest.fixture(scope="module")
def gdscript_reads(tmp_path_factory):
    """{expression: value} of every group's GDScript expressions, from one Godot run (JSON: numbers as floats)."""
    exprs = sorted({expr for pairs in GROUPS.values() for expr, _ in pairs()})
    probe = tmp_path_factory.mktemp("contract") / "probe.gd"
    probe.write_text(_PROBE % ", ".join(f"{contract._gd_string(e)}: {e}" for e in exprs))
    out = run_to_end([godot_server(), "--path", str(GODOT_PROJECT), "-s", str(probe)], timeout=60)
    lines = [line for line in out.stdout.splitlines() if line.startswith("contract-probe ")]
    assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(lines[0].split(" ", 1)[1])


@pytest.mark.parametrize("group", list(GROUPS))
def test_gdscript_reads_each_groups_facts_through_the_generated_file_as_python_does(gdscript_reads, group):
    wrong = [(expr, gdscript_reads[expr], value) for expr, value in GROUPS[group]()
             if json.loads(json.dumps(value), parse_int=float) != gdscript_reads[expr]]
    assert wrong == [], wrong


def test_the_generated_file_declares_every_shared_fact_once_with_pythons_value():
    text = contract.CONTRACT_GD.read_text()
    for name, value in contract.shared_constants().items():
        assert text.count(f"\nconst {name} := ") == 1 and f"\nconst {name} := {contract._gd_value(value)}\n" in text


def test_docs_protocol_md_quotes_the_contracts_wire_facts():
    """The page's handshake, hello, encodings, type words, statuses and image-key rule are written from the contract's
    values: a changed fact there fails here until the page says it too."""
    c = contract
    page = (contract.CONTRACT_GD.parents[3] / "docs" / "protocol.md").read_text()
    words = {kind: f"{kind:02x} 00 00 00" for kind in (c.POOL_BYTE_ARRAY, c.POOL_INT_ARRAY, c.POOL_REAL_ARRAY)}
    quoted = [
        f'"major_version":"{c.MAJOR_VERSION}","minor_version":"{c.MINOR_VERSION}"',
        f'"protocol":{c.EXTENSION_VERSION}}}',
        f"`{c.EXTENSION_KEY}`",
        f'`"obs_encoding":"{c.PACKED_OBS_ENCODING}"`',
        f'`"step_encoding":"{c.BINARY_STEP_ENCODING}"`',
        f"`{c.POOL_REAL_ARRAY:#04x}` = PoolRealArray", f"`{c.POOL_INT_ARRAY:#04x}` = PoolIntArray",
        *(f"`{word}`, count" for word in words.values()),
        f"N statuses ({c.STATUS_RUNNING} running, {c.STATUS_TERMINATED} terminated, {c.STATUS_TRUNCATED} truncated",
        f"an observation key containing `{c.IMAGE_KEY_MARK}`",
        f"4 + {c.PACKED_HEADER_BYTES} + ",  # a packed message: its length, the header, the values
    ]
    assert [text for text in quoted if text not in page] == []


# The shared facts' spellings in code: found only in contract.py (and bounds.py, its table of bounds).
SPELT = {
    "the editor port": r"\b11008\b",
    "the connect timeout": r"CONNECT_TIMEOUT_S *:?= *30\b",
    "the handshake version": r"\b(?:MAJOR|MINOR)_VERSION *:?= *\"",
    "a step status": r"\bSTATUS_\w+ *:?= *\d",
    "the packed observations' encoding": r"\"f32_base64\"",
    "the message limit": r"64 \* 1024 \* 1024",
    "the image-key rule": r"\"2d\" (?:not )?in\b",
    "the camera side or frame stack": r"\bMAX_(?:SIDE|KERNEL|FRAME_STACK) *:?= *\d",
    "a file's format tag": r"\bFORMAT *:?= *\"",
    "a policy file's version": r"\b(?:(?:MLP|CAMERA|SAMPLING)_)?VERSION *:?= *\d|READABLE_VERSIONS = \(|\[1\.0, 2\.0",
    "a policy file's limit": r"\bMAX_(?:SIZE|WEIGHTS|LAYERS|AGENTS) *:?= *\d",
    "the bytes a policy file holds per weight": r"\bBYTES_PER_WEIGHT *:?= *\d",
}


@pytest.mark.parametrize("fact", list(SPELT))
def test_each_shared_fact_is_spelt_in_the_contract_alone(fact):
    repo = contract.CONTRACT_GD.parents[3]
    files = [p for p in (repo / "python_trainer").rglob("*.py") if p.name not in ("contract.py", "bounds.py")]
    files += [p for p in contract.CONTRACT_GD.parent.glob("*.gd") if p.name != "contract.gd"]
    files += [repo / "tests" / "fake_game.py"]
    spelt = re.compile(SPELT[fact])
    found = [f"{p.relative_to(repo)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
             if spelt.search(line.split("#", 1)[0])]
    assert found == [], found


# The lines the trainer reads from a game's output (contract.py's "Lines the trainer reads" section): their fixed parts,
# in the code of either side, spelt in the contract alone. (tests/fake_game.py speaks as a game does: left out.)
_REPORT = r"(?:benchmark|eval|envs|run)"
OUTPUT_LINES = {
    "an addon line's prefix": r"\"rl_sync: (?:error|warning|policy reloaded|agents in the window|you play)\b",
    "a one-line JSON report's key": rf"startswith\(b?'\{{\"{_REPORT}\"|json_line\([^)]*\"{_REPORT}\"\)"
                                    rf"|(?:\)|listing)\[\"{_REPORT}\"\]|'\"{_REPORT}\"' in line|to_json\(\{{\"{_REPORT}\""
                                    r'|\{\\"envs\\"|return \{"run"',
    "Godot's error marks": r"\"SCRIPT ERROR|startswith\(b?\"ERROR|\"\s*(?:ERROR|WARNING|At):",
    "the --list_envs line's keys": r'listing\[\"default\"\]|listing\.get\(\"env_params\"'
                                   r'|\\\"(?:default|env_params)\\\": %s',
    "godot_rl_agents' plugin's lines": r"\"(?:trying to connect to server|physics ticks)\"",
}


def _output_line_spellings(fact, read):
    repo = contract.CONTRACT_GD.parents[3]
    files = [p for p in (repo / "python_trainer").rglob("*.py") if p.name != "contract.py"]
    files += [p for p in contract.CONTRACT_GD.parent.glob("*.gd") if p.name != "contract.gd"]
    spelt = re.compile(OUTPUT_LINES[fact])
    return [f"{p.relative_to(repo)}:{i}" for p in files for i, line in enumerate(read(p).splitlines(), 1)
            if spelt.search(line.split("#", 1)[0])]


@pytest.mark.parametrize("fact", list(OUTPUT_LINES))
def test_each_fixed_part_of_a_line_the_trainer_parses_is_spelt_in_the_contract_alone(fact):
    assert _output_line_spellings(fact, lambda p: p.read_text()) == []



# Lines as the code spelt them before the contract held them: each pattern must find its own.
OLD_SPELLINGS = {
    "an addon line's prefix": ['GAME_ERROR = "rl_sync: error"', 'printerr("rl_sync: warning: policy not reloaded")',
                               'RELOAD_LINE = b"rl_sync: policy reloaded (global step "'],
    "a one-line JSON report's key": ["if line.startswith('{\"envs\"'):", 'report = json_line(result.stdout, "eval")',
                                     'return json.loads(line)["benchmark"]', 'print(to_json({"eval": report}))',
                                     'var line := "{\\"envs\\": [%s]"', 'return {"run": {',
                                     'if line.startswith("{") and \'"benchmark"\' in line:'],
    "Godot's error marks": ['SCRIPT_ERROR_MARK = b"SCRIPT ERROR:"', 'const MARK := "SCRIPT ERROR:"',
                            'errors = [line for line in printed if line.startswith("ERROR")]',
                            '"ERROR: _get_modified_time: Failed to get modified time for: ",',
                            'if after_harmless and line.lstrip().startswith("At: "):',
                            'if SCRIPT_ERROR_MARK in more or not more.strip().startswith((b"At:", b"ERROR:")):',
                            'if stripped.begins_with("At:") or stripped.begins_with("At "):',
                            'on_stderr = line.begins_with("ERROR:") or line.begins_with(MARK) \\',
                            'or line.begins_with("WARNING:") or line.begins_with(Contract.ERROR_PREFIX) \\',
                            'noise = ("certificate", "At: ")'],
    "the --list_envs line's keys": [
        'return GameList(tuple(listing[ENVS_REPORT]), str(listing["default"]), env_params=listing.get("env_params", {}))',
        'var line := "{\\"%s\\": [%s], \\"default\\": %s" % [Contract.ENVS_REPORT, quoted.join(", "), to_json(default_name)]',
        'return line + (", \\"env_params\\": %s}" % to_json(params) if not params.empty() else "}")'],
    "godot_rl_agents' plugin's lines": ['PLUGIN_PHYSICS_LINE = "physics ticks"'],
}


@pytest.mark.parametrize("fact", list(OUTPUT_LINES))
def test_the_output_line_check_finds_each_fact_as_the_code_spelt_it_before(fact):
    assert [line for line in OLD_SPELLINGS[fact] if not re.search(OUTPUT_LINES[fact], line)] == []


# --- The message kinds (contract.MESSAGES): built and read through the contract, and docs/protocol.md's table ---

def test_a_message_is_built_from_declared_kinds_and_fields_and_anything_else_is_a_key_error():
    assert contract.message("action", action=[{"move": [0.5]}]) == {"type": "action", "action": [{"move": [0.5]}]}
    assert contract.is_message({"type": "reset", "obs": []}, "reset") and contract.kind("busy") == "busy"
    with pytest.raises(KeyError):
        contract.message("action", actions=[])  # a field the kind does not declare
    with pytest.raises(KeyError):
        contract.is_message({"type": "rest"}, "rest")  # a kind the contract does not declare


def test_godot_rls_own_messages_are_declared_as_godot_rls_and_the_addon_gets_each_kinds_constant():
    assert {k for k, m in contract.MESSAGES.items() if m.owner == contract.GODOT_RL} == {
        "handshake", "env_info", "reset", "action", "step", "call", "close"}
    assert all(m.trainer is not None or m.game is not None for m in contract.MESSAGES.values())
    text = contract.CONTRACT_GD.read_text()
    assert all(f'\nconst MSG_{kind.upper()} := "{kind}"\n' in text for kind in contract.MESSAGES)


def test_docs_protocol_md_holds_the_table_of_messages_the_contract_prints():
    page = contract.PROTOCOL_MD.read_text()
    assert contract.protocol_page(page) == page, "run python -m python_trainer.base.contract --write-docs"
    for kind, declared in contract.MESSAGES.items():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{kind}` |"))
        assert all(f"`{field}`" in row for field in (declared.trainer or ()) + (declared.game or ())), row


_KINDS = "|".join(sorted(contract.MESSAGES, key=len, reverse=True))
# A message kind spelt as a literal: a {"type": "reset"} (also hand-built, escaped), a comparison of a message's type
# with one, a GDScript match branch on one, or a constant holding one (fields' _KEY constants aside).
MESSAGE_SPELLINGS = re.compile(
    rf'\\?["\']type\\?["\']\s*:\s*\\?["\'](?:{_KINDS})\\?["\']'
    rf'|(?:\.get\(["\']type["\']\)|\[["\']type["\']\]|\btyp|\bkind|msg_type)\s*[!=]=\s*["\'](?:{_KINDS})["\']'
    rf'|^\s*"(?:{_KINDS})"(?:\s*,\s*"(?:{_KINDS})")*\s*:(?:\s*$|\s+return\b)'
    rf'|^\s*(?:const\s+)?[A-Z_]*(?<!_KEY)\s*:?=\s*["\'](?:{_KINDS})["\']\s*(?:#|$)')


def _code_lines(text):
    """(number, line) of a file's code: comments cut, the lines of docstrings left out."""
    in_doc = False
    for i, line in enumerate(text.splitlines(), 1):
        quotes = line.count('"""')
        if in_doc or quotes:
            in_doc = in_doc != (quotes % 2 == 1)
            continue
        yield i, line.split("#", 1)[0]


def test_no_file_but_the_contract_spells_a_message_kind():
    repo = contract.CONTRACT_GD.parents[3]
    files = [p for p in (repo / "python_trainer").rglob("*.py") if p.name != "contract.py"]
    files += [p for p in contract.CONTRACT_GD.parent.glob("*.gd") if p.name != "contract.gd"]
    files += [repo / "tests" / "fake_game.py"]
    found = [f"{p.relative_to(repo)}:{i}: {line.strip()}" for p in files for i, line in _code_lines(p.read_text())
             if MESSAGE_SPELLINGS.search(line)]
    assert found == [], found


# Message kinds as the code spelt them before the contract held them: the check must find each.
OLD_MESSAGE_SPELLINGS = [
    '_send({"type": "error", "message": wrong})', '\t\t"action":', '\t\t"actors", "fragment": return FragmentMode.answer(',
    '\t\t"close": return Result.closed()', '\treturn "{\\"type\\":\\"step\\"," + obs_json + ",\\"reward\\":[" \\',
    'if env_info.get("type") == "error":', 'if self.hello is None and msg.get("type") == "hello":',
    'BUSY = {"type": "busy"}', 'elif typ == "reset":', 'if message["type"] != "handshake":',
    'const BUSY_TYPE := "busy"', 'ACTORS = "actors"', 'const FRAGMENT := "fragment"', 'MESSAGE = "drivers"',
    'send(sock, {"type": "alive", "step": steps})']


def test_the_message_kind_check_finds_each_kind_as_the_code_spelt_it_before():
    assert [line for line in OLD_MESSAGE_SPELLINGS if not MESSAGE_SPELLINGS.search(line)] == []
    fields = ['const STEP_KEY := "step"', '"env_params": _sync.env_params.declared,', 'if driver == "policy":',
              'return {"error": params.message}', 'msg.get("type") == ALIVE']
    assert [line for line in fields if MESSAGE_SPELLINGS.search(line)] == []


def test_the_fields_the_in_engine_actors_and_the_drivers_message_name_are_the_ones_the_contract_declares():
    """fragment_wire.py's and drivers.py's keys (the GDScript twins are held equal to them by test_engine_actors and
    test_opponents) are fields of their kinds in contract.MESSAGES, but an ended episode's own keys, one level in."""
    from python_trainer.envs import drivers, fragment_wire

    def fields(*kinds):
        return {f for kind in kinds for side in (contract.MESSAGES[kind].trainer, contract.MESSAGES[kind].game)
                for f in side or ()}

    episode = {fragment_wire.AGENT_KEY, fragment_wire.RETURN_KEY, fragment_wire.LENGTH_KEY, fragment_wire.INFO_KEY}
    keys = {getattr(fragment_wire, n) for n in dir(fragment_wire) if n.endswith("_KEY")} - episode - {"type"}
    declared = fields("actors", "fragment", "alive", "error")
    assert keys and keys <= declared, keys - declared
    keys = {getattr(drivers, n) for n in dir(drivers) if n.endswith("_KEY")} - {drivers.SCRIPTED_KEY}
    assert keys and keys <= fields("drivers"), keys - fields("drivers")
