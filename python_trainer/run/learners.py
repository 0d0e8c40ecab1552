"""`godot-ppo train`'s rollouts and learners: this machine's envs or Ray workers, and for each policy the slots of
ppo.iterations (agent, bonus, optimizer, normaliser, buffer), from a resumed checkpoint's part when there is one."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

from python_trainer.base.combinations import refusal
from python_trainer.base.errors import say
from python_trainer.engine.policy_file import game_policy, write_policy
from python_trainer.engine.policy_weights import agent_weights
from python_trainer.checkpoint import image_entry, space_to_dict
from python_trainer.envs.env_params import binary_flags
from python_trainer.envs.game import GodotGame
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions
from python_trainer.envs.spaces import agent_policy_names
from python_trainer.envs.vec_env import make_vec_env
from python_trainer.normalization import Normalizer
from python_trainer.optimizer import Adam
from python_trainer.rollout import LocalRollouts, RolloutBuffer
from python_trainer.run.checks import check_sizes
from python_trainer.run.curriculum import from_flags
from python_trainer.run.run_folder import TrainError
from python_trainer.variants.async_rollouts import LocalAsyncRollouts
from python_trainer.variants.engine_actors import EngineActorRollouts, InEngineRefused, decide, refused_variant
from python_trainer.variants.policies import Learner, PolicySet
from python_trainer.variants.ray_rollouts import RayRollouts
from python_trainer.variants.rnd import RND
from python_trainer.variants.self_play import self_play_rollouts
from python_trainer.variants.trained_agent import make_agent

VIDEO_DIR = "videos"  # --capture-video's folder in the run folder, as CleanRL's videos/<run_name>


# ======================================================================================================================
# The rollouts
# ======================================================================================================================
def env_kwargs(args, game, global_step, run_dir, start_values: Optional[dict] = None):
    """make_vec_env's options: every env gets num_envs/seed/run_dir, Godot games the instance options.
    ``start_values``: name -> env_params.Value in force as the games start (curriculum.start_values: --env-param's and
    a curriculum's); None: --env-param's alone."""
    kwargs = {"num_envs": args.num_envs, "seed": args.seed + global_step, "run_dir": str(run_dir)}
    if args.frame_stack != 1:  # a camera game's K newest frames (a GameError for a game without a camera)
        kwargs["frame_stack"] = args.frame_stack
    if args.capture_video and not isinstance(game, GodotGame):
        kwargs["video_dir"] = str(Path(run_dir) / VIDEO_DIR)
    if isinstance(game, GodotGame):
        kwargs.update(num_instances=args.num_instances, agents_per_instance=args.agents_per_instance,
                      headless=not args.window)
        if args.copies != 1:
            kwargs["copies"] = args.copies
        # the constants in force at start (--env-param's, a curriculum's lesson) also go on the command line, so that
        # env_info obeys them (forager's vision=0: a parameter the game fixes at start, docs/env_params.md)
        if start_values is None:
            start_values = {name: lessons[0].value for name, lessons in from_flags(args.env_param or ())[0].items()}
        extra = binary_flags(start_values)
        if extra:
            kwargs["extra_args"] = extra
        if args.speedup is not None:
            kwargs["speedup"] = args.speedup
        if args.action_repeat is not None:
            kwargs["action_repeat"] = args.action_repeat
        if args.async_rl:  # the learner's update runs beside the games: a woken game must be able to take its core
            kwargs["batch"] = False
        kwargs.update(max_restarts=args.max_restarts, step_timeout=args.step_timeout,
                      allow_script_errors=args.allow_script_errors, connect_timeout=args.connect_timeout)
    return kwargs


def make_rollouts(args, game, global_step, run_dir, start_values: Optional[dict] = None):
    """This machine's envs (LocalRollouts; with --async, LocalAsyncRollouts: in a child process, collecting while the
    learner updates), or --ray-workers Ray workers with their own games (RayRollouts). ``start_values``: env_kwargs'."""
    kwargs = env_kwargs(args, game, global_step, run_dir, start_values)
    if args.in_engine and not isinstance(game, GodotGame):
        raise InEngineRefused(refusal("gym/in_engine", env_id=args.env_id))
    decide(args)  # --in-engine with a variant that does not run in the engine: refused before any game starts
    if args.ray_address is not None:
        if isinstance(game, GodotGame):  # a game of several policies is refused before Ray starts (seconds, a GB)
            _refuse_ray_policies(args, _policy_names(game, args))
        # (--async: its workers' next fragments asked ahead; in the engine: each worker's own engine_rollouts)
        return RayRollouts(game, args, run_dir, kwargs, say, engine=engine_rollouts)
    maybe = isinstance(game, GodotGame) and args.in_engine is not False and refused_variant(args) is None
    if args.async_rl and not maybe:  # the games and their collection in a child process, the next rollout asked ahead
        return LocalAsyncRollouts(game, kwargs, args, args.max_policy_lag)
    envs = make_vec_env(game, **kwargs)
    if isinstance(game, GodotGame):  # the one rule: in the engine, or step by step
        try:
            in_engine, why = decide(args, envs)
            if in_engine:  # (--self-play: its two teams' routes collected in the games)
                rollouts = engine_rollouts(envs, args, run_dir, why)
                return self_play_rollouts(rollouts, args, run_dir) if args.self_play else rollouts
        except BaseException:
            envs.close()
            raise
        if args.async_rl:  # step by step, --async collects in a child process with games of its own
            envs.close()
            return LocalAsyncRollouts(game, kwargs, args, args.max_policy_lag)
    rollouts = LocalRollouts(envs, args.pipeline)
    if isinstance(game, GodotGame):  # the start-up line's second half
        rollouts.actors_line = f"\nactors: the trainer steps every agent ({why})"
    if not args.self_play:
        return rollouts
    try:  # the learning team against snapshots of its past policy (self_play.py)
        return self_play_rollouts(rollouts, args, run_dir)
    except BaseException:
        rollouts.close()
        raise


def engine_rollouts(envs, args, run_dir, why: str, logprob: bool = False) -> EngineActorRollouts:
    """In-engine actors (variants/engine_actors.py) over ``envs``, sent the agent as policy_file.py makes it."""

    def export(agent, normalizer, name=None):  # name: one of several policies (a mixed game's own action space)
        space = envs.single_action_space[name] if getattr(envs, "mixed", False) else envs.single_action_space
        return game_policy(agent, normalizer, space, envs.env_info, env_id=args.env_id,
                           source={"run": Path(run_dir).name, "in_engine_actors": True},
                           where="the in-engine actors' policy", policy_name=name)

    return EngineActorRollouts(envs, num_steps=args.num_steps, seed=args.seed, step_timeout=args.step_timeout,
                               run_dir=run_dir, why=why, export=export, weigh=agent_weights, write=write_policy,
                               logprob=logprob, asynchronous=bool(getattr(args, "async_rl", False)))


# ======================================================================================================================
# Several policies: one learner each (policies.py)
# ======================================================================================================================
def policy_set_of(rollouts, args) -> Optional[PolicySet]:
    """A PolicySet for a game whose agents carry several policy names, None for one policy; the sizes of each
    policy's batch are checked like the run's."""
    names = list(dict.fromkeys(agent_policy_names(rollouts.env_info))) if rollouts.env_info else []
    if len(names) < 2:
        return None
    _refuse_ray_policies(args, names)
    if args.async_rl:
        raise TrainError(refusal("policies/async", env_id=args.env_id, names=", ".join(names)))
    policy_set = PolicySet(rollouts)
    for view in policy_set.views:
        try:
            check_sizes(args, view.num_envs)
        except TrainError as e:
            raise TrainError(f"the policy {view.name!r} has {view.num_envs} of the {rollouts.num_envs} agents: {e}") from None
    return policy_set


def _policy_names(game, args) -> list:
    """The policy names of the game's agents, from one headless instance of the run's agents, ended at once."""
    options = LaunchOptions(agents_per_instance=args.agents_per_instance, copies=args.copies,
                            connect_timeout=args.connect_timeout, auto_window=False)
    with InstanceLauncher(game, options) as launcher:
        return agent_policy_names(launcher.instances[0].env_info)


def _refuse_ray_policies(args, names) -> None:
    names = list(dict.fromkeys(names))
    if args.ray_address is not None and len(names) > 1:
        raise TrainError(refusal("policies/ray", env_id=args.env_id, names=", ".join(names)))


def saved_policy(ckpt, view, policy_set) -> Optional[dict]:
    """The checkpoint's part for ``view``'s policy: the whole checkpoint for a game with one policy."""
    if not ckpt:
        return None
    return ckpt if policy_set is None else ckpt["policies"][view.name]


def make_learner(view, args, saved, policy_set) -> Learner:
    """The slots of ppo.iterations for one policy: its agent (MLP or --lstm), its bonus (--rnd: RND, whose predictor
    trains with it), its optimizer and normaliser (from ``saved`` when resuming) and its rollout buffer."""
    obs_dim, image = view.single_observation_space.shape[0], view.image_layout
    agent = make_agent(obs_dim, view.single_action_space, asdict(args), image)  # a camera: the CNN agent
    bonus = RND(obs_dim, args.rnd_ext_coef, args.rnd_coef) if args.rnd else None
    continuous = agent.n_continuous > 0  # the normalisation defaults: CleanRL's continuous-action script
    norm_obs = continuous if args.norm_obs is None else args.norm_obs
    norm_reward = continuous if args.norm_reward is None else args.norm_reward
    # torch's fused Adam kernel (optimizer.py): the same update as torch.optim.Adam(fused=True), without its costs
    params = list(agent.parameters()) + (list(bonus.predictor.parameters()) if bonus else [])
    optimizer = Adam(params, lr=args.learning_rate, eps=1e-5)
    normalizer = Normalizer(obs_dim, view.num_envs, args.gamma, norm_obs, norm_reward,
                            vector_mask=None if image is None else image.vector_mask())  # images pass through
    if saved:
        agent.load_state_dict(saved["model"])
        if bonus is not None:
            bonus.load_state_dict(saved["rnd"]["model"])
            bonus.load_stats_state_dict(saved["rnd"]["stats"])
        optimizer.load_state_dict(saved["optimizer"])
        normalizer.load_state_dict(saved["normalizer"])
    name = getattr(view, "name", None)
    learner = Learner(name, view, agent, bonus, optimizer, normalizer, tag="" if policy_set is None else f"{name}/")
    learner.buf = RolloutBuffer(args.num_steps, view.num_envs, obs_dim, agent, bonus)
    return learner


def policy_state(learner) -> dict:
    """A learner's part of a checkpoint of several policies (what saved_policy gives back)."""
    rnd = learner.bonus
    return {"model": learner.agent.state_dict(), "optimizer": learner.optimizer.state_dict(),
            "normalizer": learner.normalizer.state_dict(),
            "observation_space": space_to_dict(learner.rollouts.single_observation_space),
            "action_space": space_to_dict(learner.rollouts.single_action_space),
            "rnd": None if rnd is None else {"model": rnd.state_dict(), "stats": rnd.stats_state_dict()},
            **image_entry(learner.agent)}


def policy_table(learners, policy_set) -> dict:
    """The hyperparameters' rows of a game with several policies: each policy's agents and normalisation."""
    if policy_set is None:
        return {}
    return {f"policy {ln.name}": f"{ln.num_envs} agents, norm_obs={ln.normalizer.norm_obs}, "
                                 f"norm_reward={ln.normalizer.norm_reward}" for ln in learners}


def declared_actions(env_info):
    """A Godot game's action space as its agents declare it (their key order is the demonstrations'), else None."""
    spaces = (env_info or {}).get("action_space")
    return spaces[0] if isinstance(spaces, list) and spaces else spaces
