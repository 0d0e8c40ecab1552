"""The trainer's side of camera images: the CNN agent in the agent slot (variants/cnn_agent.py) learns from an image,
with and without --lstm; the rollout buffer keeps the image as uint8 (obs_store.py), also through a Ray fragment; the
normaliser leaves the image's columns alone; a checkpoint gives back the same actions; train's image checks refuse
what does not go with images in one line; and `godot-ppo train` runs a camera game end to end (the fake game's
camera, windowed under Xvfb), --lstm and --frame-stack included, and resumes it."""

import pickle
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import fake_export
from image_env import LENGTH, BrightSide
from python_trainer import ppo
from python_trainer.checkpoint import load_checkpoint, save_checkpoint
from python_trainer.envs.images import ImageLayout
from python_trainer.normalization import Normalizer
from python_trainer.obs_store import ObsStore
from python_trainer.optimizer import Adam
from python_trainer.rollout import LocalRollouts, RolloutBuffer, evaluate
from python_trainer.run import train
from python_trainer.run.checks import check_images
from python_trainer.run.run_folder import TrainError
from python_trainer.tools import play
from python_trainer.variants.cnn import CnnEncoder
from python_trainer.variants.cnn_agent import CnnAgent, RecurrentCnnAgent
from python_trainer.variants.trained_agent import LoadedAgent, agent_from_checkpoint, make_agent

CAMERA = ImageLayout("camera_2d", 20, 20, 3, 2)  # 2 vector columns, then 20 x 20 x 3


def _rows(n, layout=CAMERA, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.empty((n, layout.row_size), np.float32)
    rows[:, : layout.start] = rng.standard_normal((n, layout.start))
    rows[:, layout.start :] = rng.integers(0, 256, (n, layout.size))
    return rows


def _learner(envs, lstm=False, lr=1e-3, num_steps=32):
    """(args, agent, optimizer, normaliser, buffer, rollouts) as run/learners.make_learner makes them for a camera."""
    torch.set_num_threads(1)
    torch.manual_seed(1)
    np.random.seed(1)
    layout = envs.image_layout
    args = ppo.Args(num_steps=num_steps, learning_rate=lr)
    agent = make_agent(layout.row_size, envs.single_action_space, {"cnn": "simple", "lstm": lstm}, layout)
    normalizer = Normalizer(layout.row_size, envs.num_envs, 0.99, True, False, vector_mask=layout.vector_mask())
    buf = RolloutBuffer(num_steps, envs.num_envs, layout.row_size, agent)
    rollouts = LocalRollouts(envs)
    rollouts.reset(normalizer, buf, seed=1)
    return args, agent, Adam(list(agent.parameters()), lr=lr, eps=1e-5), normalizer, buf, rollouts


# ---------------------------------------------------------------------------------------------- the agent
def test_the_cnn_agent_shares_one_encoder_and_reads_image_and_vector():
    agent = make_agent(CAMERA.row_size, gym.spaces.Discrete(3), {"cnn": "simple"}, CAMERA)
    assert isinstance(agent, CnnAgent) and isinstance(agent.encoder, CnnEncoder)
    assert agent.actor[0].in_features == agent.critic[0].in_features == 256 + CAMERA.start
    assert [k for k in agent.state_dict() if not k.startswith(("actor.", "critic."))] == [
        "encoder.convs.0.weight", "encoder.convs.0.bias", "encoder.convs.2.weight", "encoder.convs.2.bias",
        "encoder.dense.0.weight", "encoder.dense.0.bias"]
    parts = agent.policy_parts()
    assert parts["encoder"] is agent.encoder and parts["actor"] is agent.actor and parts["image"] == CAMERA
    nature = make_agent(ImageLayout("camera_2d", 36, 36, 3, 0).row_size, gym.spaces.Discrete(2), {"cnn": "nature"},
                        ImageLayout("camera_2d", 36, 36, 3, 0))
    assert nature.encoder.kind == "nature" and nature.actor[0].in_features == 512
    x = torch.from_numpy(_rows(4))
    changed = x.clone()
    changed[:, 0] += 1.0  # a vector value alone moves the critic: the heads read the vector beside the image
    assert not torch.equal(agent.get_value(x), agent.get_value(changed))


@pytest.mark.parametrize("lstm", [False, True], ids=["cnn", "cnn_lstm"])
def test_the_rollout_acts_with_the_agents_numbers_and_random_draws(lstm):
    """The rollout's acting (the encoder in torch, the heads on numpy) draws what get_action_and_value draws."""
    space = gym.spaces.Dict({"move": gym.spaces.Box(-1, 1, (2,), np.float32), "jump": gym.spaces.Discrete(3)})
    agent = make_agent(CAMERA.row_size, space, {"cnn": "simple", "lstm": lstm}, CAMERA)
    x, done = _rows(6), np.zeros(6, np.float32)
    state = agent.initial_state(6)
    torch.manual_seed(3)
    action, logprob, value, _ = agent.rollout_policy()(x, state, done)
    torch.manual_seed(3)
    with torch.no_grad():
        ref_action, ref_logprob, _, ref_value, _ = agent.get_action_and_value(torch.from_numpy(x), None, state,
                                                                              torch.from_numpy(done))
    np.testing.assert_allclose(action, ref_action.numpy(), atol=1e-5)
    np.testing.assert_allclose(logprob, ref_logprob.numpy(), atol=1e-5)
    np.testing.assert_allclose(value, ref_value.numpy(), atol=1e-5)


@pytest.mark.slow
def test_ppo_with_the_cnn_learns_which_half_of_its_image_is_bright():
    """Random play returns LENGTH / 2; 4,096 steps (16 updates of 8 x 32) teach it to act towards the bright half."""
    envs = BrightSide(8, seed=1)
    args, agent, optimizer, normalizer, buf, rollouts = _learner(envs)
    for _ in ppo.iterations(args, agent, optimizer, rollouts, buf, normalizer, num_iterations=16):
        pass
    loaded = LoadedAgent(agent, normalizer, envs.single_observation_space, envs.single_action_space, "bright", 0)
    returns = evaluate(loaded.act, BrightSide(8, seed=5), 16, seed=5)
    assert np.mean(returns) >= 0.9 * LENGTH > LENGTH / 2


def test_lstm_on_the_cnn_updates_and_carries_its_memory():
    envs = BrightSide(4, seed=2)
    args, agent, optimizer, normalizer, buf, rollouts = _learner(envs, lstm=True, num_steps=16)
    assert isinstance(agent, RecurrentCnnAgent) and agent.lstm.input_size == 256 + envs.image_layout.start
    before = agent.lstm.lstm.weight_ih_l0.detach().clone()
    its = list(ppo.iterations(args, agent, optimizer, rollouts, buf, normalizer, num_iterations=2))
    assert all(np.isfinite(it.scalars["losses/value_loss"]) for it in its)
    assert not torch.equal(before, agent.lstm.lstm.weight_ih_l0) and buf.state.h.abs().sum() > 0


# ---------------------------------------------------------------------------------------------- the buffer
def test_the_rollout_buffer_keeps_the_image_as_uint8_and_gives_back_float_rows():
    agent = make_agent(CAMERA.row_size, gym.spaces.Discrete(2), {}, CAMERA)
    buf = RolloutBuffer(8, 4, CAMERA.row_size, agent)
    assert isinstance(buf.obs, ObsStore) and buf.obs.shape == (8, 4, CAMERA.row_size)
    assert buf.obs.image.dtype == np.uint8 and buf.obs.vector.dtype == np.float32
    assert buf.obs.nbytes == 8 * 4 * (CAMERA.size + 4 * CAMERA.start)  # H*W*C bytes per agent-step, not 4x
    rows = _rows(4)
    buf.obs[3] = rows
    buf.obs[5, [1, 2]] = rows[:2]
    np.testing.assert_array_equal(buf.obs[3], rows)
    np.testing.assert_array_equal(buf.obs[5, [1, 2]], rows[:2])
    picked = buf.batch_obs().index_select(0, torch.tensor([3 * 4 + 2, 5 * 4 + 1]))
    assert picked.dtype == torch.float32
    np.testing.assert_array_equal(picked.numpy(), rows[[2, 0]])
    # a vector game's buffer is the float32 array it always was
    mlp = make_agent(6, gym.spaces.Discrete(2), {})
    plain = RolloutBuffer(8, 4, 6, mlp)
    assert type(plain.obs) is np.ndarray and plain.obs.dtype == np.float32
    assert torch.equal(plain.batch_obs(), torch.from_numpy(plain.obs.reshape(-1, 6)))


def test_a_ray_fragment_ships_the_uint8_store_into_the_learners_buffer():
    """ray_rollouts.RayRollouts.collect writes each fragment's fields with buf.<field>[:, cols] = fragment[field]."""
    agent = make_agent(CAMERA.row_size, gym.spaces.Discrete(2), {}, CAMERA)
    worker = RolloutBuffer(4, 2, CAMERA.row_size, agent)
    for t in range(4):
        worker.obs[t] = _rows(2, seed=t)
    fragment = pickle.loads(pickle.dumps({f: getattr(worker, f) for f in worker.fields}))
    assert fragment["obs"].image.dtype == np.uint8 and fragment["obs"].nbytes == worker.obs.nbytes
    learner = RolloutBuffer(4, 6, CAMERA.row_size, agent)
    learner.obs[:, slice(2, 4)] = fragment["obs"]
    for t in range(4):
        np.testing.assert_array_equal(learner.obs[t, 2:4], _rows(2, seed=t))
    assert not learner.obs[:, :2].any() and not learner.obs[:, 4:].any()


# ---------------------------------------------------------------------------------------------- the normaliser
def test_the_normaliser_scales_the_vector_columns_and_leaves_the_image_alone():
    normalizer = Normalizer(CAMERA.row_size, 4, 0.99, True, False, vector_mask=CAMERA.vector_mask())
    rows = _rows(64)
    rows[:, : CAMERA.start] = rows[:, : CAMERA.start] * 50 + 7
    out = normalizer.normalize_obs(rows)
    np.testing.assert_array_equal(out[:, CAMERA.start :], rows[:, CAMERA.start :])  # 0..255, unclipped
    assert np.abs(out[:, : CAMERA.start].mean(0)).max() < 0.1 and normalizer.obs_rms.mean.shape == (CAMERA.start,)
    stats = normalizer.obs_statistics()
    assert stats["mean"].shape == (CAMERA.start,)  # the policy file's: the vector columns' only
    frozen = Normalizer.frozen(normalizer.state_dict())  # as a checkpoint gives it back
    np.testing.assert_array_equal(frozen.normalize_obs(rows, update=False), normalizer.normalize_obs(rows, update=False))
    np.testing.assert_allclose(frozen.raw_obs(out)[:, : CAMERA.start], rows[:, : CAMERA.start], rtol=1e-4, atol=1e-3)
    assert "vector_mask" not in Normalizer(6, 4, 0.99, True, False).state_dict()  # vector games' keep their keys


# ---------------------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("lstm", [False, True], ids=["cnn", "cnn_lstm"])
def test_a_checkpoint_gives_back_the_agent_and_its_actions(tmp_path, lstm):
    envs = BrightSide(4, seed=3)
    args, agent, optimizer, normalizer, buf, rollouts = _learner(envs, lstm=lstm, num_steps=8)
    next(ppo.iterations(args, agent, optimizer, rollouts, buf, normalizer, num_iterations=1))
    path = tmp_path / "model.pt"
    save_checkpoint(path, agent=agent, optimizer=optimizer, normalizer=normalizer, args=train.Args(env_id="bright",
                    lstm=lstm), global_step=32, update=1, observation_space=envs.single_observation_space,
                    action_space=envs.single_action_space)
    loaded = agent_from_checkpoint(load_checkpoint(path))
    assert type(loaded.agent) is type(agent) and loaded.agent.image_layout == envs.image_layout
    ours = LoadedAgent(agent, normalizer, envs.single_observation_space, envs.single_action_space, "bright", 32)
    obs, _ = BrightSide(4, seed=9).reset(seed=9)
    done = np.ones(4, bool)
    for _ in range(3):
        np.testing.assert_array_equal(loaded.act(obs, done=done), ours.act(obs, done=done))
        done = np.zeros(4, bool)


# ---------------------------------------------------------------------------------------------- train's checks
def _view(layout):
    return SimpleNamespace(image_layout=layout)


@pytest.mark.parametrize("flags, layout, message", [
    ({"cnn": "nature"}, CAMERA, "the nature encoder needs images of at least 36 x 36, the game's are 20 x 20: use "
                                "--cnn simple"),
    ({"rnd": True}, CAMERA, "--rnd's networks are MLPs over the observation row and seer's observations hold a camera "
                            "image ('camera_2d'): curiosity from images is not supported yet; drop --rnd"),
    ({"demos": ["a.json"]}, CAMERA, "--demos: demonstrations with camera images are not supported yet"),
    ({"cnn": "nature", "explicit": True}, None, "--cnn chooses the encoder of a camera image, and seer's observations "
                                                "hold none"),
])
def test_what_does_not_go_with_images_is_refused_in_one_line(flags, layout, message):
    explicit = {"cnn"} if flags.pop("explicit", False) else set()
    args = train.Args(env_id="seer", **flags)
    with pytest.raises(TrainError) as e:
        check_images([_view(layout)], args, explicit, None)
    assert message in str(e.value) and "\n" not in str(e.value)
    check_images([_view(None)], train.Args(env_id="seer"), set(), None)  # the default --cnn on a vector game: fine


@pytest.mark.slow
def test_train_runs_a_camera_game_with_lstm_and_frame_stack_and_resumes_it(tmp_path, monkeypatch, capsys):
    """The fake game's camera (20 x 20 x 3 beside 2 vector values), windowed under an Xvfb of its own: two updates
    with --lstm --frame-stack 2, a checkpoint that rebuilds the agent, a resume for one more update, and play --python."""
    monkeypatch.delenv("DISPLAY", raising=False)
    export = fake_export(tmp_path / "seer.x86_64", "--fake_image=camera_2d:20:20:3", "--fake_obs=obs:2")
    root = tmp_path / "runs"
    flags = ["--env-path", str(export), "--agents-per-instance", "4", "--num-steps", "16", "--num-minibatches", "2",
             "--lstm", "--frame-stack", "2", "--eval-episodes", "2", "--run-dir-root", str(root)]
    assert train.main([*flags, "--total-timesteps", "128"]) == 0
    assert "eval: deterministic policy, 2 episodes" in capsys.readouterr().out
    (run_dir,) = root.iterdir()
    ckpt = load_checkpoint(run_dir / "model.pt")
    assert ckpt["image"] == {"key": "camera_2d", "height": 20, "width": 20, "channels": 3, "start": 2,
                             "frame_stack": 2}
    loaded = agent_from_checkpoint(ckpt)
    assert isinstance(loaded.agent, RecurrentCnnAgent) and loaded.agent.image_layout.shape == (20, 20, 6)
    with pytest.raises(ValueError, match="the policy reads rows of 2402 values .* the env gives 1202: make the env "
                                         "with frame_stack=2"):
        loaded.act(np.zeros((1, 1202), np.float32))  # an env without the run's frame stack
    saved_args = (run_dir / "args.json").read_bytes()
    with pytest.raises(TrainError, match="the run was trained with frame stack 2, and this run asks for frame stack 4: "
                                        "drop --frame-stack or start a new run"):
        train.main(["--resume", str(run_dir), "--frame-stack", "4"])
    assert (run_dir / "args.json").read_bytes() == saved_args  # a refused resume rewrites nothing
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "192"]) == 0
    assert "global_step=192" in capsys.readouterr().out
    # play --python stacks the frames the checkpoint was trained with (before: the row-size error above)
    assert play.play_main([str(run_dir), "--python", "--seconds", "0.5", "--env-path", str(export)]) == 0
    assert " from Python in " in capsys.readouterr().out
