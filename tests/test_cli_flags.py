"""The flags several commands share (--env-path, --env-id, --agents-per-instance, --num-instances, --seed,
--connect-timeout): declared once (base/flags.py's SHARED_FLAGS), so every command that has one shows and accepts the
same names. Parsing only: no game starts."""

import re

import pytest

from helpers import REPO  # noqa: F401  (puts this checkout's python_trainer first on sys.path)
from python_trainer import cli
from python_trainer.base.flags import AGENTS_FLAG, SHARED_FLAGS, FlagError, explicit_fields, parse_flags

# Each command's arguments, and the flags it needs to parse at all (a positional source, a required --out).
COMMANDS = {
    "envs": ("python_trainer.tools.game_commands", "EnvsArgs", []),
    "launch": ("python_trainer.tools.game_commands", "LaunchArgs", []),
    "train": ("python_trainer.run.train", "Args", []),
    "export-policy": ("python_trainer.tools.policy_commands", "ExportPolicyArgs", ["run"]),
    "import-policy": ("python_trainer.tools.policy_commands", "ImportPolicyArgs", ["model.onnx"]),
    "play": ("python_trainer.tools.play", "PlayArgs", ["policy.json"]),
    "record": ("python_trainer.tools.record_command", "RecordArgs", ["--out", "demos.json"]),
    "profile": ("python_trainer.tools.profile.command", "ProfileArgs", []),
    "package": ("python_trainer.tools.package", "PackageArgs", ["run", "--repo-id", "me/model", "--out", "pkg"]),
    "tune": ("python_trainer.tools.tune", "TuneArgs", ["--out", "search"]),
}
# A value of each shared flag that every command having it accepts (profile's --num-instances takes a list of them).
VALUES = {"env_path": "game.x86_64", "env_id": "ball_chase", "agents_per_instance": "4", "num_instances": "2", "seed": "7", "connect_timeout": "45"}


def args_class(command):
    import importlib

    module, name, _ = COMMANDS[command]
    return getattr(importlib.import_module(module), name)


def long_name(shared) -> str:
    return "--" + shared.name.replace("_", "-")


def help_names(help_text: str, shared) -> tuple:
    """The names and metavars of the option line of ``shared`` in a --help: (("--agents", "--agents-per-instance"),
    {"N"}), or None when the command has no such flag."""
    long = long_name(shared)
    for line in help_text.splitlines():
        heading = line.strip("│ ").split("  ")[0]  # the option's names, before the help (two spaces or more)
        named = [part.split(" ", 1) for part in re.split(r", (?=--)", heading) if part.startswith("--")]
        if long in (name for name, *_ in named):
            return tuple(sorted(name for name, *_ in named)), {metavar for _, *metavar in named for metavar in metavar}
    return None


@pytest.fixture(scope="module")
def helps() -> dict:
    """Every command's --help, as `godot-ppo COMMAND --help` prints it (wide enough that no option line wraps)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("COLUMNS", "400")
    out = {}
    try:
        for command in cli.COMMANDS:
            import contextlib
            import io

            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                assert cli.main([command, "--help"]) == 0
            out[command] = buffer.getvalue()
    finally:
        mp.undo()
    return out


def test_the_table_of_commands_here_is_every_command_that_parses_flags_but_export():
    assert set(COMMANDS) == set(cli.COMMANDS) - {"export"}


@pytest.mark.parametrize("shared", SHARED_FLAGS, ids=lambda s: s.name)
def test_every_command_that_has_a_shared_flag_shows_the_same_names_and_metavar_in_its_help(helps, shared):
    shown = {command: help_names(text, shared) for command, text in helps.items()}
    having = {command: names for command, names in shown.items() if names is not None}
    expected = tuple(sorted((long_name(shared), *shared.aliases)))
    assert {command: names for command, (names, _) in having.items() if names != expected} == {}
    listed = {"N[,N...]"} if shared.name == "num_instances" else set()  # profile's list of counts
    assert all(metavars <= {shared.metavar} | listed for _, metavars in having.values()), having
    # the flags are shared: the games' commands and train all have them
    least = {"env_path": {"train", "launch", "play", "record", "profile", "envs", "tune", "export-policy"},
             "env_id": {"train", "launch", "play", "record", "profile", "envs", "tune"},
             "agents_per_instance": {"train", "launch", "play", "record", "profile"},
             "num_instances": {"train", "launch", "profile"},
             "seed": {"train", "launch", "play", "record", "profile", "package", "tune"},
             "connect_timeout": {"train", "launch", "play", "record", "profile", "envs"}}[shared.name]
    assert least <= set(having), sorted(least - set(having))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_shared_flag_of_a_command_parses_the_same_by_its_alias_as_by_its_long_name(command, tmp_path,
                                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing is written, and nothing of the checkout is read as a flag's file
    cls = args_class(command)
    needed = COMMANDS[command][2]
    fields = {f for f in cls.__dataclass_fields__}
    mine = [s for s in SHARED_FLAGS if s.name in fields and s.aliases]
    assert mine, f"{command} has none of the shared flags"
    for shared in mine:
        value = VALUES[shared.name]
        by_long = parse_flags(cls, [*needed, long_name(shared), value], f"godot-ppo {command}", check=False)
        for alias in shared.aliases:
            argv = [*needed, alias, value]
            by_alias = parse_flags(cls, argv, f"godot-ppo {command}", check=False)
            assert by_alias == by_long, (command, alias)
            default = parse_flags(cls, needed, f"godot-ppo {command}", check=False)
            assert getattr(by_alias, shared.name) != getattr(default, shared.name), alias  # the flag did something
            assert shared.name in explicit_fields(argv, cls)  # --resume and --config see it as given


def test_train_takes_agents_and_env_as_launch_does_and_parses_them_as_the_long_names():
    from python_trainer.normalization import bool_flag_aliases
    from python_trainer.run.train import Args
    from python_trainer.tools.game_commands import LaunchArgs

    short = ["--agents", "4", "--env", "ball_chase", "--instances", "2", "--timeout", "60", "--total-timesteps", "4096"]
    long = ["--agents-per-instance", "4", "--env-id", "ball_chase", "--num-instances", "2", "--connect-timeout", "60",
            "--total-timesteps", "4096"]
    parse = lambda argv: parse_flags(Args, bool_flag_aliases(argv), "godot-ppo train", check=False)  # as train's main
    by_short, by_long = parse(short), parse(long)
    assert by_short == by_long
    assert (by_short.agents_per_instance, by_short.env_id, by_short.num_instances, by_short.connect_timeout,
            by_short.total_timesteps) == (4, "ball_chase", 2, 60.0, 4096)
    assert explicit_fields(short, Args) == explicit_fields(long, Args) == {
        "agents_per_instance", "env_id", "num_instances", "connect_timeout", "total_timesteps"}
    launched = parse_flags(LaunchArgs, short[:8], "godot-ppo launch")
    assert (launched.agents_per_instance, launched.env_id, launched.num_instances) == (4, "ball_chase", 2)


@pytest.mark.parametrize("command", ["train", "launch", "play", "record", "profile"])
def test_a_shared_flags_rule_says_the_same_line_in_every_command(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FlagError) as refused:
        parse_flags(args_class(command), [*COMMANDS[command][2], "--agents", "0"], f"godot-ppo {command}")
    assert str(refused.value) == ("--agents-per-instance 0 is not valid: give "
                                  f"{AGENTS_FLAG.rule.what}, e.g. --agents-per-instance {AGENTS_FLAG.rule.example}")


@pytest.mark.parametrize("shared", SHARED_FLAGS, ids=lambda s: s.name)
def test_every_commands_help_of_a_shared_flag_starts_with_its_declared_words(helps, shared):
    flat = {command: re.sub(r"[│\s]+", " ", text) for command, text in helps.items()}
    words = re.compile(re.escape(long_name(shared)) + r" \S+ " + re.escape(shared.help))
    having = [command for command, text in helps.items() if help_names(text, shared)]
    assert len(having) >= 3 and [command for command in having if not words.search(flat[command])] == []
