"""`train --config FILE`: a TOML file of train's flags (what `godot-ppo tune` writes as best.toml), read as the flags
it stands for, placed before the command line's so that a flag given there wins.

    # best.toml
    env_id = "ball_chase"
    learning_rate = 0.00031
    num-steps = 256          # `-` or `_`: the flag's name without its dashes

Each key is a flag of `godot-ppo train` (`--learning-rate` is `learning_rate` or `learning-rate`); a value is the
flag's: a number, a string, true/false, or a list for a flag given several times (`env_param = ["speed=2"]`). An
unknown key, a value of the wrong kind or one its flag's rule refuses is one line naming the key (flags.py's rules).
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path

from python_trainer.base.errors import one_line
from python_trainer.base.flags import RULE, FlagError, explicit_fields
from python_trainer.base.inputs import read_text

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the package tomli (a dependency there)
    import tomli as tomllib

CONFIG_FLAG = "--config"
CONFIG_HELP = ("\n\n--config FILE: a TOML file of these flags (keys spelled as the flags without dashes, e.g. "
               "learning_rate = 0.0003; `godot-ppo tune` writes one as best.toml); flags given here override it.")
NOT_IN_A_CONFIG = ("resume",)  # a config describes a run to start, not which one to continue


def config_argv(argv, args_class) -> list:
    """``argv`` with its --config FILE replaced by the file's settings as flags, in front, leaving out those the
    command line gives itself (so it overrides them). ``argv`` as it is when there is no --config."""
    argv = list(argv)
    path, rest = _take_config(argv)
    if path is None:
        return argv
    given = explicit_fields(rest, args_class)
    values = read_config(path, args_class)
    return config_to_argv({k: v for k, v in values.items() if k not in given}, args_class) + rest


def _take_config(argv: list) -> tuple:
    """(the --config path or None, argv without it)."""
    for i, a in enumerate(argv):
        if a == CONFIG_FLAG:
            if i + 1 >= len(argv):
                raise FlagError(f"{CONFIG_FLAG} needs a file: give a TOML file of train's flags, e.g. "
                                f"{CONFIG_FLAG} best.toml")
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if a.startswith(CONFIG_FLAG + "="):
            return a.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return None, argv


def read_config(path, args_class) -> dict:
    """The file's settings as {field: value}, each checked: a known flag, a value of its kind, within its rule."""
    label = f"{CONFIG_FLAG} {path}"
    text = read_text(path, label, FlagError, "a TOML file of train's flags")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FlagError(f"{label}: not valid TOML: {e}") from None
    except (RecursionError, ValueError) as e:
        raise FlagError(f"{label}: not a file of flags ({one_line(e)})") from None
    fields = {f.name for f in dataclasses.fields(args_class)}
    values = {}
    for key, value in doc.items():
        name = key.replace("-", "_")
        if name not in fields or name in NOT_IN_A_CONFIG:
            near = difflib.get_close_matches(name, sorted(fields), n=1)
            why = ("--resume continues a run with its own args.json: drop it from the file" if name in NOT_IN_A_CONFIG
                   else f"not a flag of godot-ppo train ({f'did you mean {near[0]}? ' if near else ''}see godot-ppo "
                        "train --help; `-` or `_` both spell a flag)")
            raise FlagError(f"{label}: unknown key {key!r}: {why}")
        values[name] = check_value(label, key, value, args_class)
    return values


def check_value(label: str, key: str, value, args_class):
    """``value`` as the type of the field ``key`` names (`-` or `_`), or FlagError naming ``key``: the kind it needs,
    or its rule's words."""
    name = key.replace("-", "_")
    hint = typing.get_type_hints(args_class, include_extras=True)[name]
    field = next(f for f in dataclasses.fields(args_class) if f.name == name)
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    kinds = [t for t in typing.get_args(base) if t is not type(None)] if typing.get_origin(base) is typing.Union else [base]
    kind = kinds[0]
    origin = typing.get_origin(kind)
    if origin in (list, tuple):
        items = [value] if isinstance(value, str) else value
        if not (isinstance(items, list) and all(isinstance(v, str) for v in items)):
            raise FlagError(f"{label}: {key} = {value!r} is not valid: give a string or a list of strings")
        return tuple(items) if origin is tuple else list(items)
    ok = {bool: lambda v: isinstance(v, bool), int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str)}.get(kind, lambda v: True)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(kind, "a value")
    if not ok(value):
        raise FlagError(f"{label}: {key} = {value!r} is not valid: give {words}")
    given, value = value, (float(value) if kind is float else value)
    rule = field.metadata.get(RULE)
    if rule is not None and not rule.ok(value):
        raise FlagError(f"{label}: {key} = {given!r} is not valid: give {rule.what}, e.g. {key} = {rule.example}")
    return value


def config_to_argv(values: dict, args_class) -> list:
    """The command line that sets these fields: a bool as --name / --no-name, a flag given several times once per
    value (tyro's append), a list after one flag, a float exactly (repr), None left out."""
    hints = typing.get_type_hints(args_class, include_extras=True)
    argv = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            appended = any("UseAppendAction" in repr(m) for m in getattr(hints.get(name), "__metadata__", ()))
            argv += [part for v in value for part in (flag, str(v))] if appended else [flag, *map(str, value)]
        else:
            argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    return argv


def write_config(path, values: dict, header: str = "") -> Path:
    """``values`` ({field: value}) as a TOML file `train --config` reads (keys as the flags without dashes)."""
    from python_trainer.base.files import write_atomic

    lines = [f"# {line}" for line in header.splitlines()]
    for name, value in values.items():
        if value is not None:
            lines.append(f"{name} = {_toml(value)}")
    return write_atomic(path, "\n".join(lines) + "\n")


def _toml(value) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value) if isinstance(value, str) else str(value)
