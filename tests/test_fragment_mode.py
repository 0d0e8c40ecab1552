"""In-engine actors (issue 58), the game's side: a test peer speaks godot_project/addons/rl_sync/fragment_mode.gd's
exchange (fragment_wire.gd: "actors", the binary weights, "fragment", "alive", the header and its parts) with the real
headless export. A fragment holds the steps a trainer would have seen had it sent the same actions; a seed repeats
its fragment; the sampler draws what torch's distributions draw (chi-square on >= 20,000 draws, mean and standard
deviation, the log-probs to 1e-5); refusals are one line. Every game is ended by the test."""

import json
import struct
import time

import numpy as np
import pytest
import torch

from test_binary_exchange import RawGame
from python_trainer.agent import Agent
from python_trainer.engine.policy_file import game_policy, write_policy
from python_trainer.envs.protocol import pack_actions, unpack_step
from python_trainer.envs.spaces import spaces_from_env_info
from python_trainer.normalization import Normalizer

BINARY = {"step_encoding": "binary", "obs_encoding": "f32_base64"}
TWIN = "the game's sampler, the third twin of agent.py's Agent.pi, godot_project/addons/rl_sync/policy_sampling.gd: "


@pytest.fixture
def games(headless_export):
    made = []

    def make(*args, env="ball_chase"):
        made.append(RawGame(headless_export, *args, env=env))
        game = made[-1]
        game.info = game.start(**BINARY)
        return game

    yield make
    for game in made:
        game.close()


def policy_file(path, info, env, seed=0, change=None):
    """(the file, the agent, its normaliser): a policy file of a small random MLP agent for the game's spaces, as the
    trainer's export path writes it (its log-std and observation statistics set to values other than the defaults);
    ``change(agent)`` edits the agent first."""
    obs_space, act_space, *_ = spaces_from_env_info(info)
    torch.manual_seed(seed)
    agent = Agent(obs_space.shape[0], act_space)
    normalizer = Normalizer(obs_space.shape[0], 1, 0.99, norm_obs=True, norm_reward=False)
    normalizer.obs_rms.update(np.random.default_rng(seed).normal(0.5, 2.0, size=(64, obs_space.shape[0])))
    with torch.no_grad():
        if agent.n_continuous:
            agent.actor_logstd.copy_(torch.linspace(-1.0, 0.3, agent.n_continuous))
        if change is not None:
            change(agent)
    policy = game_policy(agent, normalizer, act_space, info, env_id=env, source={}, where="test")
    return write_policy(path, policy), agent, normalizer


def learner_logprobs(agent, normalizer, obs, actions) -> np.ndarray:
    """log pi(a|s) as the learner computes it (agent.py's distributions), for raw observations."""
    with torch.no_grad():
        x = torch.as_tensor(normalizer.normalize_obs(obs, update=False))
        return agent.get_action_and_value(x, torch.as_tensor(actions))[1].numpy()


def enter(game, path, num_steps, seed=1, logprob=False) -> dict:
    game.send({"type": "actors", "path": str(path), "num_steps": num_steps, "seed": seed, "logprob": logprob})
    return json.loads(game.recv_body())


def collect(game, version=0):
    """(header, body as float32, the alive messages before the header) of fragment ``version`` (None: it was asked
    for already)."""
    if version is not None:
        game.send({"type": "fragment", "version": version})
    alive = []
    while (header := json.loads(game.recv_body()))["type"] == "alive":
        alive.append(header)
    assert header["type"] == "fragment", header
    parts = []
    for _ in range(header["parts"]):
        part = game.recv_body()
        kind, count = struct.unpack("<II", part[:8])
        assert kind == 22 and len(part) == 8 + 4 * count  # var2bytes of a PoolRealArray
        parts.append(np.frombuffer(part[8:], dtype="<f4"))
    body = np.concatenate(parts)
    assert body.size == header["floats"]
    return header, body, alive


def blocks(body, n, d, a, num_steps, logprob=False):
    """The fragment's step blocks (dicts of arrays) and its tail, read as fragment_wire.gd lays them out; the body
    must end exactly with the tail."""
    out, at = [], 0

    def take(count):
        nonlocal at
        values = body[at:at + count]
        assert values.size == count, "the body ends early"
        at += count
        return values

    for _ in range(num_steps):
        block = {"obs": take(n * d).reshape(n, d), "actions": take(n * a).reshape(n, a), "rewards": take(n),
                 "statuses": take(n).astype(int)}
        block["finals"] = take(d * int((block["statuses"] > 0).sum())).reshape(-1, d)  # every ended agent's
        if logprob:
            block["logprobs"] = take(n)
        out.append(block)
    tail = take(n * d).reshape(n, d)
    assert at == body.size, f"{body.size - at} values after the tail"
    return out, tail


# ---------------------------------------------------------------------------------------------- the fragment
def test_a_fragment_is_the_steps_a_trainer_would_have_seen_with_the_same_actions(games, tmp_path):
    n, steps = 3, 40
    args = (f"--agents={n}", "--max_episode_steps=15", "--env_seed=4")
    actor = games(*args)
    path, agent, normalizer = policy_file(tmp_path / "p.json", actor.info, "ball_chase")
    reply = enter(actor, path, steps, logprob=True)
    assert {k: reply[k] for k in ("type", "obs_size", "action_size", "n_agents")} == {
        "type": "actors", "obs_size": 12, "action_size": 2, "n_agents": n}
    header, body, _ = collect(actor, version=7)
    assert (header["version"], header["parts"]) == (7, 1)
    got, tail = blocks(body, n, 12, 2, steps, logprob=True)
    # the same game driven step by step by a trainer sending the clipped actions sees the same steps
    trainer = games(*args)
    ended, trainer_obs = [], None
    for t, block in enumerate(got):
        if t:
            np.testing.assert_array_equal(block["obs"], trainer_obs, err_msg=f"step {t}")
        trainer.send_bytes(pack_actions(floats=np.clip(block["actions"], -1, 1))[4:])
        trainer_obs, rewards, statuses, finals, _ = unpack_step(trainer.recv_body(), n, 12)
        np.testing.assert_array_equal(rewards, block["rewards"], err_msg=f"step {t}")
        np.testing.assert_array_equal(statuses, block["statuses"], err_msg=f"step {t}")
        np.testing.assert_array_equal(finals, block["finals"], err_msg=f"step {t}")
        ended += [(t, i) for i in np.flatnonzero(statuses)]
    np.testing.assert_array_equal(tail, trainer_obs)
    # the time limit of 15 ends every episode at steps 15 and 30: truncated (2), with the final observations
    assert ended == [(t, i) for t in (14, 29) for i in range(n)]
    assert (got[14]["statuses"] == 2).all() and got[14]["finals"].shape == (n, 12)
    assert [(e["agent"], e["length"]) for e in header["episodes"]] == [(i, 15) for _ in (14, 29) for i in range(n)]
    np.testing.assert_allclose([e["return"] for e in header["episodes"][:n]],
                               [sum(b["rewards"][i] for b in got[:15]) for i in range(n)], rtol=1e-4, atol=1e-5)
    # the actions as sampled, before clipping (the trainer was sent them clipped), and their log-probs as the learner
    # computes them
    assert (np.abs(np.concatenate([b["actions"] for b in got])) > 1).any()
    for block in got:
        np.testing.assert_allclose(block["logprobs"], learner_logprobs(agent, normalizer, block["obs"], block["actions"]),
                                   rtol=0, atol=1e-5)


def test_a_seed_repeats_its_fragments_and_another_seed_differs(games, tmp_path):
    n, steps = 4, 60
    made = [games(f"--agents={n}") for _ in range(3)]
    path = policy_file(tmp_path / "p.json", made[0].info, "ball_chase")[0]
    for game, seed in zip(made, (5, 5, 6)):
        assert enter(game, path, steps, seed=seed)["type"] == "actors"
        game.send({"type": "fragment", "version": 0})  # all three collect at once
    (_, a, _), (_, b, _), (_, c, _) = [collect(game, None) for game in made]
    np.testing.assert_array_equal(a, b)
    first, other = blocks(a, n, 12, 2, steps), blocks(c, n, 12, 2, steps)
    np.testing.assert_array_equal(first[0][0]["obs"], other[0][0]["obs"])  # the same game, other draws
    assert not np.array_equal(first[0][0]["actions"], other[0][0]["actions"])
    # the next fragment begins where the last one's tail left the game
    header, body, _ = collect(made[0], 1)
    assert header["version"] == 1
    np.testing.assert_array_equal(blocks(body, n, 12, 2, steps)[0][0]["obs"], first[1])


def test_another_message_leaves_actor_mode_and_the_steps_work_as_before(games, tmp_path):
    game = games("--agents=2")
    enter(game, policy_file(tmp_path / "p.json", game.info, "ball_chase")[0], 5)
    collect(game)
    game.send({"type": "reset"})
    assert json.loads(game.recv_body())["type"] == "reset"
    game.send_bytes(pack_actions(floats=np.zeros((2, 2)))[4:])  # an action again, not weights
    assert unpack_step(game.recv_body(), 2, 12)[0].shape == (2, 12)
    game.send({"type": "fragment", "version": 1})
    error = json.loads(game.recv_body())
    assert error == {"type": "error", "message": 'a "fragment" message before "actors": the trainer asks for '
                                                 "in-engine actors first"}
    assert game.ended()[0] == 1


def test_a_long_fragment_says_alive_about_once_a_second(games, tmp_path):
    n, steps = 16, 800
    while True:
        game = games(f"--agents={n}")
        enter(game, policy_file(tmp_path / "p.json", game.info, "ball_chase")[0], steps)
        started = time.monotonic()
        header, body, alive = collect(game)
        seconds = time.monotonic() - started
        if seconds > 1.5 or steps >= 800 * 4**2:
            break
        steps *= 4  # a quiet machine collects 800 steps in under a second: a longer fragment, in a new game
    assert seconds > 1.5, f"the fragment took {seconds:.2f} s: make it longer to see the heartbeat"
    assert seconds - 2 <= len(alive) <= seconds + 1, (alive, seconds)
    counts = [m["step"] for m in alive]
    assert counts == sorted(counts) and 0 < counts[0] and counts[-1] < steps
    assert len(blocks(body, n, 12, 2, steps)[0]) == steps


def test_a_fragment_over_the_part_size_comes_in_parts(games, tmp_path):
    n, steps = 2, 30
    game = games(f"--agents={n}", "--fragment_part_floats=100")  # the message limit, made small for the test
    enter(game, policy_file(tmp_path / "p.json", game.info, "ball_chase")[0], steps)
    header, body, _ = collect(game)
    floats = steps * n * (12 + 2 + 1 + 1) + n * 12
    assert (header["floats"], header["parts"]) == (floats, -(-floats // 100))
    assert len(blocks(body, n, 12, 2, steps)[0]) == steps


# ---------------------------------------------------------------------------------------------- the sampler
def test_the_sampler_draws_what_torchs_distributions_draw(games, tmp_path):
    n, steps = 16, 1250  # 20,000 draws of jumper's hybrid action: "move" (continuous, 2), "jump" (discrete, 2)
    game = games(f"--agents={n}", env="jumper")

    def fixed(agent):  # the actor's outputs no longer depend on the observation
        agent.actor[0].weight.zero_()
        agent.actor[-1].bias.copy_(torch.tensor([0.4, -0.3, 0.9, -0.2]))

    path, agent, normalizer = policy_file(tmp_path / "p.json", game.info, "jumper", change=fixed)
    reply = enter(game, path, steps, logprob=True)
    d = reply["obs_size"]
    assert reply["action_size"] == 3
    got, _ = blocks(collect(game)[1], n, d, 3, steps, logprob=True)
    obs = np.concatenate([b["obs"] for b in got])
    actions = np.concatenate([b["actions"] for b in got])
    with torch.no_grad():
        move, jump = agent.distributions(agent.actor(torch.zeros(1, d)))
    # the discrete key: frequencies against the softmax, chi-square
    counts = np.bincount(actions[:, 2].astype(int), minlength=2)
    expected = jump.probs[0].numpy() * len(actions)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    p_value = float(torch.special.gammaincc(torch.tensor(0.5), torch.tensor(chi2 / 2)))  # 1 degree of freedom
    assert p_value > 1e-3, f"{TWIN}_categorical draws otherwise than Agent.distributions: {counts} for {expected}"
    # the continuous key: the mean and standard deviation of Normal(mean, exp(log_std)), before clipping
    mean, std = move.base_dist.loc[0].numpy(), move.base_dist.scale[0].numpy()
    np.testing.assert_array_less(np.abs(actions[:, :2].mean(axis=0) - mean), 5 * std / np.sqrt(len(actions)),
                                 err_msg=f"{TWIN}sample's Gaussian mean")
    np.testing.assert_allclose(actions[:, :2].std(axis=0), std, rtol=5 / np.sqrt(2 * len(actions)),
                               err_msg=f"{TWIN}sample's Gaussian spread")
    # the game's log-probs are the learner's
    np.testing.assert_allclose(np.concatenate([b["logprobs"] for b in got]),
                               learner_logprobs(agent, normalizer, obs, actions), rtol=0, atol=1e-5,
                               err_msg=f"{TWIN}log_prob")


def test_a_discrete_key_of_three_choices_draws_its_softmax(games, tmp_path):
    n, steps = 16, 1250  # 20,000 draws of memory's "move" (discrete, 3)
    game = games(f"--agents={n}", env="memory")

    def fixed(agent):
        agent.actor[0].weight.zero_()
        agent.actor[-1].bias.copy_(torch.tensor([0.8, -0.6, 0.1]))

    path, agent, _ = policy_file(tmp_path / "p.json", game.info, "memory", change=fixed)
    d = enter(game, path, steps)["obs_size"]
    got, _ = blocks(collect(game)[1], n, d, 1, steps)
    counts = np.bincount(np.concatenate([b["actions"][:, 0] for b in got]).astype(int), minlength=3)
    with torch.no_grad():
        expected = agent.distributions(agent.actor(torch.zeros(1, d)))[0].probs[0].numpy() * counts.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    p_value = float(torch.special.gammaincc(torch.tensor(1.0), torch.tensor(chi2 / 2)))  # 2 degrees of freedom
    assert p_value > 1e-3, f"{TWIN}_categorical draws otherwise than Agent.distributions: {counts} for {expected}"


# ---------------------------------------------------------------------------------------------- refusals
def assert_refused_in_one_line(reply: dict, code: int, stderr: str, refusal: str) -> None:
    """The game answered "actors" with an error naming ``refusal``, said it as its one error line and exited 1."""
    assert reply["type"] == "error" and refusal in reply["message"], reply
    said = [line for line in stderr.splitlines() if "error" in line]
    assert (code, said) == (1, ["rl_sync: error: " + reply["message"]])


def without_log_std(path):
    policy = json.loads(path.read_text())
    for key in policy["action_keys"]:
        key.pop("log_std", None)
    policy["version"] = 4
    path.write_text(json.dumps(policy))


def one_more_observation(path):
    policy = json.loads(path.read_text())
    policy["observation_size"] += 1
    for row in policy["layers"][0]["weight"]:
        row.append(0.0)
    for stat in ("mean", "var"):
        policy["obs_normalization"][stat].append(1.0)
    path.write_text(json.dumps(policy))


@pytest.mark.parametrize("case,refusal", [
    ("no log_std", 'the continuous key "move" has no "log_std" (format version 5), which sampling needs: re-export '
                   "the policy with this godot-ppo"),
    ("lstm", "a recurrent policy (--lstm): in-engine actors run MLP policies; train with --no-in-engine"),
    ("shape", "it expects 13 observations, the agent gives 12"),
    ("camera", 'observes a camera ("camera_2d"): in-engine actors run vector observations only'),
])
def test_actors_refuse_what_they_cannot_run_in_one_line(headless_export, tmp_path, case, refusal):
    env = "forager" if case == "camera" else "ball_chase"
    game = RawGame(headless_export, "--agents=2", env=env)
    try:
        game.send({"type": "handshake", "major_version": "0", "minor_version": "7", **BINARY})
        game.send({"type": "env_info"})
        info = json.loads(game.recv_body())
        path = tmp_path / "p.json"
        if case == "lstm":
            from python_trainer.variants.recurrent import RecurrentAgent
            obs_space, act_space, *_ = spaces_from_env_info(info)
            agent = RecurrentAgent(obs_space.shape[0], act_space, hidden_size=4)
            normalizer = Normalizer(obs_space.shape[0], 1, 0.99, norm_obs=True, norm_reward=False)
            write_policy(path, game_policy(agent, normalizer, act_space, info, env_id=env, source={}, where="test"))
        elif case != "camera":
            policy_file(path, info, env)
            {"no log_std": without_log_std, "shape": one_more_observation}[case](path)
        reply = enter(game, path, 10)
        code, stderr = game.ended()
    finally:
        game.close()
    assert_refused_in_one_line(reply, code, stderr, refusal)


# ---------------------------------------------------------------------------------------------- weights
def test_a_weights_message_makes_the_game_sample_from_the_sent_policy(games, tmp_path):
    from python_trainer.engine.policy_weights import flat_weights

    n, steps = 4, 20
    game = games(f"--agents={n}")
    path_b = policy_file(tmp_path / "b.json", game.info, "ball_chase", seed=0)[0]
    path_a, agent_a, normalizer_a = policy_file(tmp_path / "a.json", game.info, "ball_chase", seed=1,
                                                change=lambda agent: agent.actor_logstd.copy_(torch.tensor([0.2, -0.6])))
    values = flat_weights(json.loads(path_a.read_text()))
    assert enter(game, path_b, steps, logprob=True)["weights"] == values.size
    game.send_bytes(struct.pack("<II", 22, values.size) + values.astype("<f4").tobytes())  # no reply
    got, _ = blocks(collect(game)[1], n, 12, 2, steps, logprob=True)
    obs = np.concatenate([b["obs"] for b in got])
    actions = np.concatenate([b["actions"] for b in got])
    np.testing.assert_allclose(np.concatenate([b["logprobs"] for b in got]),
                               learner_logprobs(agent_a, normalizer_a, obs, actions), rtol=0, atol=1e-5)
    # a weights message of another size ends the game in one line
    game.send_bytes(struct.pack("<II", 22, 3) + np.zeros(3, "<f4").tobytes())
    error = json.loads(game.recv_body())
    code, stderr = game.ended()
    assert error["type"] == "error" and error["message"].startswith("a weights message of 20 bytes (3 values); this "
                                                                    f"policy takes {values.size} float32 values")
    assert code == 1 and "rl_sync: error: " + error["message"] in stderr
