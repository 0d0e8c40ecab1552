"""train --in-engine (python_trainer/variants/engine_actors.py, envs/fragment_wire.py): the games act for themselves
and send whole fragments. The logic runs against the fake game (tests/fake_game.py --fake_actors), which answers
"actors", weights and "fragment" with uniform random actions; the real game's tests are at the end."""

import json
import os
import re
import signal
import struct
import subprocess
import time
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import torch

from helpers import (
    REPO, communicate_after_signal, descendants, event_accumulator, fake_env, fake_export, read_line, read_scalars,
    run_dirs, train_argv, wait_for, wait_gone,
)
from python_trainer import cli
from python_trainer.base import contract
from python_trainer.base.errors import UserError
from python_trainer.envs import fragment_wire as wire
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer
from python_trainer.run import train
from python_trainer.run.learners import engine_rollouts
from python_trainer.variants import engine_actors
from python_trainer.variants.rnd import RND
from python_trainer.variants.trained_agent import make_agent

WIRE_GD = REPO / "godot_project" / "addons" / "rl_sync" / "fragment_wire.gd"
NAMES = ["ACTORS", "FRAGMENT", "ALIVE", "ERROR", "PATH_KEY", "NUM_STEPS_KEY", "SEED_KEY", "LOGPROB_KEY", "WEIGHTS_KEY",
         "OBS_SIZE_KEY", "ACTION_SIZE_KEY", "N_AGENTS_KEY", "VERSION_KEY", "STEP_KEY", "PARTS_KEY", "FLOATS_KEY",
         "EPISODES_KEY", "AGENT_KEY", "RETURN_KEY", "LENGTH_KEY", "INFO_KEY", "MESSAGE_KEY", "ALIVE_PERIOD_S", "PATHS_KEY", "POLICIES_KEY", "SIZES_KEY", "ACTORS_VERSION",
         "AGENT_POLICIES_KEY"]


def test_the_fragment_wire_is_declared_alike_in_python_and_in_gdscript():
    text = WIRE_GD.read_text()
    kinds = {f"Contract.MSG_{kind.upper()}": json.dumps(kind) for kind in contract.MESSAGES}  # the contract's kinds
    consts = {n: kinds.get(v, v) for n, v in re.findall(r'^const (\w+) := ("[^"]*"|-?[\d.]+|Contract\.MSG_\w+)$', text,
                                                        re.M)}
    assert {n: json.loads(consts[n]) if n in consts else None for n in NAMES} == {n: getattr(wire, n) for n in NAMES}
    # (its statuses are the packed step reply's, the contract's: tests/test_contract.py holds them)
    extras = [line for line in (REPO / "godot_project/addons/rl_sync/env_info_extras.gd").read_text().splitlines()
              if "FragmentWire.ACTORS] = FragmentWire.ACTORS_VERSION" in line]
    assert len(extras) == 1  # env_info says which version of actors the game speaks: what tells an older export


# ---------------------------------------------------------------------------------------------- the layout
def fragment_body(T=3, N=2, D=2, A=1, logprob=False):
    """A fragment's floats by the layout: agent j's obs at step t is [t, j]; agent 1 truncated at step 1, agent 0
    terminated at step 2."""
    body, statuses = [], {1: {1: 2}, 2: {0: 1}}
    for t in range(T):
        body += [float(v) for j in range(N) for v in (t, j)][:N * D]
        body += [0.5 + t + j for j in range(N) for _ in range(A)]
        body += [0.1 * (j + 1) for j in range(N)]
        body += [float(statuses.get(t, {}).get(j, 0)) for j in range(N)]
        body += [9.0, 9.0] if t == 1 else [8.0, 8.0] if t == 2 else []  # the ended agents' final observations
        body += [-1.0 - j for j in range(N)] if logprob else []
    return body + [7.0] * (N * D)


def parts_of(values, size):
    return [struct.pack(f"<II{len(c)}f", 22, len(c), *c) for c in (values[i:i + size] for i in range(0, len(values), size))]


EPISODES = [{"agent": 1, "return": 0.5, "length": 20, "info": {"x": 1}}, {"agent": 0, "return": 1.5, "length": 3}]


def test_a_fragment_in_parts_is_read_as_arrays_of_steps_agents_and_the_ended_episodes_final_observations():
    body = fragment_body(logprob=True)
    header = {"type": "fragment", "version": 4, "parts": 3, "floats": len(body), "episodes": EPISODES}
    f = wire.parse_fragment(header, parts_of(body, 11), "instance 0", num_steps=3, n_agents=2, obs_size=2,
                            action_size=1, logprob=True)
    assert f.obs.shape == (3, 2, 2) and f.obs[2, 1].tolist() == [2.0, 1.0]
    assert f.actions[:, :, 0].tolist() == [[0.5, 1.5], [1.5, 2.5], [2.5, 3.5]]
    assert f.statuses.tolist() == [[0, 0], [0, 2], [1, 0]] and f.tail_obs.tolist() == [[7.0, 7.0]] * 2
    assert list(f.final_obs) == [1, 2] and f.final_obs[1][0].tolist() == [1] and f.final_obs[1][1].tolist() == [[9, 9]]
    assert f.final_obs[2][0].tolist() == [0] and f.final_obs[2][1].tolist() == [[8, 8]]  # terminated: rated by --rnd
    assert f.logprobs[0].tolist() == [-1.0, -2.0]
    assert wire.episodes_by_step(f, "i") == {1: [(1, 0.5, 20, {"x": 1})], 2: [(0, 1.5, 3, {})]}


@pytest.mark.parametrize("bad, said", [
    (lambda b, h: (b[:-1], dict(h, floats=len(b) - 1)), "ends inside"),
    (lambda b, h: (b, dict(h, floats=len(b) + 1)), "its header says"),
    (lambda b, h: (b[:8] + [3.0] + b[9:], h), "statuses must be 0, 1 or 2"),
    (lambda b, h: (b, dict(h, episodes=EPISODES[:1])), "its header lists 1"),
    (lambda b, h: (b + [0.0], dict(h, floats=len(b) + 1)), "after its tail"),
])
def test_a_malformed_fragment_is_the_games_bug_said_in_one_line(bad, said):
    body = fragment_body()
    body, header = bad(body, {"type": "fragment", "version": 1, "parts": 1, "floats": len(body), "episodes": EPISODES})
    with pytest.raises(wire.FragmentError, match=said) as e:
        f = wire.parse_fragment(header, parts_of(body, 10 ** 6), "instance 3", num_steps=3, n_agents=2, obs_size=2,
                                action_size=1)
        wire.episodes_by_step(f, "instance 3")
    assert "\n" not in str(e.value) and str(e.value).startswith("instance 3")


def test_the_weights_message_is_one_framed_pool_real_array():
    msg = wire.weights_message(np.array([1.5, -2.0, 3.0]))
    assert msg[:4] == struct.pack("<I", 8 + 12) and msg[4:12] == struct.pack("<II", 22, 3)
    assert np.frombuffer(msg[12:], "<f4").tolist() == [1.5, -2.0, 3.0]
    assert wire.actors_message("/p.json", 16, 3) == {"type": "actors", "path": "/p.json", "num_steps": 16, "seed": 3,
                                                     "logprob": False}


# ---------------------------------------------------------------------------------------------- the default rule
def flags(**kw):
    base = dict(in_engine=None, lstm=False, self_play=False, ray_address=None, async_rl=False, rnd=False, editor=False,
                frame_stack=1)
    return SimpleNamespace(**{**base, **kw})


def game(agents=1, actors=wire.ACTORS_VERSION, dialect="rl_sync", image=None, policies=("one",)):
    inst = SimpleNamespace(env_info={"actors": actors} if actors is not None else {})
    return SimpleNamespace(agent_counts=[agents, agents], dialect=dialect, image_layout=image, mixed=False,
                           policies=list(policies), launcher=SimpleNamespace(instances=[inst, inst]))


def test_the_default_runs_in_the_engine_up_to_k_agents_per_instance_and_never_picks_what_is_refused():
    k = engine_actors.MAX_AGENTS_IN_ENGINE
    assert engine_actors.decide(flags(), game(k)) == (True, f"{k} agents per instance (at most {k})")
    assert engine_actors.decide(flags(), game(k + 1))[0] is False
    assert engine_actors.decide(flags(in_engine=True), game(16)) == (True, "--in-engine")
    assert engine_actors.decide(flags(in_engine=False), game(1)) == (False, "--no-in-engine")
    assert engine_actors.decide(flags(), game(2, policies=("red", "blue")))[0] is True  # each agent its own policy
    assert engine_actors.decide(flags(self_play=True), game(2))[0] is True  # each team samples its route's policy
    for kw, g in [({"lstm": True}, game()), ({}, game(actors=None)),
                  ({}, game(actors=True)), ({}, game(actors=wire.ACTORS_VERSION - 1)),
                  ({}, game(dialect="godot_rl")), ({}, game(image=object()))]:
        assert engine_actors.decide(flags(**kw), g)[0] is False
        with pytest.raises(engine_actors.InEngineRefused, match="^--in-engine: .* does not run in the engine"):
            engine_actors.decide(flags(in_engine=True, **kw), g)


# ---------------------------------------------------------------------------------------------- against the fake game
def test_the_buffer_holds_the_games_fragment_as_the_step_by_step_rollout_would(tmp_path):
    """Raw obs [t in episode, agent, seed, last action sum]: a new episode's first obs has t = 0 where dones = 1;
    the behaviour log-probs are the agent's own of the recorded actions."""
    envs = fake_env(tmp_path, "--fake_actors", "--fake_part_floats=50", instances=2, agents=2)
    args = SimpleNamespace(env_id="ball_chase", num_steps=24, seed=1, step_timeout=10.0)
    rollouts = engine_rollouts(envs, args, tmp_path, "test")
    try:
        agent = make_agent(4, envs.single_action_space, {})
        normalizer = Normalizer(4, 4, 0.99, False, False)
        buf = RolloutBuffer(24, 4, 4, agent)
        rollouts.reset(normalizer, buf, seed=1)
        for _ in range(2):
            rollouts.collect(agent, normalizer, buf)
            starts = buf.obs[..., 0] == 0
            assert (starts[1:] == (buf.dones[1:] == 1)).all() and starts.sum() > 4
            assert buf.obs[..., 1].tolist() == [[0, 1, 0, 1]] * 24 and buf.obs[0, :, 2].tolist() == [0, 0, 1, 1]
            np.testing.assert_allclose(buf.obs[1:, :, 3], buf.actions[:-1].sum(-1) * (buf.dones[1:] == 0), atol=1e-5)
            with torch.no_grad():
                _, logprob, _, _, _ = agent.get_action_and_value(torch.from_numpy(buf.obs.reshape(-1, 4)),
                                                                 torch.from_numpy(buf.actions.reshape(-1, 2)))
            np.testing.assert_allclose(buf.logprobs.reshape(-1), logprob.numpy(), atol=1e-6)
            ended = (buf.terminated | buf.truncated)
            assert sum(int(i["_episode"].sum()) for _, i in buf.episodes) == ended.sum() > 0
            assert (buf.final_values[buf.truncated] != 0).all() and (buf.final_values[~buf.truncated] == 0).all()
            assert np.allclose(buf.rewards, [0.1, 0.11, 0.1, 0.11])
        assert rollouts.scalars()["perf/fragment_wait_s"] > 0 and rollouts.scalars()["perf/weights_s"] > 0
        assert (tmp_path / engine_actors.POLICY_FILE).exists()
    finally:
        rollouts.close()


def test_rnd_rates_the_observation_each_agent_reached_in_the_engine_the_final_one_where_its_episode_ended(tmp_path):
    """The fake game's raw obs: [t in episode, agent, seed, last action sum]; an ended episode's final observation
    has t = its length, the next one t = 0."""
    envs = fake_env(tmp_path, "--fake_actors", instances=2, agents=2)
    args = SimpleNamespace(env_id="ball_chase", num_steps=24, seed=1, step_timeout=10.0)
    rollouts = engine_rollouts(envs, args, tmp_path, "test")
    try:
        agent, bonus = make_agent(4, envs.single_action_space, {}), RND(obs_dim=4)
        normalizer = Normalizer(4, 4, 0.99, False, False)
        buf = RolloutBuffer(24, 4, 4, agent, bonus=bonus)
        rollouts.warm_up(bonus, 8, seed=1)
        rollouts.reset(normalizer, buf, seed=1)
        rollouts.collect(agent, normalizer, buf, bonus=bonus)
        ended = buf.terminated | buf.truncated
        assert buf.terminated.any() and buf.truncated[:-1].any()
        np.testing.assert_array_equal(buf.rnd_next_obs[:-1][~ended[:-1]], buf.obs[1:][~ended[:-1]])
        np.testing.assert_array_equal(buf.rnd_next_obs[-1][~ended[-1]], buf.next_obs[~ended[-1]])
        # the final obs (t = the episode's length, the agent's index in its instance), not the next episode's first
        assert (buf.rnd_next_obs[ended][:, 0] > 0).all()
        assert buf.rnd_next_obs[ended][:, 1].tolist() == (np.nonzero(ended)[1] % 2).tolist()
        np.testing.assert_allclose(buf.int_rewards, bonus.intrinsic_reward(buf.rnd_next_obs.reshape(-1, 4)).reshape(
            24, 4), rtol=1e-6)
    finally:
        rollouts.close()


def test_a_short_rnd_training_runs_in_the_engine_and_logs_its_bonus(tmp_path, capsys):
    assert train.main(fake_train(tmp_path, "--in-engine", "--rnd", "--total-timesteps", "128")) == 0
    assert "actors: in the engine (--in-engine)" in capsys.readouterr().out
    scalars = read_scalars(run_dirs(tmp_path / "runs")[0])
    assert len(scalars["charts/intrinsic_reward"]) == 2 and all(v > 0 for _, v in scalars["charts/intrinsic_reward"])


def fake_train(tmp_path, *flags, fake=(), name="actors"):
    export = fake_export(tmp_path / f"{name}.x86_64", "--fake_actors", *fake)
    return ["--env-path", str(export), "--num-instances", "2", "--agents-per-instance", "2", "--num-steps", "16",
            "--eval-episodes", "0", "--run-dir-root", str(tmp_path / "runs"), *flags]


def test_a_short_training_runs_in_the_engine_by_default_on_few_agents_and_records_the_path(tmp_path, capsys):
    assert train.main(fake_train(tmp_path, "--total-timesteps", "192", "--checkpoint-every", "1",
                                 fake=("--fake_action=continuous:2,discrete:3",))) == 0
    out = capsys.readouterr().out
    assert "actors: in the engine (2 agents per instance (at most 4))" in out and "fragments of 16 steps" in out
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert json.loads((run_dir / "args.json").read_text())["in_engine"] is True
    rows = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    assert len(rows) > 5 and all(0 < int(r.split(",")[2]) <= 20 for r in rows)
    scalars = read_scalars(run_dir)
    assert len(scalars["perf/fragment_wait_s"]) == 3 and len(scalars["perf/weights_s"]) == 3
    assert sorted(event_accumulator(run_dir).Tags()["histograms"])[:2] == ["actions/a0", "actions/a0/0"]
    # --resume keeps the path; --no-in-engine switches it
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "256"]) == 0
    assert "actors: in the engine" in capsys.readouterr().out
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "320", "--no-in-engine"]) == 0
    assert "actors: the trainer steps every agent (--no-in-engine)" in capsys.readouterr().out
    assert json.loads((run_dir / "args.json").read_text())["in_engine"] is False


def test_more_agents_than_k_or_an_older_export_train_step_by_step_and_in_engine_is_refused_there(tmp_path, capsys):
    assert train.main(fake_train(tmp_path, "--total-timesteps", "160", "--agents-per-instance", "5")) == 0
    assert "actors: the trainer steps every agent (5 agents per instance" in capsys.readouterr().out
    old = fake_export(tmp_path / "old.x86_64")
    with pytest.raises(UserError, match="an export without in-engine actors .*re-export") as e:
        train.main(["--env-path", str(old), "--num-instances", "1", "--agents-per-instance", "1", "--in-engine",
                    "--run-dir-root", str(tmp_path / "old_runs")])
    assert "\n" not in str(e.value) and run_dirs(tmp_path / "old_runs") == []


@pytest.mark.parametrize("flag", [["--lstm"], ["--async", "--max-policy-lag", "2"],
                                  ["--env-id", "CartPole-v1"]])
def test_in_engine_with_what_does_not_run_there_is_refused_in_one_line_before_any_game_starts(tmp_path, flag):
    argv = ["--in-engine", *flag, "--run-dir-root", str(tmp_path)]
    if flag[0] != "--env-id":
        argv = fake_train(tmp_path, "--in-engine", *flag)
    started = time.monotonic()
    with pytest.raises(UserError, match="^--in-engine: ") as e:
        train.main(argv)
    assert "\n" not in str(e.value) and time.monotonic() - started < 10
    assert run_dirs(tmp_path / "runs") == [] and run_dirs(tmp_path) in ([], [tmp_path / "runs"])


def test_async_collects_the_next_fragment_during_the_update_with_a_lag_of_one_and_a_seed_repeats(tmp_path, capsys):
    models = []
    for k in range(2):
        (tmp_path / str(k)).mkdir()
        assert train.main(fake_train(tmp_path / str(k), "--total-timesteps", "256", "--async", "--norm-obs",
                                     fake=("--fake_action=continuous:2,discrete:3",))) == 0
        assert "policy lag 1" in capsys.readouterr().out
        (run_dir,) = run_dirs(tmp_path / str(k) / "runs")
        assert [v for _, v in read_scalars(run_dir)["charts/policy_lag"]] == [0, 1, 1, 1]
        models.append((torch.load(run_dir / "model.pt", weights_only=False), (run_dir / "episodes.csv").read_text()))
    assert models[0][1] == models[1][1] and len(models[0][1].splitlines()) > 5
    for key, value in models[0][0]["model"].items():
        assert torch.equal(value, models[1][0]["model"][key]), key


def test_a_game_killed_mid_fragment_is_restarted_its_fragment_dropped_and_training_goes_on(tmp_path, capsys):
    assert train.main(fake_train(tmp_path, "--total-timesteps", "192", fake=("--fake_mode=crash_after=20",))) == 0
    captured = capsys.readouterr()
    assert captured.err.count("crashing on purpose") >= 1 and "restarting it (1/3)" in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_the_wait_for_a_fragment_times_out_on_silence_not_on_the_fragments_length(tmp_path, capsys):
    """A fragment of 16 steps at 0.1 s each (1.6 s) with a heartbeat every 0.2 s never times out at --step-timeout
    0.8; a game that hangs mid-fragment is restarted 0.8 s after its last heartbeat."""
    slow = fake_train(tmp_path, "--total-timesteps", "128", "--step-timeout", "0.8", "--num-instances", "1",
                      fake=("--fake_step_delay=0.1", "--fake_alive_s=0.2"))
    assert train.main(slow) == 0
    assert "restarting" not in capsys.readouterr().err
    hung = fake_train(tmp_path, "--total-timesteps", "128", "--step-timeout", "0.8", "--num-instances", "1",
                      "--max-restarts", "1", fake=("--fake_mode=hang_after=10",), name="hung")
    started = time.monotonic()
    with pytest.raises(UserError) as e:  # each new game hangs too: out of restarts, with a checkpoint
        train.main(hung)
    assert "timed out waiting for fragment" in capsys.readouterr().err + str(e.value)
    assert time.monotonic() - started < 30


def test_sigterm_mid_fragment_stops_with_the_last_completed_updates_checkpoint_and_no_process_left(tmp_path):
    argv = train_argv(tmp_path / "runs", *fake_train(tmp_path, "--total-timesteps", "100000", "--checkpoint-every",
                                                     "1000", fake=("--fake_step_delay=0.05",))[:-2])
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        wait_for(lambda: list((tmp_path / "runs").glob("*/episodes.csv")) and
                 (next((tmp_path / "runs").glob("*/episodes.csv")).stat().st_size > 40), 60, "a first update", proc)
        time.sleep(0.3)  # inside the next fragment (0.8 s long)
        proc.send_signal(signal.SIGTERM)
        out, err = communicate_after_signal(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err.decode()
    err = err.decode()
    assert "interrupted by SIGTERM" in err and "--resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path / "runs")
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    assert ckpt["global_step"] > 0 and ckpt["global_step"] % 64 == 0
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "actors.x86_64")], capture_output=True).stdout == b""


# ---------------------------------------------------------------------------------------------- against the real game
@pytest.mark.parametrize("env_id, asynchronous", [("ball_chase", False), ("jumper", False), ("cart_pole", False),
                                                  ("jumper", True)])  # continuous, hybrid, discrete; --async
def test_the_learners_log_probs_of_the_games_actions_equal_the_games_own(tmp_path, env_id, asynchronous):
    """The game's log-prob of each sampled action (the "logprob" test switch) against the learner's recomputed one,
    over three fragments (the later ones with the normaliser's statistics moved, and the weights changed after each
    as an update would: with --async the fragment was sampled with the weights before the change)."""
    from python_trainer.envs.vec_env import make_vec_env

    envs = make_vec_env(env_id, num_instances=1, agents_per_instance=2, run_dir=str(tmp_path), seed=3)
    args = SimpleNamespace(env_id=env_id, num_steps=32, seed=5, step_timeout=30.0, async_rl=asynchronous)
    rollouts = engine_rollouts(envs, args, tmp_path, "test", logprob=True)
    try:
        assert engine_actors.decide(flags(), envs)[0] is True
        obs_dim, n = envs.single_observation_space.shape[0], envs.num_envs
        torch.manual_seed(0)
        agent = make_agent(obs_dim, envs.single_action_space, {})
        if agent.n_continuous:
            agent.actor_logstd.data.fill_(-0.5)
        normalizer = Normalizer(obs_dim, n, 0.99, True, True)
        buf = RolloutBuffer(32, n, obs_dim, agent)
        rollouts.reset(normalizer, buf, seed=3)
        for _ in range(3):
            rollouts.collect(agent, normalizer, buf)
            np.testing.assert_allclose(buf.logprobs, rollouts.game_logprobs, atol=1e-5, rtol=0)
            with torch.no_grad():  # as an update would
                for p in agent.parameters():
                    p.add_(0.05 * torch.randn_like(p))
        assert buf.truncated.any() or buf.terminated.any() or env_id != "cart_pole"
    finally:
        rollouts.close()


def test_a_curriculum_moves_on_in_the_engine_and_the_games_take_its_next_lesson(tmp_path, capsys):
    """jumper, 2 instances x 2 agents in the engine: the lesson changes at 40% of the steps (the games leave actor
    mode for the env_params message and are sent "actors" again), and training goes on to its end."""
    lessons = tmp_path / "lessons.toml"
    lessons.write_text('[[environment_parameters.gap_max.curriculum]]\nvalue = 2.2\n'
                       'completion_criteria = { measure = "progress", threshold = 0.4, min_lesson_length = 1 }\n'
                       '[[environment_parameters.gap_max.curriculum]]\nvalue = 3.0\n')
    assert train.main(["--env-id", "jumper", "--num-instances", "2", "--agents-per-instance", "2", "--num-steps", "64",
                       "--total-timesteps", "2560", "--eval-episodes", "2", "--curriculum", str(lessons),
                       "--run-dir-root", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "actors: in the engine (2 agents per instance" in out and "gap_max 2.2 -> 3" in out
    assert "eval: deterministic policy, 2 episodes" in out  # the final evaluation steps the games again
    (run_dir,) = run_dirs(tmp_path / "runs")
    rows = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    assert any(row.endswith(",1,3") for row in rows) and any(row.endswith(",0,2.2") for row in rows)


def test_a_real_game_killed_while_it_collects_is_restarted_and_sigterm_then_keeps_the_checkpoint(tmp_path):
    """ball_chase, 2 instances x 1 agent in the engine, fragments of 2,048 steps (the games collect nearly all the
    time): one game is killed after the first update; training goes on past it; SIGTERM ends it with exit 143 and the
    last update's checkpoint, and no game is left."""
    argv = train_argv(tmp_path / "runs", "--env-id", "ball_chase", "--num-instances", "2", "--agents-per-instance", "1",
                      "--num-steps", "2048", "--num-minibatches", "1", "--update-epochs", "1", "--total-timesteps",
                      "81920", "--checkpoint-every", "1000", "--eval-episodes", "0")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        read_line(proc, b"global_step=4096", timeout=120)
        games = [pid for pid in descendants(proc.pid) if "rl_games" in " ".join(psutil.Process(pid).cmdline())]
        assert len(games) == 2
        os.kill(games[0], signal.SIGKILL)
        read_line(proc, b"global_step=12288", timeout=120)  # two updates after the kill
        everyone = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = communicate_after_signal(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = err.decode()
    assert proc.returncode == 143, err[-3000:]
    assert "instance 0 failed" in err and "restarting it (1/3)" in err and "Traceback" not in err
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert torch.load(run_dir / "checkpoint.pt", weights_only=False)["global_step"] >= 12288
    assert wait_gone(everyone) == []


def test_a_games_bug_in_the_engine_is_one_line_never_restarted_and_script_errors_stop_the_run(tmp_path, capsys):
    """The broken games of tests/test_reliability_games.py, in the engine: an observation that grows mid-run is the
    game's own one-line error (no restart); a reward assigned a dictionary keeps raising script errors, which stop
    the run as they do step by step."""
    from test_reliability_games import godot_game_with

    for case, said in [("obs_grows", "get_obs() gave 6 values, but the policy takes 4"),
                       ("reward_dict", "keeps raising script errors")]:
        (tmp_path / case).mkdir()
        code = cli.main(["train", "--env-path", str(godot_game_with(tmp_path / case, case)), "--num-steps", "16",
                         "--total-timesteps", "2048", "--eval-episodes", "0", "--in-engine",
                         "--run-dir-root", str(tmp_path / case / "runs")])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("godot-ppo train: error:")]
        assert code == 1 and len(errors) == 1 and said in errors[0], err[-3000:]
        assert "Traceback" not in err and "restart" not in err
