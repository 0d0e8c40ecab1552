"""train --in-engine with several policies in one game (variants/engine_actors.py's collect_routes, envs/fragment_wire.py):
each game samples every agent from its own policy, the fragment's step blocks hold each agent's values at its policy's
sizes, and each policy's learner fills its buffer from its agents' share. The layout is checked on bodies built by
hand; `tag` (a continuous chaser and a discrete runner) trains for real."""

import json
import struct
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import read_scalars, run_dirs
from python_trainer.envs import fragment_wire as wire
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer
from python_trainer.run import train
from python_trainer.run.learners import engine_rollouts
from python_trainer.variants.policies import PolicySet
from python_trainer.variants.trained_agent import make_agent
from test_fragment_mode import assert_refused_in_one_line

OBS, ACT = [3, 2, 3], [2, 1, 2]  # three agents: policies a, b, a (a: 3 obs values and 2 actions; b: 2 and 1)


def mixed_body(T=2, logprob=False):
    """Agent j's obs values at step t are 10 t + j + 0.1 k (k: its value's index), its actions -j - 0.1 k; agent 1
    truncated at step 0 (its final obs [5, 5])."""
    body = []
    for t in range(T):
        body += [10 * t + j + 0.1 * k for j, d in enumerate(OBS) for k in range(d)]
        body += [-j - 0.1 * k for j, a in enumerate(ACT) for k in range(a)]
        body += [0.5, 1.5, 2.5]
        body += [0.0, 2.0, 0.0] if t == 0 else [0.0, 0.0, 0.0]
        body += [5.0, 5.0] if t == 0 else []
        body += [-1.0, -2.0, -3.0] if logprob else []
    return body + [7.0 + j for j, d in enumerate(OBS) for _ in range(d)]


def parse(body, **kw):
    header = {"type": "fragment", "version": 1, "parts": 1, "floats": len(body),
              "episodes": [{"agent": 1, "return": 2.0, "length": 9}]}
    return wire.parse_fragment(header, [struct.pack(f"<II{len(body)}f", 22, len(body), *body)], "instance 0",
                               num_steps=2, n_agents=3, obs_size=np.array(OBS), action_size=np.array(ACT), **kw)


def test_a_fragment_of_agents_of_different_sizes_is_read_padded_and_each_policys_share_cut_to_its_own():
    f = parse(mixed_body(logprob=True), logprob=True)
    assert f.obs.shape == (2, 3, 3) and f.actions.shape == (2, 3, 2)
    np.testing.assert_allclose(f.obs[1, 1], [11.0, 11.1, 0.0], rtol=1e-6)  # b's 2 values, padded
    np.testing.assert_allclose(f.actions[0, 2], [-2.0, -2.1], rtol=1e-6)
    assert f.statuses[0].tolist() == [0, 2, 0] and f.tail_obs[:, 0].tolist() == [7.0, 8.0, 9.0]
    a = wire.select(f, np.array([0, 2]), 3, 2)
    b = wire.select(f, np.array([1]), 2, 1)
    np.testing.assert_allclose(a.obs[1], [[10.0, 10.1, 10.2], [12.0, 12.1, 12.2]], rtol=1e-6)
    assert a.final_obs == {} and a.episodes == [] and a.logprobs[:, 1].tolist() == [-3.0, -3.0]
    assert b.obs.shape == (2, 1, 2) and b.actions.shape == (2, 1, 1) and b.actions[0, 0, 0] == -1.0
    assert list(b.final_obs) == [0] and b.final_obs[0][0].tolist() == [0] and b.final_obs[0][1].tolist() == [[5, 5]]
    assert wire.episodes_by_step(b, "b") == {0: [(0, 2.0, 9, {})]}
    with pytest.raises(wire.FragmentError, match="ends inside its step blocks"):  # one value short of b's sizes
        parse(mixed_body()[:-1])


def test_several_policies_are_asked_by_name_in_order_and_their_sizes_checked_in_the_reply():
    msg = wire.actors_message({"chaser": "/c.json", "runner": "/r.json"}, 16, 3)
    assert msg["paths"] == {"chaser": "/c.json", "runner": "/r.json"} and msg["policies"] == ["chaser", "runner"]
    assert "path" not in msg and wire.actors_message("/p.json", 16, 3)["path"] == "/p.json"
    sizes = {"chaser": {"weights": 10, "obs_size": 8, "action_size": 2},
             "runner": {"weights": 5, "obs_size": 6, "action_size": 1}}
    reply = {"type": "actors", "weights": 15, "obs_size": 8, "action_size": 2, "n_agents": 4, "sizes": sizes}
    wire.check_actors_reply(reply, "i", weights=15, obs_size=8, action_size=2, n_agents=4, sizes=sizes)
    wrong = dict(reply, sizes=dict(sizes, runner=dict(sizes["runner"], obs_size=7)))
    with pytest.raises(wire.FragmentError, match="^i: its 'actors' reply says sizes="):
        wire.check_actors_reply(wrong, "i", weights=15, obs_size=8, action_size=2, n_agents=4, sizes=sizes)


# ---------------------------------------------------------------------------------------------- against the real game
def test_in_tag_each_policys_learner_recomputes_the_games_own_log_probs(tmp_path):
    """tag, 1 instance x 4 agents (2 chasers, continuous; 2 runners, discrete) in the engine with the "logprob" test
    switch: over three fragments of 64 steps (the weights changed after each, as an update would), each policy's
    buffer holds the log-probs the game computed for its agents, to 1e-5."""
    from python_trainer.envs.vec_env import make_vec_env

    envs = make_vec_env("tag", num_instances=1, agents_per_instance=4, run_dir=str(tmp_path), seed=3)
    args = SimpleNamespace(env_id="tag", num_steps=64, seed=5, step_timeout=30.0, async_rl=False)
    rollouts = engine_rollouts(envs, args, tmp_path, "test", logprob=True)
    try:
        policy_set = PolicySet(rollouts)
        assert policy_set.names == ["chaser", "runner"] and envs.mixed
        torch.manual_seed(0)
        learners = []
        for view in policy_set.views:
            d = view.single_observation_space.shape[0]
            agent = make_agent(d, view.single_action_space, {})
            if agent.n_continuous:
                agent.actor_logstd.data.fill_(-0.5)
            learners.append(SimpleNamespace(name=view.name, agent=agent, bonus=None, normalizer=Normalizer(
                d, view.num_envs, 0.99, True, True), buf=RolloutBuffer(64, view.num_envs, d, agent)))
        policy_set.bind(learners)
        policy_set.reset(seed=3)
        for _ in range(3):
            for ln in learners:
                policy_set.collect_for(ln.name)
            for ln in learners:
                assert ln.buf.logprobs.shape == (64, 2)
                np.testing.assert_allclose(ln.buf.logprobs, rollouts.game_logprobs[ln.name], atol=1e-5, rtol=0)
                with torch.no_grad():
                    for p in ln.agent.parameters():
                        p.add_(0.05 * torch.randn_like(p))
        chaser, runner = learners
        assert chaser.buf.actions.dtype == np.float32 and runner.buf.actions.dtype == np.int64
        assert set(np.unique(runner.buf.actions)) <= set(range(5)) and len(np.unique(runner.buf.actions)) > 1
    finally:
        rollouts.close()


def test_tag_trains_its_two_policies_in_the_engine_by_default(tmp_path, capsys):
    """tag at 2 instances x 4 agents: the default rule runs it in the engine (each agent sampling its own policy),
    both policies learn (their losses and episodes logged under their names), and the run saves both."""
    assert train.main(["--env-id", "tag", "--num-instances", "2", "--agents-per-instance", "4", "--num-steps", "256",
                       "--total-timesteps", "8192", "--eval-episodes", "2", "--run-dir-root", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert ("actors: in the engine (4 agents per instance (at most 4)): each instance samples each agent's own policy "
            "(chaser, runner) itself") in out
    assert "eval: policy 'chaser', deterministic" in out and "eval: policy 'runner', deterministic" in out
    (run_dir,) = run_dirs(tmp_path / "runs")
    scalars = read_scalars(run_dir)
    for name in ("chaser", "runner"):
        assert len(scalars[f"{name}/losses/policy_loss"]) == 4  # 4 updates of 2,048 steps each
        assert scalars[f"{name}/charts/episodic_length"]
        assert (run_dir / "policies" / f"{name}.json").exists()
    assert scalars["perf/fragment_wait_s"]
    assert '"in_engine": true' in (run_dir / "args.json").read_text()


@pytest.mark.parametrize("case, refusal", [
    ("runner missing", 'plays the policy "runner", but no policy file gives it'),
    ("unknown name", '"policies" names the policy "hider", which "paths" gives no file'),
])
def test_the_game_refuses_policies_that_do_not_match_its_agents_in_one_line(headless_export, tmp_path, case, refusal):
    """tag's game, sent "paths" that leave a policy out or name one no agent plays: a one-line error, exit 1."""
    from test_binary_exchange import RawGame
    from python_trainer.agent import Agent
    from python_trainer.engine.policy_file import game_policy, write_policy
    from python_trainer.envs.spaces import policy_env_info, spaces_from_env_info

    game = RawGame(headless_export, "--agents=4", env="tag")
    try:
        game.send({"type": "handshake", "major_version": "0", "minor_version": "7", "step_encoding": "binary",
                   "obs_encoding": "f32_base64"})
        game.send({"type": "env_info"})
        info = json.loads(game.recv_body())
        paths = {}
        for name in ("chaser", "runner"):
            obs_space, act_space, *_ = spaces_from_env_info(policy_env_info(info, name))
            agent = Agent(obs_space.shape[0], act_space)
            normalizer = Normalizer(obs_space.shape[0], 1, 0.99, norm_obs=True, norm_reward=False)
            paths[name] = str(write_policy(tmp_path / f"{name}.json", game_policy(
                agent, normalizer, act_space, info, env_id="tag", source={}, where="test", policy_name=name)))
        if case == "runner missing":
            message = wire.actors_message({"chaser": paths["chaser"]}, 8, 1)
        else:
            message = wire.actors_message({**paths, "hider": paths["chaser"]}, 8, 1)
            message["paths"] = paths
        game.send(message)
        reply = json.loads(game.recv_body())
        code, stderr = game.ended()
    finally:
        game.close()
    assert_refused_in_one_line(reply, code, stderr, refusal)
