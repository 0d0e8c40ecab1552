"""`godot-ppo profile`: its flags, the checks made before any instance starts, and the run over every configuration
(then the training comparison), writing the report after each one."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from python_trainer.base.errors import Fault, UserError
from python_trainer.base.files import OutputError, check_output
from python_trainer.base.flags import (AGENTS_FLAG, COPIES, INSTANCES_FLAG, NUM_INSTANCES, SEED_FLAG, FlagError,
                                       GoesWith, Rule, agents_for, at_least, explicit_fields, flag, parse_flags,
                                       positive)
from python_trainer.envs.env_params import check_params
from python_trainer.envs.game import GodotGame, godot_game
from python_trainer.envs.xvfb import display_available, no_display_message, user_display
from python_trainer.run.curriculum import from_flags
from python_trainer.tools.game_flags import EnvParam, GameArgs
from python_trainer.tools.profile import camera as cameras, compare, report as files
from python_trainer.tools.profile.measure import MODES, Config, load_policy, profile_config
from python_trainer.tools.profile.sample import describe_machine

DEFAULT_SECONDS = 10.0
ROUGH_OUTPUT_BYTES = 8 * 2**20  # the report's four files and the instances' logs, checked free before profiling
PROG = "godot-ppo profile"


def _items(text: str) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()]


def instance_counts(text: str) -> list[int]:
    """--num-instances 4,1,2 -> [1, 2, 4] (sorted, duplicates dropped)."""
    return sorted({int(t) for t in _items(text)})


def mode_list(text: str) -> list[str]:
    """--modes windowed,headless -> ["headless", "windowed"] (headless first, duplicates dropped)."""
    return [m for m in MODES if m in _items(text)]


INSTANCE_COUNTS = Rule(lambda v: bool(_items(v)) and all(t.isdigit() and NUM_INSTANCES.ok(int(t)) for t in _items(v)),
                       f"a comma-separated list of instance counts, each {NUM_INSTANCES.what}", "1,2,4,8")
MODE_LIST = Rule(lambda v: bool(_items(v)) and all(t in MODES for t in _items(v)),
                 f"a comma-separated list of modes from {', '.join(MODES)}", "headless,windowed")
SECONDS = positive("10", "a number of seconds > 0")


@dataclass
class ProfileArgs(GameArgs):
    """Profile headless against windowed Godot instances: throughput and cost per instance. CPU % is percent of one
    core (0..100 x cores). Windowed instances need a display: without $DISPLAY the launcher starts Xvfb."""

    modes: str = flag(",".join(MODES), MODE_LIST)
    """comma-separated, from headless,windowed"""
    num_instances: INSTANCES_FLAG.type(": comma-separated counts, one configuration each",
                                       listed=True) = INSTANCES_FLAG.default("1,2,4,8", INSTANCE_COUNTS)
    agents_per_instance: AGENTS_FLAG.type(" (each copy of the scene, with --copies; default: the game's own "
                                          "choice)") = AGENTS_FLAG.default(None)
    copies: int = flag(1, COPIES)
    """copies of the game's scene each instance runs, each in its own Viewport and World, as train's --copies: each
    instance then simulates copies x agents-per-instance agents"""
    env_param: EnvParam = ()
    """an environment parameter of the game, NAME=NUMBER, NAME=uniform(LOW,HIGH) or NAME=gaussian(MEAN,STD), as
    train's; repeat the flag for several. With --policy RUN, the run's own --env-param are used too (one given here
    replaces the run's of the same name)"""
    steps: Optional[int] = flag(None, at_least(1, "an integer >= 1", "2000"))
    """measure this many vector steps per configuration (instead of --seconds)"""
    seconds: Optional[float] = flag(None, SECONDS)
    """measure this many seconds per configuration (default: 10; instead of --steps)"""
    warmup_steps: int = flag(50, at_least(0, "an integer >= 0", "50"))
    """vector steps before the window"""
    policy: str = "random"
    """random, or a training run folder / model.pt whose deterministic actions are used"""
    out: Optional[str] = None
    """output folder (default: runs/profile_<time>/)"""
    seed: SEED_FLAG.type(" of the games") = SEED_FLAG.default(0)
    sample_interval: float = flag(0.25, SECONDS)
    """psutil sampling period in seconds"""
    engine_benchmark: bool = True
    """measure the engine-only rates first (the headless binary's --benchmark_steps, as many processes as instances)"""
    compare_training: bool = False
    """then train PPO on the fastest headless and the fastest windowed configuration"""
    compare_seconds: float = flag(60.0, SECONDS, goes_with=GoesWith("compare_training", "the training comparison",
                                                                    "--compare-training"))
    """wall-clock budget of each comparison training"""


def parse_args(argv) -> ProfileArgs:
    """The flags, checked; --seconds defaults to 10 when neither --steps nor --seconds is given."""
    opts = parse_flags(ProfileArgs, argv, PROG)  # --help: the docstring
    if opts.steps is not None and opts.seconds is not None:
        raise FlagError("--seconds is not allowed with --steps: give one window, a number of steps or of seconds")
    agents_for(None, 1, opts.agents_per_instance, as_flags=True, copies=opts.copies)  # agents x copies: bounded
    from_flags(opts.env_param)  # each --env-param parses (the game's own check comes once it is known)
    return opts if opts.steps is not None or opts.seconds is not None else replace(opts, seconds=DEFAULT_SECONDS)


def display_note(modes) -> Optional[str]:
    """What the report says about the windowed instances' display; a UserError when they cannot have one."""
    if "windowed" not in modes:
        return None
    if user_display() is not None:
        return f"Windowed instances render on $DISPLAY={user_display()}."
    if not display_available():
        raise UserError(no_display_message("profile --modes headless only"))
    return ("No $DISPLAY: the launcher starts an Xvfb virtual display for each windowed configuration (software "
            "rendering; its CPU is the Xvfb column).")


def _game_and_policy(opts: ProfileArgs, modes) -> tuple[GodotGame, object, list[str]]:
    """The game (its export checked for every mode asked), the policy that acts (None: random actions) and the
    --env-param flags in force: a run's (--policy RUN) with this command's over them."""
    game = godot_game(opts.env_id, opts.env_path, timeout=opts.connect_timeout)
    for mode in modes:
        game.export.command(headless=(mode == "headless"))  # a GameError names the fix
    policy, trained = load_policy(opts.policy, game.env)
    return game, policy, env_param_flags(trained.get("env_param") or (), opts.env_param)


def env_param_flags(run_flags, given) -> list[str]:
    """The --env-param flags a profile uses: the run's, each replaced by one ``given`` of the same name, then the
    other ``given``."""
    mine = from_flags(given)[0]
    return [text for text in run_flags if text.partition("=")[0].strip() not in mine] + list(given)


def env_params(game: GodotGame, flags) -> tuple:
    """((name, env_params.Value), ...) of --env-param ``flags``, checked against what ``game`` declares."""
    params, where = from_flags(flags)
    check_params(game, {name: [lesson.value for lesson in lessons] for name, lessons in params.items()}, where)
    return tuple((name, lessons[0].value) for name, lessons in sorted(params.items()))


def _camera(game: GodotGame, opts: ProfileArgs, cfg: Config) -> Optional[dict]:
    """The camera the game's agents observe (with its headless engine-only frame time), or None. ``cfg``: how the
    instances run (copies, environment parameters)."""
    try:
        camera = cameras.seen_camera(game, opts.connect_timeout, cfg.game_args)
    except Exception as e:  # the game did not start: said as the profile's error
        raise Fault(f"{game.env}: cannot read its env_info from a headless instance: {e}") from None
    if camera and opts.engine_benchmark:
        camera["headless_engine_ms_per_decision"] = cameras.headless_engine_ms(game, cfg)
    return camera


def main(argv=None) -> int:
    """`godot-ppo profile`: everything that can be checked before a single instance starts, then the profile."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse_args(argv)
    modes, counts = mode_list(opts.modes), instance_counts(opts.num_instances)
    game, policy, param_flags = _game_and_policy(opts, modes)
    params = env_params(game, param_flags)
    if param_flags != list(opts.env_param):
        print(f"--policy {opts.policy}: with its run's environment parameters: "
              f"{', '.join(f'{n}={v}' for n, v in params)}", file=sys.stderr)
    base = Config("headless", 1, opts.agents_per_instance, opts.copies, params)
    camera = _camera(game, opts, base)
    if camera:  # windowed only, 1 up to the cores (a headless build renders nothing)
        modes, counts, line = cameras.camera_modes(game.env, camera, modes, counts, explicit_fields(argv, ProfileArgs))
        print(line, file=sys.stderr)
    note = display_note(modes)
    out_dir = Path(opts.out) if opts.out else Path("runs") / time.strftime("profile_%Y%m%d_%H%M%S")
    try:  # before any instance starts: a folder that cannot be made or written to, or a disk without room
        check_output(out_dir, ROUGH_OUTPUT_BYTES, folder=True)
    except OutputError as e:
        raise UserError(f"--out: {e}") from None
    configs = [replace(base, mode=mode, instances=n) for mode in modes for n in counts]
    window = f"{opts.steps} vector steps" if opts.steps is not None else f"{opts.seconds:g} s"
    report = {
        "env": game.env, "env_path": game.env_path, "argv": argv, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "window": window, "warmup_steps": opts.warmup_steps, "policy": opts.policy, "copies": opts.copies,
        "env_params": {name: str(value) for name, value in params},
        "frame_stack": policy.frame_stack if policy is not None else 1,
        "sample_interval": opts.sample_interval, "machine": describe_machine(), "display_note": note, "results": [],
        "interrupted": False, **({"camera": camera} if camera else {}),
    }
    if note:
        print(note, file=sys.stderr)
    print(f"profiling {len(configs)} configuration(s) of {game.env}: {window} each; output in {out_dir}",
          file=sys.stderr)
    status = 0
    try:
        status = _profile_all(configs, opts, game, out_dir, policy, report)
        if opts.compare_training:
            status = max(status, _compare_training(modes, base, opts, game, out_dir, report))
    except KeyboardInterrupt:
        report["interrupted"] = True
        status = 130
        print("\ninterrupted: writing what was measured so far (every instance is closed)", file=sys.stderr)
    except OutputError as e:  # the disk filled up (or the folder went away) while profiling
        raise Fault(f"{e}; every instance is closed") from None
    try:
        files.write_outputs(out_dir, report, png=True)
    except OutputError as e:  # the disk filled up since the check: a fault, not what the user gave
        raise Fault(str(e)) from None
    print(files.markdown(report))
    print(f"written: {out_dir / 'profile.json'}, profile.csv, profile.md, profile.png", file=sys.stderr)
    return status


def _profile_all(configs, opts: ProfileArgs, game: GodotGame, out_dir: Path, policy, report: dict) -> int:
    """Every configuration in turn, each line said as it is measured; 1 when one failed, else 0."""
    from tqdm import tqdm

    def report_line(msg: str) -> None:
        tqdm.write(f"godot-ppo: {msg}", file=sys.stderr)

    status = 0
    bar = tqdm(configs, desc="profile", unit="config", dynamic_ncols=True, disable=None)
    for cfg in bar:
        bar.set_postfix_str(cfg.key)
        result = profile_config(cfg, opts, game, out_dir, policy, report_line, camera="camera" in report)
        report["results"].append(result)
        for key in ("engine_version", "renderer"):
            if result.get(key) and not report["machine"].get(key):
                report["machine"][key] = result[key]
        if result["status"] == "ok":
            tqdm.write(f"{cfg.key}: {result['agent_steps_per_second']:,.0f} agent-steps/s{_rates(result)}",
                       file=sys.stderr)
        else:
            status = 1
            tqdm.write(f"{cfg.key}: failed: {result.get('error', '').splitlines()[0][:300]}", file=sys.stderr)
        files.write_outputs(out_dir, report, png=False)
    bar.close()
    return status


def _rates(result: dict) -> str:
    """The engine-only, synced/engine and pipelined figures of a measured configuration, as "; name value" parts."""
    row = files.table_row(result)
    return "".join(f"; {name} {files.fmt_value(row[k], f)}" for k, name, f in (
        ("engine_only_agent_steps_per_s", "engine-only", "{:,.0f}"),
        ("synced_share_of_engine_only", "synced/engine", "{:.0%}"),
        ("pipelined_agent_steps_per_s", "pipelined", "{:,.0f}")) if row[k] is not None)


def _compare_training(modes, base: Config, opts: ProfileArgs, game: GodotGame, out_dir: Path, report: dict) -> int:
    """PPO on the fastest configuration of each mode (as ``base`` runs the instances: agents asked, copies,
    environment parameters, and the profiled policy's frame stack); 1 when a training failed, else 0."""
    status = 0
    best = [b for b in (files.best_config(report["results"], m) for m in modes) if b]
    report["training"] = []
    for b in best:
        cfg = replace(base, mode=b["mode"], instances=b["instances"])
        print(f"training PPO on {cfg.key} for {opts.compare_seconds:g} s of wall clock...", file=sys.stderr)
        t = compare.train_for(cfg, opts, game, out_dir, opts.compare_seconds, report["frame_stack"])
        report["training"].append(t)
        if t["status"] != "ok":
            status = 1
            print(f"{cfg.key} training failed: {t.get('error')}", file=sys.stderr)
        files.write_outputs(out_dir, report, png=False)
    report["training_verdict"] = compare.training_verdict(report["training"])
    return status
