"""Rollout workers on a Ray cluster (ray_rollouts.py): a two-node cluster on this machine (ray.cluster_utils.Cluster,
2 CPUs declared per node, so the two workers of 1 instance + 1 CPU each land one per node), trained through the CLI."""

import ipaddress
import json
import os
import signal
import subprocess
import time

import numpy as np
import psutil
import pytest

from helpers import (REPO, alive, communicate_after_signal, descendants, end, free_port, read_scalars, run_dirs,
                     train_argv, train_child, train_run, wait_for, wait_gone)
from python_trainer import cli
from python_trainer.base import running_stats
from python_trainer.run import learners, train
from python_trainer.variants import trained_agent
from python_trainer.checkpoint import load_checkpoint
from python_trainer.variants.ray_rollouts import LOOPBACK, WORKERS_JSON
from python_trainer.variants.ray_worker import RolloutWorker, export_digest

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")


@pytest.fixture(scope="module")
def cluster():
    """Two nodes on this machine, on the loopback address only (conftest sets RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
    for every Ray a test starts; the node address is named too)."""
    c = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                                        "node_ip_address": LOOPBACK})
    try:
        c.add_node(num_cpus=2, node_ip_address=LOOPBACK)
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


def _flags(address, *extra, total=8192):
    return ["--env-id", "ball_chase", "--num-instances", "1", "--agents-per-instance", "16", "--num-steps", "128",
            "--total-timesteps", str(total), "--eval-episodes", "0", "--ray-address", address, *extra]


def _train(tmp_path, address, *extra, total=8192):
    return train_argv(tmp_path, *_flags(address, *extra, total=total))


def _where(run_dir):
    return json.loads((run_dir / WORKERS_JSON).read_text())


@pytest.mark.slow
def test_two_nodes_train_record_where_and_leave_no_game(cluster, tmp_path, headless_export):
    """One worker on each node trains ball_chase; the learner's return rises; ray_workers.json names both nodes."""
    run_dir = train_run(tmp_path, *_flags(cluster.address, "--ray-workers", "2", "--learning-rate", "1e-3",
                                          total=49152))
    where = _where(run_dir)
    assert [w["worker"] for w in where] == [0, 1]
    assert len({w["node_id"] for w in where}) == 2, where
    assert all(len(w["game_pids"]) == 1 for w in where)
    games = [p for w in where for p in w["game_pids"]]
    assert wait_gone(games, timeout=10) == [], "a game process outlived the run"
    assert wait_gone([w["pid"] for w in where], timeout=10) == [], "a Ray worker outlived the run"
    assert {"ray/worker_0_steps_per_s", "ray/worker_1_steps_per_s", "ray/fragment_bytes"} <= set(read_scalars(run_dir))
    assert trained_agent.load_agent(run_dir).global_step == 49152
    for w in (0, 1):  # each worker's game logs under the run's name
        assert (run_dir / "workers" / f"worker_{w}" / "logs" / "instance_0.log").exists()
    # learning: a random ball_chase policy's episodes return about -1.1 (the first episodes of every run here);
    # after 1.5 episode lengths of training per env they return more than 0 on average
    rows = np.loadtxt(run_dir / "episodes.csv", delimiter=",", skiprows=1, ndmin=2)
    late = rows[rows[:, 0] > 49152 / 2, 1]
    assert len(late) >= 16 and late.mean() > 0.0, rows


@pytest.mark.slow
def test_lstm_and_rnd_train_on_two_nodes_and_resume(cluster, tmp_path, headless_export):
    """--lstm --rnd with Ray: two updates on the two nodes (each worker keeps its agents' LSTM state and rates its
    observations with the learner's RND; RND's warm-up runs in the workers), then --resume for two more."""
    memory = ["--env-id", "memory", "--lstm", "--rnd", "--ray-workers", "2", "--num-steps", "64"]
    run_dir = train_run(tmp_path, *_flags(cluster.address, *memory, total=4096))
    assert len({w["node_id"] for w in _where(run_dir)}) == 2
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["global_step"] == 4096 and ckpt["update"] == 2
    assert any(k.startswith("lstm.") for k in ckpt["model"]) and ckpt["model"]["critic.0.weight"].shape[0] == 2
    # the workers' warm-up (50 random steps x 32 envs) and the two rollouts' reached observations (2 x 64 x 32)
    assert ckpt["rnd"]["stats"]["obs_rms"]["count"] == pytest.approx(50 * 32 + 2 * 64 * 32, abs=1)
    assert {"charts/intrinsic_reward", "losses/rnd_loss", "ray/worker_1_steps_per_s"} <= set(read_scalars(run_dir))
    out = train_child(tmp_path / "unused", "--resume", str(run_dir), "--total-timesteps", "8192")
    assert f"resuming {run_dir} at global step 4096 (update 2/4)" in out.stdout
    assert load_checkpoint(run_dir / "model.pt")["global_step"] == 8192
    assert json.loads((run_dir / "policy.json").read_text())["lstm"]["hidden_size"] == 64
    assert wait_gone([p for w in _where(run_dir) for p in (w["pid"], *w["game_pids"])], timeout=15) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["--async"], ["--in-engine"]], ids=["sync", "async", "in-engine"])
def test_a_killed_worker_is_restarted_and_the_run_completes(cluster, tmp_path, headless_export, mode):
    """With --async the worker dies with its next fragment already asked for: it is asked of the new actor once.
    In the engine the new actor's games enter actor mode from the next broadcast, which says the path."""
    proc = subprocess.Popen(_train(tmp_path, cluster.address, "--ray-workers", "2", "--checkpoint-every", "1", *mode,
                                   total=16384), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        (run_dir,) = run_dirs(tmp_path)
        before = _where(run_dir)[1]
        os.kill(before["pid"], signal.SIGKILL)
        assert wait_gone(before["game_pids"], timeout=10) == [], "the killed worker's game outlived it"
        out, err = proc.communicate(timeout=180)
    finally:
        end(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "worker 1" in err and "restart 1/3" in err and "restart 2/3" not in err, err[-3000:]
    assert ("actors: in the engine (--in-engine)" in out) is (mode == ["--in-engine"]), out[-2000:]
    after = _where(run_dir)
    assert after[1]["pid"] != before["pid"] and after[1]["game_pids"] != before["game_pids"]
    assert trained_agent.load_agent(run_dir).global_step == 16384
    assert wait_gone([p for w in after for p in w["game_pids"]], timeout=10) == []


@pytest.mark.slow
def test_a_worker_out_of_restarts_stops_the_run_with_a_checkpoint_naming_it(cluster, tmp_path, headless_export):
    proc = subprocess.Popen(_train(tmp_path, cluster.address, "--ray-workers", "2", "--ray-max-restarts", "0",
                                   "--checkpoint-every", "1", total=10**8), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        (run_dir,) = run_dirs(tmp_path)
        where = _where(run_dir)
        os.kill(where[1]["pid"], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == 1, err[-3000:]
    node = f"node {where[1]['node_ip']} (Ray node id {where[1]['node_id'][:12]})"
    assert f"Ray worker 1 (pid {where[1]['pid']}) on {node} died after 0 restart(s)" in err, err[-3000:]
    assert f"continue with: godot-ppo train --resume {run_dir}" in err
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 2 * 16 * 128
    assert wait_gone([p for w in where for p in (w["pid"], *w["game_pids"])], timeout=15) == []


@pytest.mark.slow
def test_a_killed_learner_leaves_no_worker_and_no_game(cluster, tmp_path, headless_export):
    """SIGKILL of the driver: Ray ends the driver's actors, and their games follow them (parent-death signal)."""
    proc = subprocess.Popen(_train(tmp_path, cluster.address, "--ray-workers", "2", "--checkpoint-every", "1",
                                   total=10**8), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        (run_dir,) = run_dirs(tmp_path)
        where = _where(run_dir)
    finally:
        proc.kill()
        proc.wait()
    pids = [p for w in where for p in (w["pid"], *w["game_pids"])]
    assert wait_gone(pids, timeout=20) == [], [p for p in pids if alive(p)]


@pytest.mark.slow
def test_more_workers_than_the_cluster_has_cpus_for_is_refused(cluster, tmp_path, headless_export):
    out = subprocess.run(_train(tmp_path, cluster.address, "--ray-workers", "3"), cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "--ray-workers 3" in out.stderr and "room for 2 worker(s)" in out.stderr, out.stderr[-2000:]
    assert run_dirs(tmp_path) == []


@pytest.mark.slow
def test_an_address_without_a_cluster_is_named_within_seconds(tmp_path):
    address = f"127.0.0.1:{free_port()}"  # a port nobody listens on
    start = time.monotonic()
    out = subprocess.run(_train(tmp_path, address, "--env-id", "CartPole-v1"), cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert time.monotonic() - start < 20
    assert out.returncode == 2
    assert f"--ray-address {address}: no Ray cluster answers there" in out.stderr, out.stderr[-2000:]
    assert run_dirs(tmp_path) == []


def test_ray_flags_without_an_address_are_refused(tmp_path, capsys):
    assert cli.main(["train", "--ray-workers", "3", "--run-dir-root", str(tmp_path)]) == 2
    assert "--ray-workers is for Ray rollout workers: add --ray-address local" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _listening_addresses(pids) -> dict:
    """{address: [process:port]} of the TCP sockets the processes ``pids`` listen on (what `ss -ltnp` lists)."""
    found = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            conns, name = proc.net_connections(kind="inet"), proc.name()
        except psutil.Error:
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN:
                found.setdefault(c.laddr.ip, []).append(f"{name}:{c.laddr.port}")
    return found


def _blocked(pid, polls=5) -> bool:
    """The process sleeps (blocked in a wait) at each of ``polls`` looks, 20 ms apart."""
    for _ in range(polls):
        if psutil.Process(pid).status() != psutil.STATUS_SLEEPING:
            return False
        time.sleep(0.02)
    return True


def _loopback(address: str) -> bool:
    """127.0.0.1, ::1, or 127.0.0.1 as an IPv4-mapped IPv6 address (a dual-stack socket's ::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


@pytest.mark.slow
def test_sigterm_with_a_local_ray_checkpoints_and_ends_every_process(cluster, tmp_path, headless_export):
    """--ray-address local: SIGTERM reaches our handler (not Ray's) and is reported as SIGTERM, the checkpoint is
    written, and the workers, their games and the local Ray are gone. While it trains, every Ray process of the run
    and of the tests' two-node cluster listens on the loopback address only."""
    cmd = _train(tmp_path, "local", "--ray-workers", "1", "--checkpoint-every", "1", "--update-epochs", "1",
                 "--num-minibatches", "1", total=10**8)  # a short update: the learner mostly waits for the rollout
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}  # set by our code
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        (run_dir,) = run_dirs(tmp_path)
        where = _where(run_dir)
        rays = descendants(proc.pid)
        listening = _listening_addresses([proc.pid, *rays, *descendants(os.getpid())])
        # into ray.get, where Ray turns our handler's exception into a plain KeyboardInterrupt: the learner waits
        # for the workers' fragments there (the rollout), blocked (sleeping) for most of each update
        wait_for(lambda: _blocked(proc.pid), 60, "learner waiting for the workers", proc)
        proc.send_signal(signal.SIGTERM)
        _, err = communicate_after_signal(proc)
    finally:
        end(proc)
    assert proc.returncode == 143, err[-3000:]
    assert "interrupted by SIGTERM: checkpoint at global step" in err and "--resume" in err, err[-3000:]
    assert listening and all(_loopback(address) for address in listening), listening
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 16 * 128
    pids = [p for w in where for p in (w["pid"], *w["game_pids"])] + rays
    assert wait_gone(pids, timeout=15) == [], [p for p in pids if alive(p)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["--async"]], ids=["sync", "async"])
def test_one_ray_worker_trains_the_model_the_local_path_trains(cluster, tmp_path, mode):
    """The same algorithm: a Ray worker runs the local path's collect_rollout with the same seeds, so one worker
    gives the local run's model (CartPole: no normalisation statistics to merge). With --async both ask for each
    rollout with the weights from before the last update (the local path's collector is a process of its own)."""
    models = []
    for name, extra in (("local", []), ("ray", ["--ray-address", cluster.address, "--ray-workers", "1"])):
        argv = ["--env-id", "CartPole-v1", "--num-envs", "4", "--total-timesteps", "2048", "--eval-episodes", "0",
                *mode, *extra]
        if extra or mode:  # the learner joins Ray (or starts --async's collector) from its own process, as a user's
            train_child(tmp_path / name, *argv, timeout=120)
        else:
            assert train.main([*argv, "--run-dir-root", str(tmp_path / name)]) == 0
        (run_dir,) = run_dirs(tmp_path / name)
        models.append(load_checkpoint(run_dir / "model.pt")["model"])
    assert models[0].keys() == models[1].keys()
    for key in models[0]:
        assert (models[0][key] == models[1][key]).all(), key


@pytest.mark.slow
def test_a_node_without_the_binary_is_refused_at_start_naming_it(cluster, tmp_path, monkeypatch, headless_export):
    """The learner says the game is at a path where no node has it: every worker refuses before any game starts."""
    from python_trainer.variants import ray_rollouts
    from python_trainer.envs.game import resolve_env

    missing = tmp_path / "elsewhere" / "rl_games.x86_64"
    monkeypatch.setattr(ray_rollouts, "export_digest", lambda paths: {str(missing): "0" * 64})  # the learner only
    args = train.Args(env_id="ball_chase", num_instances=1, agents_per_instance=2, ray_address=cluster.address)
    game = resolve_env("ball_chase")
    with pytest.raises(ray_rollouts.RaySetupError) as e:
        ray_rollouts.RayRollouts(game, args, tmp_path, learners.env_kwargs(args, game, 0, tmp_path), say=print)
    assert f"has no game file at {missing}: copy the same exports" in str(e.value)
    assert str(e.value).startswith("node "), str(e.value)
    assert not (tmp_path / "workers").exists()  # no worker started its games


def test_a_node_with_another_binary_is_refused_naming_it(tmp_path):
    game = tmp_path / "game.x86_64"
    game.write_bytes(b"one build")
    worker = object.__new__(RolloutWorker)
    worker.node_ip, worker.node_id = "10.0.0.7", "abcdef0123456789"
    worker.digest = export_digest([game])
    assert worker.check_binary() is None
    game.write_bytes(b"another build")
    assert "node 10.0.0.7 (Ray node id abcdef012345) has a different" in worker.check_binary()
    game.unlink()
    assert worker.check_binary() == f"node 10.0.0.7 (Ray node id abcdef012345) has no game file at {game}"


def _copy(rms):
    out = running_stats.RunningMeanStd(shape=rms.mean.shape)
    out.mean, out.var, out.count = rms.mean.copy(), rms.var.copy(), rms.count
    return out


def test_merged_moments_equal_the_moments_of_all_the_data():
    """Two workers start from the learner's statistics and see one part of the data each; the learner merges what
    each added and ends where it would have seeing all the data itself."""
    rng = np.random.default_rng(0)
    data = [rng.normal(i, 1 + i, (50, 3)) for i in range(3)]
    learner = running_stats.RunningMeanStd(shape=(3,))
    learner.update(data[0])
    start = _copy(learner)
    workers = [_copy(start) for _ in data[1:]]
    for worker, part in zip(workers, data[1:]):
        worker.update(part)
    for worker in workers:
        learner.update_from_moments(*worker.moments_since(start.mean, start.var, start.count))
    everything = np.concatenate(data)
    np.testing.assert_allclose(learner.mean, everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(learner.var, everything.var(0), rtol=1e-4)


@pytest.mark.slow
def test_a_ray_worker_gives_its_games_the_runs_environment_parameters(cluster, tmp_path, headless_export):
    """jumper with its gaps widened by --env-param: one Ray worker's episodes are the local run's, and not those of a
    run without the parameters (one update, so no merged statistics differ)."""
    episodes = {}
    for name, extra in (("local", []), ("ray", ["--ray-address", cluster.address, "--ray-workers", "1"]),
                        ("default", None)):
        argv = ["--env-id", "jumper", "--agents-per-instance", "4", "--num-steps", "256", "--total-timesteps", "1024",
                "--num-minibatches", "4", "--eval-episodes", "0", "--no-in-engine",  # Ray steps; so must the local run
                *(["--env-param", "gap_min=3.5", "--env-param", "gap_max=4.0"] if extra is not None else []),
                *(extra or [])]
        if extra:  # the learner joins Ray from its own process, as `godot-ppo train` does
            train_child(tmp_path / name, *argv, timeout=180)
        else:
            assert train.main([*argv, "--run-dir-root", str(tmp_path / name)]) == 0
        (run_dir,) = run_dirs(tmp_path / name)
        episodes[name] = [line.split(",")[:3] for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
    assert len(episodes["local"]) >= 4 and episodes["ray"] == episodes["local"]
    assert episodes["default"] != episodes["local"]


# ---- Ray's own faults under a local Ray (CartPole: no game to start), each ending in one line -------------------------
LOCAL_RUN = ["--env-id", "CartPole-v1", "--num-envs", "4", "--total-timesteps", str(10**8), "--eval-episodes", "0",
             "--ray-address", "local", "--ray-workers", "1", "--async", "--checkpoint-every", "1"]


def _ray_process(learner: int, name: str):
    """The pid of the local Ray's process ``name`` (raylet, gcs_server) below ``learner``, or None."""
    for pid in descendants(learner):
        try:
            if psutil.Process(pid).name() == name:
                return pid
        except psutil.Error:
            pass
    return None


def _fault_run(tmp_path, fault, *, trained=True) -> tuple:
    """A local-Ray --async CartPole training, ``fault(learner pid)`` once it has a checkpoint (or, not ``trained``,
    once its raylet runs); (exit status, stderr, its run folder or None, every pid that was below it)."""
    proc = subprocess.Popen(train_argv(tmp_path, *LOCAL_RUN), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        if trained:
            wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        else:
            wait_for(lambda: _ray_process(proc.pid, "raylet"), 120, "the local Ray's raylet", proc)
        below = descendants(proc.pid)
        fault(proc.pid)
        _, err = communicate_after_signal(proc)
    finally:
        end(proc)
    runs = run_dirs(tmp_path)
    return proc.returncode, err, runs[0] if runs else None, below


def _error_lines(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]


@pytest.mark.slow
def test_a_killed_raylet_is_said_in_one_line_and_releases_the_run(tmp_path):
    """Ray ends the learner at once when its node's raylet goes (its object store with it): the guardian says so
    on the learner's stderr, and the run keeps its checkpoint and releases train.lock. (The learner, which looks at
    the local raylet every 2 s while it waits, may find it gone first: then it says so itself, with a checkpoint.)"""
    raylet = []
    code, err, run_dir, below = _fault_run(
        tmp_path, lambda pid: raylet.append(_ray_process(pid, "raylet")) or os.kill(raylet[0], signal.SIGKILL))
    assert code == 1, err[-3000:]
    (line,) = _error_lines(err)
    assert f"raylet (pid {raylet[0]}) ended" in line, line
    assert f"continue with: godot-ppo train --resume {run_dir}" in err and "Traceback" not in err
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 512
    assert not (run_dir / "train.lock").exists()
    assert wait_gone(below, timeout=15) == [], [p for p in below if alive(p)]


@pytest.mark.slow
def test_a_killed_gcs_stops_the_run_with_a_checkpoint_in_one_line(tmp_path):
    """The learner finds the local Ray's GCS gone while it waits for its workers (within seconds; Ray's own C++
    abort would come after RAY_gcs_rpc_server_reconnect_timeout_s, 60)."""
    gcs = []
    code, err, run_dir, below = _fault_run(
        tmp_path, lambda pid: gcs.append(_ray_process(pid, "gcs_server")) or os.kill(gcs[0], signal.SIGKILL))
    assert code == 1, err[-3000:]
    (line,) = _error_lines(err)
    assert f"the local Ray's gcs_server (pid {gcs[0]}) ended under the run" in line, line
    assert f"continue with: godot-ppo train --resume {run_dir}" in err and "Traceback" not in err
    assert "rpc_client" not in err and "*** " not in err  # no C++ abort, no stack dump
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 512
    assert not (run_dir / "train.lock").exists()
    assert wait_gone(below, timeout=15) == [], [p for p in below if alive(p)]


@pytest.mark.slow
def test_sigterm_while_the_local_ray_starts_exits_143_and_leaves_nothing(tmp_path):
    code, err, run_dir, below = _fault_run(tmp_path, lambda pid: os.kill(pid, signal.SIGTERM), trained=False)
    assert code == 143, err[-3000:]
    assert "interrupted by SIGTERM" in err and "Traceback" not in err and "*** " not in err, err[-3000:]
    assert run_dir is None or not (run_dir / "train.lock").exists()
    assert wait_gone(below, timeout=15) == [], [p for p in below if alive(p)]


@pytest.mark.slow
def test_a_worker_killed_during_the_final_evaluation_is_restarted_and_the_run_completes(cluster, tmp_path,
                                                                                        headless_export):
    proc = subprocess.Popen(_train(tmp_path, cluster.address, "--ray-workers", "2", "--async", "--max-policy-lag", "8",
                                   "--eval-episodes", "64", total=4096), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob("*/model.pt")), 120, "the final model (then the evaluation)", proc)
        (run_dir,) = run_dirs(tmp_path)
        before = _where(run_dir)[0]
        os.kill(before["pid"], signal.SIGKILL)  # worker 0 evaluates
        out, err = communicate_after_signal(proc, timeout=120)
    finally:
        end(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "worker 0" in err and "restart 1/3" in err, err[-3000:]
    assert "eval: deterministic policy, 64 episodes" in out, out[-2000:]
    assert wait_gone([p for w in _where(run_dir) for p in (w["pid"], *w["game_pids"])], timeout=15) == []


@pytest.mark.slow
def test_a_stopped_ray_worker_is_named_after_step_timeout_with_a_checkpoint(tmp_path):
    """SIGSTOP of a Ray worker: its heartbeats stop, so the learner's wait ends --step-timeout after the last one,
    naming the worker; the stopped worker is killed at close."""
    proc = subprocess.Popen(train_argv(tmp_path, *LOCAL_RUN, "--step-timeout", "3"), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob("*/checkpoint.pt")), 120, "first update", proc)
        (run_dir,) = run_dirs(tmp_path)
        worker, below = _where(run_dir)[0]["pid"], descendants(proc.pid)
        os.kill(worker, signal.SIGSTOP)
        stopped = time.monotonic()
        _, err = communicate_after_signal(proc)
        took = time.monotonic() - stopped
    finally:
        end(proc)
    assert proc.returncode == 1, err[-3000:]
    (line,) = _error_lines(err)
    assert f"Ray worker 0 (pid {worker})" in line and "said nothing for" in line and "stopped or stuck" in line, line
    assert f"continue with: godot-ppo train --resume {run_dir}" in err and "Traceback" not in err
    assert took < 3 + 20, took
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] >= 512
    assert wait_gone(below, timeout=15) == [], [p for p in below if alive(p)]


# ---- in-engine actors on Ray workers (engine_actors.py through ray_worker.py) ------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["--no-in-engine"]], ids=["default", "no-in-engine"])
def test_ray_workers_collect_in_the_engine_by_the_local_rule_and_step_with_no_in_engine(cluster, tmp_path,
                                                                                         headless_export, mode):
    """ball_chase at 2 agents per instance on the two nodes: the driver decides on what the workers report, by the
    local rule (at most 4 agents: in the engine), says it in the start-up line and args.json, and each worker's games
    act themselves from the policy file in its own folder (their fragments' wait is logged); --no-in-engine steps
    them. Either way the run trains and records its episodes."""
    flags = ["--env-id", "ball_chase", "--num-instances", "1", "--agents-per-instance", "2", "--num-steps", "128",
             "--total-timesteps", "4096", "--eval-episodes", "0", "--ray-address", cluster.address, "--ray-workers",
             "2", *mode]
    out = train_child(tmp_path, *flags, timeout=180)
    (run_dir,) = run_dirs(tmp_path)
    in_engine = not mode
    said = ("actors: in the engine (2 agents per instance (at most 4)): on each Ray worker" if in_engine else
            "actors: the trainer steps every agent (--no-in-engine; on each Ray worker)")
    assert said in out.stdout, out.stdout[-2000:]
    assert json.loads((run_dir / "args.json").read_text())["in_engine"] is in_engine
    assert len({w["node_id"] for w in _where(run_dir)}) == 2
    for w in (0, 1):  # the policy file each worker's games loaded, on its own node
        assert (run_dir / "workers" / f"worker_{w}" / "actors_policy.json").exists() is in_engine
    assert ("perf/fragment_wait_s" in read_scalars(run_dir)) is in_engine
    assert load_checkpoint(run_dir / "model.pt")["global_step"] == 4096
    rows = np.loadtxt(run_dir / "episodes.csv", delimiter=",", skiprows=1, ndmin=2)
    assert len(rows) >= 4 and np.isfinite(rows[:, 1]).all(), rows


def test_in_engine_with_async_on_ray_is_refused_in_one_line_before_ray_starts(tmp_path, capsys, headless_export):
    """--async on Ray steps its games (its workers' fragments are asked ahead): --in-engine with it is refused."""
    argv = ["train", "--env-id", "ball_chase", "--agents-per-instance", "2", "--in-engine", "--async",
            "--ray-address", "local", "--run-dir-root", str(tmp_path)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "--in-engine: --async with Ray (--ray-address) does not run in the engine yet" in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_driver_decides_on_what_the_workers_report_by_the_local_rule():
    """ReportedGames (every worker's instances) goes through engine_actors.decide as a GodotVecEnv does: the most
    agents of any worker's instance, a stale export on one node, --async with Ray."""
    from types import SimpleNamespace

    from python_trainer.envs import fragment_wire as wire
    from python_trainer.variants.engine_actors import decide
    from python_trainer.variants.ray_rollouts import ReportedGames

    def worker(agents, actors=wire.ACTORS_VERSION):
        return {"dialect": "rl_sync", "image_layout": None, "agent_counts": [agents],
                "instance_env_infos": [{wire.ACTORS: actors}]}

    args = SimpleNamespace(in_engine=None, ray_address="local", async_rl=False)
    assert decide(args, ReportedGames.of([worker(2), worker(2)])) == (True, "2 agents per instance (at most 4)")
    assert decide(args, ReportedGames.of([worker(2), worker(5)])) == (
        False, "5 agents per instance (in-engine from 4 or fewer)")
    in_engine, why = decide(args, ReportedGames.of([worker(2), worker(2, actors=None)]))
    assert not in_engine and "re-export it with godot-ppo export" in why
    with_async = SimpleNamespace(**{**vars(args), "async_rl": True})
    assert decide(with_async, ReportedGames.of([worker(2)])) == (
        False, "--async with Ray (--ray-address) runs step by step")
