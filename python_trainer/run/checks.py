"""`godot-ppo train`'s checks that need more than one flag, the game or the checkpoint, said before any game starts
where they can be (each flag's own rule is stated next to it: flags.py)."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym

from python_trainer.agent import action_heads
from python_trainer.base.combinations import refusal
from python_trainer.base.errors import say
from python_trainer.base.flags import agents_for, check_flags
from python_trainer.checkpoint import space_to_dict
from python_trainer.envs.editor import EditorPlay, wait_for_play
from python_trainer.envs import editor, frame_stack
from python_trainer.envs.env_params import check_params
from python_trainer.envs.game import GodotGame, resolve_env
from python_trainer.envs.gym_env import DEFAULT_NUM_ENVS
from python_trainer.run.run_folder import TrainError
from python_trainer.variants.async_rollouts import refusal as async_refusal
from python_trainer.variants import cloning, cnn_agent, policies, recurrent, rnd, self_play

DEFAULT_ENV_ID = "CartPole-v1"  # CleanRL's default, when neither --env-id nor --env-path is given


def check_sizes(args, num_envs):
    """(batch_size, minibatch_size), or a TrainError naming the sizes that do not fit together."""
    batch_size = num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        divisors = sorted(
            (d for d in range(1, batch_size + 1) if batch_size % d == 0), key=lambda d: abs(d - args.num_minibatches)
        )
        raise TrainError(
            f"the batch (--num-envs {num_envs} x --num-steps {args.num_steps} = {batch_size}) is not divisible by "
            f"--num-minibatches {args.num_minibatches}: use a --num-minibatches that divides {batch_size} "
            f"(the nearest: {', '.join(map(str, sorted(divisors[:3])))}) or change --num-steps"
        )
    refused = recurrent.size_refusal(args, num_envs)  # a variant's own size rule, in its module
    if refused is not None:
        raise TrainError(refused)
    if args.total_timesteps < batch_size and not cloning.clones_only(args):
        raise TrainError(
            f"--total-timesteps {args.total_timesteps} is less than one batch ({num_envs} envs x {args.num_steps} "
            f"steps = {batch_size}): raise --total-timesteps or lower --num-steps"
        )
    return batch_size, batch_size // args.num_minibatches


def update_budget(total_timesteps: int, batch_size: int, global_step: int) -> tuple[int, int]:
    """(the update to continue after, the last update) for a run at ``global_step`` with this batch size.

    The updates left are the batches that fit in the steps left, so a run resumed with another number of envs
    (changed --num-instances / --agents-per-instance / --num-envs, a Ray run resumed here or the reverse) still ends
    within one batch of --total-timesteps; the steps done, counted in batches of this size, number the updates, so
    the learning rate's annealing goes on from the share of the budget already spent. With the batch size of the
    checkpoint's run this is its own update index and ``total_timesteps // batch_size``."""
    start = global_step // batch_size
    return start, start + max(0, total_timesteps - global_step) // batch_size


def check_args(args, explicit, ckpt):
    """Every check that needs no game: each flag's own rule and the flags that go only with another (after --resume
    has filled in the run's own flags), then the rules between flags."""
    check_flags(args, set(explicit))
    _check_resumed_model(args, ckpt)
    refused = (cloning.budget_refusal(args) or editor.flags_refusal(args) or self_play.flags_refusal(args)
               or async_refusal(args) or self_play.resume_refusal(args, ckpt))
    if refused is not None:  # each variant's rules, asked in its module (the texts: base/combinations.py)
        raise TrainError(refused)


def _check_resumed_model(args, ckpt):
    """--lstm / --lstm-size / --frame-stack / --rnd must describe the model a resumed checkpoint holds (each
    variant's module checks its own)."""
    if not ckpt:
        return
    saved = ckpt.get("args") or {}
    refused = (recurrent.resume_refusal(args, saved) or frame_stack.resume_refusal(args, saved)
               or rnd.resume_refusal(args, ckpt))
    if refused is not None:
        raise TrainError(refused)


def resolve_game(args):
    """A gymnasium id, or the `GodotGame` that --env-path / --env-id name (game.resolve_env decides which); with
    --editor, the game a person starts with Play in the Godot editor, once it has connected."""
    if args.editor:
        return wait_for_play(args.port, say, args.env_id, args.step_timeout)
    return resolve_env(_env_id(args), args.env_path, args.connect_timeout)


def _env_id(args):
    return args.env_id if args.env_id is not None or args.env_path is not None else DEFAULT_ENV_ID


def check_game(args, params, params_where):
    """(args, game): the game (resolve_game), with what can be checked against it before any game starts (the
    curriculum's ``params`` among them). An unknown id or a bad --env-path gives the clear error before any folder
    exists."""
    game = resolve_game(args)
    try:
        return _check_against(game, args, params, params_where)
    except BaseException:
        if isinstance(game, GodotGame) and isinstance(game.export, EditorPlay):
            game.export.instance.close()  # the editor's game quits (this run will not train it), the port closes
        raise


def _check_against(game, args, params, params_where):
    check_params(game, {n: [lesson.value for lesson in ls] for n, ls in params.items()}, params_where)
    if isinstance(game, GodotGame):
        # The game's name as the binary reports it, and its export's absolute path (a resume or `play` from another
        # folder finds it).
        args = replace(args, env_id=game.env, env_path=game.env_path if args.env_path is not None else None)
        agents_for(args.num_envs, args.num_instances, args.agents_per_instance, as_flags=True, copies=args.copies)
        if args.watch:
            game.require_addon("--watch")
    else:
        args = replace(args, env_id=_env_id(args))  # CartPole-v1 by default: the run folder and the checkpoint name it
        if args.watch:
            raise TrainError(refusal("gym/watch", env_id=args.env_id))
    if args.num_envs is not None or not isinstance(game, GodotGame):
        check_sizes(args, args.num_envs or DEFAULT_NUM_ENVS)  # what can be checked before any game starts
    return args, game


def check_spaces(obs_space, act_space, ckpt, args, run_dir):
    """Spaces the agent handles, and, when resuming, the checkpoint's own."""
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise TrainError(f"unsupported observation space {obs_space}: the MLP agent needs flat Box observations")
    try:
        action_heads(act_space)
    except ValueError as e:
        raise TrainError(
            f"unsupported action space {act_space} ({e}): the agent handles Discrete, 1-D Box, MultiDiscrete and a "
            "Dict of 1-D Box and Discrete keys; wrap the env to expose one of those (e.g. MultiBinary(n) as MultiDiscrete)"
        ) from None
    if ckpt and (
        ckpt["observation_space"] != space_to_dict(obs_space) or ckpt["action_space"] != space_to_dict(act_space)
    ):
        raise TrainError(
            f"--resume {run_dir}: the checkpoint's spaces ({ckpt['observation_space']['shape']}, "
            f"{ckpt['action_space']}) differ from {args.env_id}'s now ({obs_space}, {act_space}); start a new run"
        )


def check_policies(views, policy_set, ckpt, args, run_dir) -> None:
    """Each policy's spaces are ones the agent handles, and a resumed checkpoint holds the same policies."""
    saved = (ckpt or {}).get("policies")
    names = None if policy_set is None else policy_set.names
    refused = policies.resume_refusal(ckpt, names, args.env_id, f"--resume {run_dir}")
    if refused is not None:  # the several policies' variant's own resume check
        raise TrainError(refused)
    for view in views:
        entry = saved[view.name] if saved is not None else ckpt
        try:
            check_spaces(view.single_observation_space, view.single_action_space, entry, args, run_dir)
        except TrainError as e:
            raise TrainError(f"the policy {view.name!r}: {e}" if policy_set is not None else str(e)) from None


def check_images(views, args, explicit, ckpt) -> None:
    """A game whose observations hold a camera image, and --cnn: the camera variant's rules (cnn_agent.py)."""
    refused = cnn_agent.images_refusal([view.image_layout for view in views], args, explicit, ckpt)
    if refused is not None:
        raise TrainError(refused)
