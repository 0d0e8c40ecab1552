"""Flag rules: which values a setting accepts, stated once next to the setting, and one function that checks them.

A field of an arguments dataclass carries its rule as metadata:

    learning_rate: float = flag(2.5e-4, POSITIVE)
    \"\"\"the learning rate of the optimizer\"\"\"

and `check_flags(args)` checks every field that has one, before any game starts, in one line each:
``--learning-rate 0 is not valid: give a number > 0, e.g. --learning-rate 2.5e-4``. The same rule says the same
thing to a Python caller (`Rule.check_keyword`: ``num_instances=0: give 1 to 64 ...``), so the bounds that
`godot-ppo train`, `godot-ppo launch` and `make_vec_env` share (the instance options below) live here, below the
vector env, and are stated once.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

from python_trainer.base import bounds, contract
from python_trainer.base.errors import UserError

RULE, GOES_WITH = "rule", "goes_with"  # the metadata keys


class FlagError(UserError, ValueError):
    """A setting with a value it does not accept; the message names the setting, what it accepts and an example."""


@dataclass(frozen=True)
class Rule:
    """``ok(value)`` says whether a value is accepted; ``what`` says what is (\"a number > 0\"); ``example`` is one."""

    ok: Callable[[Any], bool]
    what: str
    example: str

    def check_flag(self, name: str, value) -> None:
        """FlagError naming the command-line flag of field ``name`` when ``value`` (not None) breaks the rule."""
        if value is not None and not self.ok(value):
            flag = "--" + name.replace("_", "-")
            shown = f"{value:g}" if isinstance(value, float) else value
            raise FlagError(f"{flag} {shown} is not valid: give {self.what}, e.g. {flag} {self.example}")

    def check_keyword(self, name: str, value) -> None:
        """The same, naming a Python keyword argument."""
        if value is not None and not self.ok(value):
            raise FlagError(f"{name}={value}: give {self.what}, e.g. {name}={self.example}")


@dataclass(frozen=True)
class GoesWith:
    """A flag that means something only beside another: ``field`` (the other flag's field, set when it is not falsy),
    ``what`` it sets up ("behavioural cloning") and ``add``, how to give it ("--demos FILE [FILE...]")."""

    field: str
    what: str
    add: str

    def refusal(self, name: str) -> str:
        """The one line that refuses the flag of field ``name`` given without the flag it goes with."""
        return f"{_flag_name(name)} is for {self.what}: add {self.add}, or drop {_flag_name(name)}"

    def check(self, name: str, args) -> None:
        if not getattr(args, self.field):
            raise FlagError(self.refusal(name))


def flag(default, rule: Optional[Rule] = None, *, goes_with: Optional[GoesWith] = None, **field_kwargs):
    """A dataclass field with ``default`` and, when given, its rule, and the flag it goes only with."""
    metadata = {RULE: rule} if rule is not None else {}
    if goes_with is not None:
        metadata[GOES_WITH] = goes_with
    return dataclasses.field(default=default, metadata=metadata, **field_kwargs)


def goes_with_fields(args_class) -> list:
    """(field name, its GoesWith) of each flag of the arguments dataclass ``args_class`` that goes only with another,
    in the dataclass's order."""
    return [(f.name, f.metadata[GOES_WITH]) for f in dataclasses.fields(args_class) if GOES_WITH in f.metadata]


def check_flags(args, given: Optional[set] = None) -> None:
    """Check every field of the dataclass ``args`` that carries a rule (None, a default decided later, passes), and,
    of the fields ``given`` on the command line, that each flag that goes only with another has it."""
    for f in dataclasses.fields(args):
        rule = f.metadata.get(RULE)
        if rule is not None:
            rule.check_flag(f.name, getattr(args, f.name))
    for name, goes_with in goes_with_fields(args):
        if name in (given or ()):
            goes_with.check(name, args)


def aliases(*names: str):
    """A field's older flag names, which the parser still accepts: ``Annotated[int, aliases("--instances")]``."""
    import tyro

    return tyro.conf.arg(aliases=names)


def explicit_fields(argv, args_class) -> set:
    """The fields of the arguments dataclass given on the command line (tyro accepts --env-id and --env_id, and a
    field's aliases)."""
    given = set()
    for f in dataclasses.fields(args_class):
        names = {_flag_name(f.name), "--" + f.name, *_aliases_of(args_class, f.name)}
        for name in names:
            neg = "--no-" + name[2:]
            if any(a in (name, neg) or a.startswith(name + "=") for a in argv):
                given.add(f.name)
    return given


def parse_flags(args_class, argv, prog: str, description: Optional[str] = None, check: bool = True):
    """The one parser of every command: ``argv`` as an ``args_class`` (a dataclass whose fields carry their rules),
    parsed by tyro and checked (check_flags). --help and a flag tyro cannot parse raise SystemExit (tyro has printed
    why), which the command line returns as the exit status; a value a rule refuses raises FlagError. ``check=False``
    leaves the check to the command, for one that first fills in flags from elsewhere (train's --resume)."""
    import tyro

    _help_in_paragraphs()
    args = tyro.cli(args_class, args=list(argv), prog=prog, description=description)
    if check:
        check_flags(args, explicit_fields(argv, args_class))
    return args


def _help_in_paragraphs() -> None:
    """Make `--help` show a field's docstring as the paragraph it is. docstring_parser gives an attribute docstring
    with its source indentation, and tyro keeps each line break before an indented line, so every source line was
    wrapped on its own (a word alone on a line). Reading the docstrings dedented (inspect.cleandoc) leaves tyro only
    the blank lines as breaks. Once, before the first parse (tyro caches the help it reads); a tyro without the
    function is left as it is."""
    from tyro import _docstrings

    read = getattr(_docstrings, "parse_docstring_from_object", None)
    if read is None or getattr(read, "dedented", False):
        return

    def dedented(obj) -> dict:
        return {name: inspect.cleandoc(text) for name, text in read(obj).items()}

    dedented.dedented = True
    _docstrings.parse_docstring_from_object = dedented


def to_argv(args_class, **values) -> list:
    """The command line that sets these fields of the arguments dataclass ``args_class`` (``num_instances=2`` ->
    ``--num-instances 2``; a bool -> ``--name`` / ``--no-name``; None is left out: the field keeps its default), for
    a command that runs another: its flag names are the dataclass's, never spelled twice. TypeError for a name that
    is not one of its fields."""
    fields = {f.name for f in dataclasses.fields(args_class)}
    argv = []
    for name, value in values.items():
        if name not in fields:
            raise TypeError(f"{args_class.__name__} has no field {name!r}")
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(_flag_name(name) if value else "--no-" + _flag_name(name)[2:])
        else:
            argv += [_flag_name(name), f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def _flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def _aliases_of(args_class, name: str) -> tuple:
    import typing

    hint = typing.get_type_hints(args_class, include_extras=True).get(name)
    for extra in getattr(hint, "__metadata__", ()):
        found = getattr(extra, "aliases", None)
        if found:
            return tuple(found)
    return ()


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def at_least(low, what: str, example: str) -> Rule:
    """An integer (or number) >= ``low``; ``what`` is said in full (e.g. "an integer >= 1 (frames per second)")."""
    return Rule(lambda v: _finite(v) and v >= low, what, example)


def in_range(low, high, what: str, example: str) -> Rule:
    return Rule(lambda v: _finite(v) and low <= v <= high, what, example)


def positive(example: str, what: str = "a number > 0") -> Rule:
    return Rule(lambda v: _finite(v) and v > 0, what, example)


def non_negative(example: str, what: str = "a number >= 0") -> Rule:
    return Rule(lambda v: _finite(v) and v >= 0, what, example)


# ======================================================================================================================
# The instance options: `train`'s flags, `launch`'s, and make_vec_env's / GodotVecEnv's keyword arguments
# ======================================================================================================================
# Each instance is a Godot process of its own (about 60 MB headless, 300 MB windowed, up to a CPU core): past 64 on one
# machine they only contend with each other.
MAX_INSTANCES = 64
# An instance builds its agents' nodes before it connects and simulates them all on one core (bounds.py says why
# there). More agents belong in more instances.
MAX_AGENTS_PER_INSTANCE = bounds.AGENTS_PER_INSTANCE.value

NUM_INSTANCES = in_range(1, MAX_INSTANCES, f"1 to {MAX_INSTANCES} (one Godot process each; more on one machine only "
                         "contend for its cores and memory)", "2")
AGENTS_PER_INSTANCE = in_range(1, MAX_AGENTS_PER_INSTANCE, f"1 to {MAX_AGENTS_PER_INSTANCE} (an instance sets its "
                               "agents up before it connects: spread more over more instances)", "16")
# Copies of a game's scene in one instance (the addon's scene_copies.gd), each in its own Viewport and World.
MAX_COPIES = 256
COPIES = in_range(1, MAX_COPIES, f"1 to {MAX_COPIES} (copies of the game's scene in each instance, each in its own "
                  "Viewport and World)", "16")
SPEEDUP = positive("8", "a number > 0 (the engine's time scale)")
# Physics frames per decision step: 1000 are 17 s of game time at 60 frames a second, which a decision step of a busy
# game can take minutes to simulate (the trainer warns when a step is that slow: vec_env.SLOW_STEP_S).
MAX_ACTION_REPEAT = 1000
ACTION_REPEAT = Rule(lambda v: _finite(v) and v == int(v) and 1 <= v <= MAX_ACTION_REPEAT,
                     f"an integer from 1 to {MAX_ACTION_REPEAT} (physics frames per decision step)", "8")
# A decision step slower than this is said once (vec_env), with how long it took: a large --action-repeat (or a busy
# game) can keep each step just under the step timeout, and the run would otherwise go silent for minutes.
SLOW_STEP_S = 10.0


def slow_step_warning(env: str, seconds: float, instance) -> str:
    """The line said of a slow step of ``env``'s ``instance`` (its command line's action_repeat)."""
    repeat = int(getattr(instance, "action_repeat", 1) or 1)
    return (f"warning: each step of {env} takes about {seconds:.3g} s ({repeat} physics frame{'s' * (repeat != 1)} per "
            "step, --action-repeat); training goes on, slowly: a lower --action-repeat, or fewer agents per instance, "
            "steps faster")


# The longest wait a flag of seconds may ask for (--connect-timeout, --step-timeout): a day. More is no wait a person
# means, and past about 1e9 s the OS's timers overflow.
MAX_WAIT_S = 86400.0


def seconds_rule(example: str, what: str) -> Rule:
    """A number of seconds > 0 and at most MAX_WAIT_S; ``what`` says what they are for."""
    return Rule(lambda v: _finite(v) and 0 < v <= MAX_WAIT_S,
                f"a number of seconds > 0 ({what}; at most {MAX_WAIT_S:g}, a day)", example)


# How long a game may take to start: to list its games (--list_envs) and to connect to the trainer. A game whose
# scenes load for long (big assets, a slow disk, a busy machine) needs more: --connect-timeout, on every command that
# starts games (train, launch, envs, profile, play), says so once here.
DEFAULT_CONNECT_TIMEOUT_S = contract.CONNECT_TIMEOUT_S
CONNECT_TIMEOUT = seconds_rule("120", "how long a game may take to load and connect")
SLOW_GAME_HINT = "a game that takes longer to load can be given more time with --connect-timeout SECONDS"


# ======================================================================================================================
# The flags several commands share: each declared once, here (its type, its names, its metavar, its help, its rule)
# ======================================================================================================================
@dataclass(frozen=True)
class SharedFlag:
    """A flag of several commands: the field ``name`` (--name-with-dashes), its Python type ``kind``, its other names
    ``aliases`` (the same in every command), its ``metavar``, ``help`` (what it is) and ``rule``. A command's field is

        seed: SEED_FLAG.type(" of the games") = SEED_FLAG.default(0)

    with only its default and its own words (``more``: what the default means there, what the flag is for there)."""

    name: str
    kind: Any
    aliases: tuple
    metavar: str
    help: str
    rule: Optional[Rule] = None

    def type(self, more: str = "", kind: Any = None, listed: bool = False):
        """The field's annotation: the flag's type, names, metavar and help, then ``more``. ``kind``: a narrower type
        for a command that always has a value (record's int count); ``listed``: several values, comma-separated in
        one string (profile's --num-instances 1,2,4: one configuration each, checked by its own rule)."""
        import tyro

        metavar = f"{self.metavar}[,{self.metavar}...]" if listed else self.metavar
        kind = str if listed else (kind or self.kind)
        return Annotated[kind, tyro.conf.arg(aliases=self.aliases, metavar=metavar, help=self.help + more)]

    def default(self, value, rule: Optional[Rule] = None):
        """The field's default, with the flag's rule (or ``rule``, a listed flag's own)."""
        return flag(value, rule or self.rule)


ENV_PATH_FLAG = SharedFlag("env_path", Optional[str], ("--project",), "PATH",
                           "an exported game binary (headless or windowed) of any Godot 3 project with the rl_sync "
                           "addon, or the project's folder (--project DIR), run with no export")
ENV_ID_FLAG = SharedFlag("env_id", Optional[str], ("--env",), "NAME", "a game in --env-path's binary")
AGENTS_FLAG = SharedFlag("agents_per_instance", Optional[int], ("--agents",), "N",
                         "agents each game instance is asked to simulate, the game's --agents", AGENTS_PER_INSTANCE)
INSTANCES_FLAG = SharedFlag("num_instances", int, ("--instances",), "N", "how many game processes to launch",
                            NUM_INSTANCES)
SEED_FLAG = SharedFlag("seed", int, (), "INT", "the seed")
CONNECT_TIMEOUT_FLAG = SharedFlag("connect_timeout", float, ("--timeout",), "SECONDS",
                                  "seconds a game may take to load, list its games and connect; raise it for a game "
                                  "that loads slowly", CONNECT_TIMEOUT)
SHARED_FLAGS = (ENV_PATH_FLAG, ENV_ID_FLAG, AGENTS_FLAG, INSTANCES_FLAG, SEED_FLAG, CONNECT_TIMEOUT_FLAG)


def agents_for(num_envs, num_instances, agents_per_instance=None, as_flags=False, copies=1):
    """The agents each instance is asked for, from num_envs = num_instances x agents_per_instance: the one given, or
    num_envs / num_instances, or None (the game chooses) when neither num_envs nor agents_per_instance is given.
    FlagError when they do not fit together; ``as_flags`` names the command-line flags, else the keywords. With
    ``copies`` of the scene in each instance, each copy is asked for them: num_envs = instances x copies x agents."""
    name = (lambda n: "--" + n.replace("_", "-")) if as_flags else (lambda n: n)
    given = (lambda n, v: f"{name(n)} {v}") if as_flags else (lambda n, v: f"{n}={v}")
    if num_envs is None:
        _check_agents_of_copies(agents_per_instance, copies, given)
        return agents_per_instance
    areas = num_instances * copies  # each copy of the scene is asked for the agents
    instances = given("num_instances", num_instances) + (f" x {given('copies', copies)}" if copies != 1 else "")
    if agents_per_instance is None and num_envs % areas:
        raise FlagError(f"{given('num_envs', num_envs)} is not a multiple of {instances}: num_envs = num_instances x "
                        f"agents_per_instance{' x copies' if copies != 1 else ''} (give {name('agents_per_instance')} "
                        "instead)")
    per = agents_per_instance or num_envs // areas
    if num_envs != areas * per:
        raise FlagError(f"{given('num_envs', num_envs)} must equal {name('num_instances')} x "
                        f"{name('agents_per_instance')}{' x ' + name('copies') if copies != 1 else ''} = "
                        f"{num_instances} x {per}{f' x {copies}' if copies != 1 else ''} = {areas * per}: drop "
                        f"{name('num_envs')} or make them agree")
    _check_agents_of_copies(per, copies, given)
    return per


def _check_agents_of_copies(per, copies, given) -> None:
    """Each of the ``copies`` asked for ``per`` agents: together at most bounds.AGENTS_PER_INSTANCE in one instance."""
    if per is not None and per * copies > MAX_AGENTS_PER_INSTANCE:
        raise FlagError(f"{given('agents_per_instance', per)} x {given('copies', copies)} = {per * copies:,} agents in "
                        f"one instance, over the {MAX_AGENTS_PER_INSTANCE} it can build (Godot's message queue "
                        f"overflows while it sets them up): ask for fewer per instance, and more instances")


def check_instance_options(num_instances, agents_per_instance=None, speedup=1, action_repeat=1, copies=1) -> None:
    """FlagError (a ValueError, one line with the reason) for settings no game should be started with."""
    NUM_INSTANCES.check_keyword("num_instances", num_instances)
    AGENTS_PER_INSTANCE.check_keyword("agents_per_instance", agents_per_instance)
    COPIES.check_keyword("copies", copies)
    SPEEDUP.check_keyword("speedup", speedup)
    ACTION_REPEAT.check_keyword("action_repeat", action_repeat)
    _check_agents_of_copies(agents_per_instance, copies, lambda n, v: f"{n}={v}")
