"""`godot-ppo profile`: a tiny real profile (headless and windowed, 1 and 2 instances), a crash in the middle of
a profile, Ctrl-C, PPO comparison, and bad input. Windowed instances run under the Xvfb the launcher starts when
$DISPLAY is unset (or on $DISPLAY)."""

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from helpers import REPO, descendants, end, train_run, wait_for, wait_gone
from python_trainer import cli
from python_trainer.base.flags import parse_flags, to_argv
from python_trainer.run import train
from python_trainer.tools.profile import command as profiling

pytestmark = pytest.mark.timeout(120)


def run_profile(tmp_path, *args):
    out = tmp_path / "out"
    code = profiling.main([*args, "--out", str(out), "--no-engine-benchmark"])
    return code, out


def our_pids(report):
    pids = []
    for r in report["results"]:
        pids += r.get("pids", []) + r.get("xvfb_pids", [])
    for t in report.get("training") or []:
        pids += t.get("child_pids", [])
    return pids


@pytest.mark.slow
def test_engine_only_synced_and_pipelined_side_by_side(tmp_path, headless_export, capsys):
    out = tmp_path / "out"
    code = profiling.main(["--modes", "headless", "--num-instances", "1,2", "--agents-per-instance", "4",
                           "--steps", "100", "--warmup-steps", "5", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rows = {int(r["instances"]): r for r in csv.DictReader(open(out / "profile.csv"))}
    for n, row in rows.items():
        engine, synced = float(row["engine_only_agent_steps_per_s"]), float(row["agent_steps_per_s"])
        assert engine > 0 and synced > 0
        assert float(row["synced_share_of_engine_only"]) == pytest.approx(synced / engine, abs=1e-3)  # the CSV keeps 3 decimals
    assert rows[1]["pipelined_agent_steps_per_s"] == "" and float(rows[2]["pipelined_agent_steps_per_s"]) > 0
    header = next(line for line in (out / "profile.md").read_text().splitlines() if line.startswith("| mode"))
    assert "engine-only agent-steps/s | synced agent-steps/s | synced/engine | pipelined agent-steps/s" in header
    assert "synced/engine" in printed.err  # the per-configuration line says it as it goes


@pytest.mark.slow
def test_tiny_profile_headless_and_windowed(tmp_path, headless_export, windowed_export, capsys):
    # --instances and --agents: the older names of --num-instances and --agents-per-instance
    code, out = run_profile(tmp_path, "--modes", "headless,windowed", "--instances", "1,2", "--agents", "3",
                            "--steps", "150", "--warmup-steps", "5", "--sample-interval", "0.1")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    for name in ("profile.json", "profile.csv", "profile.md", "profile.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    report = json.loads((out / "profile.json").read_text())
    cores = report["machine"]["cores_logical"]
    assert cores >= 1 and report["machine"]["memory_total_mb"] > 0 and report["machine"]["cpu_model"]
    assert report["machine"]["engine_version"].startswith("3.2")
    results = {r["key"]: r for r in report["results"]}
    assert set(results) == {"headless_x1", "headless_x2", "windowed_x1", "windowed_x2"}
    for key, r in results.items():
        assert r["status"] == "ok", (key, r.get("error"))
        assert r["steps"] == 150 and r["agent_steps_per_second"] > 0
        assert r["agent_steps_per_second"] == pytest.approx(r["round_trips_per_second"] * 3 * r["instances"])
        assert r["physics_fps_per_instance"] > 0
        res = r["resources"]
        assert res["instance"]["count"] == r["instances"]
        for role in ("instance", "python"):
            for k in ("cpu_user_pct", "cpu_system_pct"):
                assert 0 <= res[role][k] <= 100 * cores * r["instances"] + 5, (key, role, k, res[role][k])
            assert res[role]["rss_mb_per_process"] > 0 and res[role]["threads_per_process"] >= 1
        assert 0 <= res["machine_cpu_pct"] <= 100 * cores + 1
        assert r["samples"], key  # every sample is kept
        # the pipelined window runs where training pipelines: headless, 2 or more instances
        assert (r.get("pipelined_agent_steps_per_second", 0) > 0) == (key == "headless_x2"), key
        assert "engine_only_agent_steps_per_second" not in r  # --no-engine-benchmark
        if r["mode"] == "windowed":
            assert r["rendered_fps_per_instance"] > 0 and r["game_reports_headless"] is False
            assert r["drawn"] == "window"  # a game without a camera: its window is drawn every frame
        else:
            assert r["rendered_fps_per_instance"] is None and r["game_reports_headless"] is True

    rows = list(csv.DictReader(open(out / "profile.csv")))
    assert [(r["mode"], r["instances"]) for r in rows] == [("headless", "1"), ("headless", "2"),
                                                          ("windowed", "1"), ("windowed", "2")]
    assert all(float(r["agent_steps_per_s"]) > 0 and float(r["rss_mb_per_instance"]) > 0 for r in rows)
    assert all(float(r["rendered_fps_per_instance"]) > 0 for r in rows if r["mode"] == "windowed")

    md = (out / "profile.md").read_text()
    assert "| headless | 1 | 3 | ok |" in md and "| windowed | 2 | 3 | ok |" in md
    verdict = [line for line in md.splitlines() if line.startswith("Verdict: ")]
    assert len(verdict) == 1 and "headless is" in verdict[0] and "x faster on this" in verdict[0]
    assert verdict[0] == report["verdict"]
    assert verdict[0] in printed.out  # the table and verdict are printed too
    if not os.environ.get("DISPLAY"):
        assert "Xvfb" in md and all(r["display"] for r in report["results"] if r["mode"] == "windowed")

    assert wait_gone(our_pids(report)) == []


def _is_driven(proc) -> bool:
    """A Godot instance (a psutil.Process or a pid) connected to its trainer."""
    try:
        proc = psutil.Process(proc) if isinstance(proc, int) else proc
        return proc.name().startswith("rl_games") and any(c.status == "ESTABLISHED" for c in proc.net_connections("tcp"))
    except psutil.Error:
        return False


def _cmdline(proc) -> list:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _kill_first_instance(killed, stop):
    """Kill (SIGKILL) the first Godot child of this process once it has a TCP connection (i.e. is being driven) and
    is a measured one (of 2 agents: the profile's first look at the game's env_info has 1)."""
    me = psutil.Process()
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        for child in me.children(recursive=True):
            if _is_driven(child) and "--agents=2" in _cmdline(child):
                try:
                    child.kill()
                except psutil.Error:
                    continue
                killed.append(child.pid)
                return
        stop.wait(0.02)


@pytest.mark.slow
def test_crashed_instance_is_reported_and_the_profile_goes_on(tmp_path, headless_export, capsys):
    killed, stop = [], threading.Event()
    killer = threading.Thread(target=_kill_first_instance, args=(killed, stop), daemon=True)
    killer.start()
    try:
        code, out = run_profile(tmp_path, "--modes", "headless", "--instances", "1,2", "--agents", "2",
                                "--steps", "3000", "--warmup-steps", "5")
    finally:
        stop.set()
        killer.join(timeout=5)
    err = capsys.readouterr().err
    assert killed, "the test could not find the instance to kill"
    assert code == 1
    report = json.loads((out / "profile.json").read_text())
    first, second = report["results"]
    assert first["key"] == "headless_x1" and first["status"] == "failed"
    assert "instance 0" in first["error"] and "headless_x1: failed" in err
    assert "starting instance 0" in first["error"] + first.get("log_tail", "")  # the instance's log tail
    assert second["key"] == "headless_x2" and second["status"] == "ok" and second["agent_steps_per_second"] > 0
    md = (out / "profile.md").read_text()
    assert "| headless | 1 | 2 | failed |" in md and "## Failed configurations" in md and "failed: headless_x1" in md
    assert wait_gone(killed + our_pids(report)) == []


@pytest.mark.slow
def test_ctrl_c_writes_what_was_measured(tmp_path, headless_export):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "python_trainer", "profile", "--modes", "headless", "--instances", "1,2",
         "--agents", "2", "--seconds", "3", "--warmup-steps", "5", "--no-engine-benchmark", "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    seen = set()
    try:

        def second_configuration_driven():  # noting every process the profile starts
            children = descendants(proc.pid)
            seen.update(children)
            return (out / "profile.json").exists() and any(_is_driven(c) for c in children)

        # Wait for the first configuration's results, then for the second one's instances to be driven; Ctrl-C.
        wait_for(second_configuration_driven, 60, "second configuration's instances driven", proc, poll=0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        end(proc)
    assert proc.returncode == 130, stderr.decode()
    assert b"interrupted" in stderr
    report = json.loads((out / "profile.json").read_text())
    assert report["interrupted"] is True
    assert [r["key"] for r in report["results"]] == ["headless_x1"] and report["results"][0]["status"] == "ok"
    assert (out / "profile.png").is_file() and "Interrupted" in (out / "profile.md").read_text()
    assert wait_gone(list(seen)) == []


@pytest.mark.slow
def test_compare_training(tmp_path, headless_export, capsys):
    code, out = run_profile(tmp_path, "--modes", "headless", "--instances", "1", "--agents", "4", "--steps", "50",
                            "--warmup-steps", "5", "--compare-training", "--compare-seconds", "12")
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "profile.json").read_text())
    (t,) = report["training"]
    assert t["status"] == "ok" and t["key"] == "headless_x1" and t["exit_code"] == 130
    assert t["global_steps"] > 0 and t["steps_per_second"] > 0 and 12 <= t["wall_seconds"] < 60
    assert "Training comparison" in (out / "profile.md").read_text()
    assert t["child_pids"] and wait_gone(our_pids(report)) == []


COUNTS = "a comma-separated list of instance counts, each 1 to 64"
AGENTS = "--agents-per-instance {} is not valid: give 1 to 2048"


@pytest.mark.parametrize("args, message", [
    (["--num-instances", "0"], f"--num-instances 0 is not valid: give {COUNTS}"),
    (["--instances", "1,x"], f"--num-instances 1,x is not valid: give {COUNTS}"),
    (["--instances", "-2"], f"--num-instances -2 is not valid: give {COUNTS}"),
    (["--num-instances", "1,65"], f"--num-instances 1,65 is not valid: give {COUNTS}"),
    (["--agents", "0"], AGENTS.format(0)),
    (["--agents-per-instance=-3"], AGENTS.format(-3)),
    (["--modes", "fullscreen"], "give a comma-separated list of modes from headless, windowed"),
    (["--modes", "headless,gpu"], "give a comma-separated list of modes from headless, windowed"),
    (["--steps", "10", "--seconds", "2"], "--seconds is not allowed with --steps"),
    (["--compare-seconds", "5"], "--compare-seconds is for the training comparison: add --compare-training"),
    (["--env", "volleyball"], "unknown env id 'volleyball'"),
    (["--env-path", "/nowhere/game.x86_64"], "no such file"),
])
def test_bad_input_fails_fast(args, message, capsys, tmp_path):
    t = time.monotonic()
    assert cli.main(["profile", *args, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("godot-ppo profile: error: ") and message in err and err.count("\n") == 1, err
    assert time.monotonic() - t < 5 and not (tmp_path / "never").exists()


def test_a_flag_that_cannot_be_parsed_is_refused_by_the_parser(capsys, tmp_path):
    assert cli.main(["profile", "--agents", "x", "--out", str(tmp_path / "never")]) == 2
    assert "--agents-per-instance" in capsys.readouterr().err and not (tmp_path / "never").exists()


@pytest.mark.parametrize("command", ["profile", "launch"])
def test_profile_and_launch_show_trains_instance_flags_and_their_older_names(command, capsys):
    assert cli.main([command, "--help"]) == 0
    shown = capsys.readouterr().out
    for new, old in (("--num-instances", "--instances"), ("--agents-per-instance", "--agents")):
        assert f"{old} " in shown and f"{new} " in shown, (new, old, shown)


def test_the_comparison_gives_train_flags_it_declares():
    """The training comparison's command line is built from train's Args: it parses back to the values given."""
    argv = to_argv(train.Args, env_id="ball_chase", num_instances=2, agents_per_instance=None, window=True,
                   connect_timeout=12.5, run_dir_root="somewhere", torch_deterministic=False)
    assert argv == ["--env-id", "ball_chase", "--num-instances", "2", "--window", "--connect-timeout", "12.5",
                    "--run-dir-root", "somewhere", "--no-torch-deterministic"]
    args = parse_flags(train.Args, argv, "godot-ppo train")
    assert (args.env_id, args.num_instances, args.agents_per_instance, args.window, args.connect_timeout,
            args.run_dir_root, args.torch_deterministic) == ("ball_chase", 2, None, True, 12.5, "somewhere", False)
    with pytest.raises(TypeError, match="no field 'instances'"):
        to_argv(train.Args, instances=2)


def test_no_display_and_no_xvfb(monkeypatch, capsys, tmp_path, windowed_export):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no Xvfb on it
    assert cli.main(["profile", "--modes", "windowed", "--num-instances", "1", "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert "apt-get install xvfb" in err and "$DISPLAY is not set" in err and "profile --modes headless only" in err


def test_bad_policy(capsys, tmp_path, headless_export):
    assert cli.main(["profile", "--modes", "headless", "--policy", str(tmp_path / "no_run"), "--out",
                     str(tmp_path / "o")]) == 2
    assert "--policy" in capsys.readouterr().err and not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------- the table and verdict
def _row(n, rate, mode="headless", drawn="nothing"):
    return {"key": f"{mode}_x{n}", "mode": mode, "instances": n, "agents": 16, "copies": 1, "status": "ok",
            "drawn": drawn, "agent_steps_per_second": rate, "resources": {"machine_cpu_pct": 190.0}}


def _markdown(results):
    from python_trainer.tools.profile import report as files

    machine = {"cpu_model": "cpu", "cores_logical": 2, "memory_total_mb": 1, "load_average_at_start": [0.0],
               "python": "3", "torch": "2"}
    report = {"env": "ball_chase", "window": "10 s", "warmup_steps": 5, "policy": "random", "machine": machine,
              "results": results, "verdict": files.verdict(results, 2)}
    return report["verdict"], files.markdown(report)


def test_a_verdict_says_what_its_table_shows_when_the_best_is_at_8():
    verdict, md = _markdown([_row(1, 1000.0), _row(2, 1800.0), _row(4, 1900.0), _row(8, 4270.0)])
    assert verdict == ("Verdict: 8 headless: 4,270 agent-steps/s on this 2-core machine; headless throughput still "
                       "grows up to 8 instances")
    assert "| headless | 8 | 16 | ok | 1 | nothing | - | 4,270 |" in md
    verdict, md = _markdown([_row(1, 1000.0), _row(2, 1800.0), _row(4, 1850.0), _row(8, 1900.0)])
    assert "beyond 2 headless instances (1,800) throughput stops growing (at best +6%, 1,900 with 8;" in verdict
    assert "| headless | 2 | 16 | ok | 1 | nothing | - | 1,800 |" in md and "| 8 | 16 | ok | 1 | nothing | - | 1,900 |" in md


def test_each_row_says_what_was_drawn():
    from python_trainer.tools.profile.measure import NO_RENDER_LOOP, drawn

    assert (drawn(True, ()), drawn(False, ()), drawn(False, ("--x", NO_RENDER_LOOP))) == ("nothing", "window",
                                                                                          "cameras only")
    _, md = _markdown([_row(1, 900.0, "windowed", "window"), _row(2, 950.0, "windowed", "cameras only")])
    header = next(line for line in md.splitlines() if line.startswith("| mode"))
    assert header.startswith("| mode | inst | agents/inst | status | copies/inst | drawn |")
    assert "| windowed | 1 | 16 | ok | 1 | window |" in md and "| windowed | 2 | 16 | ok | 1 | cameras only |" in md
    assert "'cameras only', the camera sensors' viewports on decision frames, the window never drawn" in md


# ---------------------------------------------------------------------------------------------- --copies, --env-param
def test_copies_reach_the_instances_and_the_report(tmp_path, headless_export, capsys):
    code, out = run_profile(tmp_path, "--modes", "headless", "--num-instances", "1", "--agents", "2", "--copies", "2",
                            "--steps", "20", "--warmup-steps", "2")
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "profile.json").read_text())
    (r,) = report["results"]
    assert (report["copies"], r["copies"], r["agents"], r["drawn"]) == (2, 2, 4, "nothing")  # 2 copies x 2 agents
    assert "| headless | 1 | 4 | ok | 2 | nothing |" in (out / "profile.md").read_text()
    assert wait_gone(our_pids(report)) == []


def test_env_param_reaches_the_instances(tmp_path, headless_export, capsys):
    # forager sees through a camera (profiled windowed only) unless vision=0, a parameter fixed at start
    code, out = run_profile(tmp_path, "--env", "forager", "--env-param", "vision=0", "--modes", "headless",
                            "--num-instances", "1", "--agents", "2", "--steps", "20", "--warmup-steps", "2")
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "profile.json").read_text())
    (r,) = report["results"]
    assert (report["env_params"], r["mode"], r["status"], r["drawn"]) == ({"vision": "0"}, "headless", "ok", "nothing")
    assert "Environment parameters: vision=0." in (out / "profile.md").read_text()
    assert wait_gone(our_pids(report)) == []


@pytest.mark.parametrize("args, message", [
    (["--env-param", "vision"], "--env-param 'vision' is not valid: give NAME=NUMBER"),
    (["--env", "forager", "--env-param", "speed=2"], "forager has no environment parameter 'speed'"),
    (["--copies", "0"], "--copies 0 is not valid: give 1 to 256"),
    (["--agents", "1024", "--copies", "4"], "--agents-per-instance 1024 x --copies 4 = 4,096 agents in one instance"),
])
def test_bad_copies_or_env_param_fail_fast(args, message, capsys, tmp_path, headless_export):
    assert cli.main(["profile", "--modes", "headless", *args, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "never").exists(), err


@pytest.mark.slow
def test_a_runs_env_param_is_reused_by_its_profile(tmp_path, headless_export, capsys):
    run = train_run(tmp_path / "runs", "--env-id", "forager", "--env-param", "vision=0", "--num-instances", "1",
                    "--agents-per-instance", "2", "--num-steps", "8", "--total-timesteps", "16", "--eval-episodes", "0")
    code, out = run_profile(tmp_path, "--env", "forager", "--policy", str(run), "--modes", "headless",
                            "--num-instances", "1", "--agents", "2", "--steps", "10", "--warmup-steps", "2")
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "profile.json").read_text())
    assert report["env_params"] == {"vision": "0"} and report["results"][0]["status"] == "ok"
    assert f"--policy {run}: with its run's environment parameters: vision=0" in capsys.readouterr().err


def test_the_comparison_trains_with_the_profiles_copies_env_params_and_frame_stack(tmp_path):
    from types import SimpleNamespace

    from python_trainer.envs.env_params import parse_flag
    from python_trainer.tools.profile.compare import train_command
    from python_trainer.tools.profile.measure import Config

    cfg = Config("windowed", 2, 4, copies=3, env_params=(parse_flag("vision=0"), parse_flag("gap=uniform(1,2)")))
    opts, game = SimpleNamespace(seed=0, connect_timeout=30.0), SimpleNamespace(env="forager", env_path=None)
    argv = train_command(cfg, opts, game, tmp_path, "exp", frame_stack=2)[4:]  # after `python -m python_trainer train`
    args = parse_flags(train.Args, argv, "godot-ppo train")
    assert (args.num_instances, args.agents_per_instance, args.copies, args.frame_stack, args.window,
            args.env_param) == (2, 4, 3, 2, True, ("vision=0", "gap=uniform(1,2)"))
