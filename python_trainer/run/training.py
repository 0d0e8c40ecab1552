"""One `godot-ppo train` run, in phases: prepare (checks, run folder, seeding, the rollouts), build the learners (one
per policy, with --demos' cloning), the loop over ppo.iterations (TensorBoard, episodes.csv, the curriculum,
checkpoints with the in-engine policy file, progress), finish (final checkpoint and model, evaluation, the learning
curve, --capture-video), and on a crash (the checkpoint of the last completed update, and what is said: crash.py)."""

from __future__ import annotations

import random
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from python_trainer import ppo
from python_trainer.base.combinations import refusal
from python_trainer.base.errors import Fault, one_line, say
from python_trainer.base.files import OutputError, is_disk_full, write_error
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S
from python_trainer.base.signals import hold_signals, signals_deferred
from python_trainer.checkpoint import CHECKPOINT_NAME, MODEL_NAME, save_checkpoint, set_rng_state
from python_trainer.demos import DemoError, load_demos, read_demo_files
from python_trainer.engine.in_engine import PlaybackError
from python_trainer.engine.policy_file import (
    POLICY_NAME, game_policy, policy_source, write_policies_or_warn, write_policy_or_warn,
)
from python_trainer.engine.recording import record
from python_trainer.engine.watcher import start_policy_watcher
from python_trainer.envs.failures import GameClosedError, InstanceStartError
from python_trainer.envs.game import GameError, GodotGame
from python_trainer.envs.project_import import keep_out_of_projects
from python_trainer.rollout import NonFiniteEnvData, eval_seed
from python_trainer.run import crash, curriculum
from python_trainer.run.behaviour import Behaviour
from python_trainer.run.checks import (
    check_args, check_game, check_images, check_policies, check_sizes, update_budget,
)
from python_trainer.run.clock import Clock, TimeShares, perf_scalars
from python_trainer.run.curriculum import Schedule
from python_trainer.run.diagnosis import Diagnosis
from python_trainer.run.evaluation import Evaluations
from python_trainer.run.learners import (
    VIDEO_DIR, declared_actions, make_learner, make_rollouts, policy_set_of, policy_state, policy_table, saved_policy,
)
from python_trainer.run.run_folder import (
    RunLock, RunLog, TrainError, discard_new_run, new_run_dir, prepare_run, train_command, write_args_json,
)
from python_trainer.run.tracking import finish_tracking, start_tracking, tracked_fields
from python_trainer.variants import cloning
from python_trainer.variants.policies import lockstep
from python_trainer.variants.trained_agent import LoadedAgent

FINAL_VIDEO_SECONDS = 10.0


class TrainingRun:
    """The state the phases share: the arguments, the run folder and checkpoint, the rollouts and learners, and
    where training stands (``done_step``/``done_update``: the last completed update, what a stop saves;
    ``saved_step``: the newest checkpoint on disk)."""

    def __init__(self, args, explicit=frozenset(), args_class=None):
        self.args, self.explicit, self.args_class = args, set(explicit), args_class or type(args)
        self.rollouts = self.lock = self.log = self.watcher = self.schedule = self.evals = None
        self.tracked = None  # --track's W&B run (tracking.py)
        self.ready = False  # set once the agent exists: from then on a stop or a crash saves a checkpoint
        self.done_step = self.done_update = self.saved_step = self.start_update = None
        self.fresh, self.stopped_by = False, None  # a new run folder (not --resume's); what ended the run early

    def run(self) -> int:
        """0 once trained; 128 + N after signal N (said here); a Fault for a crash once the agent existed,
        raised after clean-up with its status 1 and the checkpoint it left."""
        self.prepare()
        try:
            self.build_learners()
            self.loop()
            self.finish()
            return 0
        except (TrainError, DemoError) as e:
            self.stopped_by = e
            raise  # NaN observations or loss: its message names the last checkpoint (the model may be diverging)
        except (KeyboardInterrupt, Exception) as e:
            self.stopped_by = e
            if isinstance(e, GameClosedError) and self.done_update in (None, self.start_update):
                self.ready = False  # nothing trained: no checkpoint, and a new run leaves no folder
                raise Fault(f"the editor's game closed before the first update ({one_line(e)}): nothing was "
                            "trained; start the trainer again, then press Play and leave the game running") from None
            if isinstance(e, GameError) and self.done_update in (None, self.start_update):
                self.ready = False  # the game's fault before anything was trained: a resume would only repeat it
                raise Fault(one_line(e)) from None
            # Ctrl-C, SIGTERM, SIGHUP (signals.Interrupted), the editor's game closed, an instance out of restarts, a
            # closed stdout (`| head`), a bug: the model in memory is intact, so the last completed update is saved
            # first, with a second signal held.
            with hold_signals():
                status, message = self.on_crash(e)
                if isinstance(e, (KeyboardInterrupt, GameClosedError)):
                    say(message)
                    return status
            raise Fault(message) from None  # a crash: the last update's checkpoint is saved (status 1)
        finally:
            self.close()
            if self.fresh and not self.ready and self.stopped_by is not None:
                # a new run refused or stopped before its training began (its demonstrations, --demos on a game of
                # several policies, a game closed or crashed at its first reset, a signal): no folder is left of it,
                # and the line said for it (the error on its way out) names no file that went with it
                discard_new_run(self.run_dir, self.stopped_by, sys.exc_info()[1])

    # ---- prepare ------------------------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Every check that can be made before a game starts, then the run folder, the seeds and the rollouts."""
        args, self.run_dir, self.ckpt = prepare_run(self.args, self.explicit)  # --resume: flags from its args.json
        check_args(args, self.explicit, self.ckpt)  # every flag that can be checked without a game
        # --demos: a missing, empty or damaged file is said before any game starts; each is read once (_clone)
        self.demo_files = read_demo_files(args.demos or ())
        self.params, params_where = curriculum.read(args.env_param, args.curriculum)  # a bad flag or file: now
        if args.curriculum is not None:  # absolute in args.json: a resume from another folder finds it
            args = replace(args, curriculum=str(Path(args.curriculum).resolve()))
        self.args, self.game = check_game(args, self.params, params_where)
        args = self.args
        fresh = self.fresh = self.run_dir is None
        self.run_dir = self.run_dir or new_run_dir(args.run_dir_root, args.env_id, args.exp_name, args.seed)
        self.global_step = self.ckpt["global_step"] if self.ckpt else 0
        self.saved_step = self.global_step if self.ckpt else None
        try:
            keep_out_of_projects(self.run_dir.parent)  # runs/ inside a Godot project: its editor must not import it
            # Seeding (and, when resuming, the RNG streams exactly where the checkpoint left them)
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            torch.backends.cudnn.deterministic = args.torch_deterministic
            torch.set_num_threads(max(1, args.torch_threads))
            if self.ckpt:
                set_rng_state(self.ckpt["rng"])
            self._open_rollouts()
        except BaseException as e:
            if self.rollouts is not None:
                self.rollouts.close()
            if self.lock is not None:
                self.lock.release()
            if fresh:  # a refused or failed start (a game that never connected, no display...) leaves no folder
                discard_new_run(self.run_dir, e)
            raise

    def _open_rollouts(self) -> None:
        """The lock, and the rollouts: a Godot game says how many agents each instance simulates, and so how many
        envs there are; the sizes are checked against them, and a curriculum's lesson is set."""
        args, ckpt = self.args, self.ckpt
        self.lock = RunLock(self.run_dir, prefix="--resume " if ckpt else "")  # one training per run folder
        start = curriculum.start_values(self.params, (ckpt or {}).get("curriculum"))  # on the games' command lines
        rollouts = self.rollouts = make_rollouts(args, self.game, self.global_step, self.run_dir, start)
        self.num_envs = rollouts.num_envs
        self.policy_set = policy_set_of(rollouts, args)  # a game with several policies: each one's batch must split too
        if ckpt and args.self_play:  # the pool, the ratings and the sides where the checkpoint left them
            rollouts.load_state_dict(ckpt.get("rollouts"))
        self.batch_size, self.minibatch_size = check_sizes(args, self.num_envs)
        if self.params:
            self.schedule = Schedule(self.params, self.num_envs, args.total_timesteps, say)
            # the lesson in force (a resumed run's own), from each agent's next episode
            if ckpt and ckpt.get("curriculum"):
                self.schedule.load_state_dict(ckpt["curriculum"], f"--resume {self.run_dir}")
            rollouts.set_env_params(self.schedule.message())

    # ---- build the learners -------------------------------------------------------------------------------------------
    def build_learners(self) -> None:
        """args.json, one learner per policy (with --demos' cloning), the run's log, --watch's window, RND's warm-up
        and the first reset; then training has started (``ready``)."""
        args, ckpt, rollouts, policy_set = self.args, self.ckpt, self.rollouts, self.policy_set
        self.start_update, self.num_iterations = update_budget(args.total_timesteps, self.batch_size, self.global_step)
        asked = None if args.agents_per_instance is None else args.agents_per_instance * args.copies  # copies' agents
        if asked is not None and rollouts.agents_per_instance not in (None, asked):
            say(f"note: {args.env_id} simulates {rollouts.agents_per_instance} agents per instance whatever "
                f"--agents-per-instance says; training {self.num_envs} envs")
        if rollouts.startup_line() is not None:
            print(rollouts.startup_line() + getattr(rollouts, "actors_line", ""), flush=True)
        # The algorithm's slots, filled once per policy (a game with several policies trains one network each, as
        # learners whose rollouts policies.PolicySet routes): the agent (MLP or --lstm), the bonus (--rnd), the
        # optimizer and the normaliser
        views = policy_set.views if policy_set is not None else [rollouts]
        check_policies(views, policy_set, ckpt, args, self.run_dir)
        check_images(views, args, self.explicit, ckpt)  # a camera's: its encoder, and the flags that go with it
        self.tracked = start_tracking(args, self.run_dir, resumed=bool(ckpt))  # --track: before TensorBoard's writer
        self._write_args_json()  # after the checks: a refused --resume leaves the run's own args.json as it was
        self.learners = [make_learner(view, args, saved_policy(ckpt, view, policy_set), policy_set) for view in views]
        if policy_set is not None:
            policy_set.bind(self.learners)
        first = self.first = self.learners[0]
        self.obs_space, self.act_space = rollouts.single_observation_space, rollouts.single_action_space
        self.aux, fit = self._clone() if args.demos else (None, {})
        self._open_log(fit)
        self.env_info = rollouts.env_info  # Godot games: the in-engine player's policy.json goes with each checkpoint
        self.evals = Evaluations(self, say)  # --eval-every (evaluation.py): needs the log's writer
        if args.watch:  # a window plays RUN_DIR/policy.json, reloaded at each checkpoint; now: the actor as it starts
            self.write_policy(self.run_dir / CHECKPOINT_NAME, self.global_step, self.start_update)
            self.watcher = start_policy_watcher(self.run_dir / POLICY_NAME, self.game, log_dir=self.run_dir / "logs",
                                                seed=args.seed, action_repeat=args.action_repeat or 1,
                                                fps=args.watch_fps, say=say)
        self.done_step, self.done_update = self.global_step, self.start_update  # the last completed update
        self.start_time, self.start_step = time.time(), self.global_step  # steps/s counts the warm-up and the reset
        self.clock = Clock(args.max_seconds, (ckpt or {}).get("clock"))  # --max-seconds: the training's seconds
        seed = args.seed + self.global_step
        if args.rnd and not ckpt:  # RND whitens observations with statistics of random play (the paper's)
            if policy_set is None:
                rollouts.warm_up(first.bonus, args.rnd_warmup_steps, seed)
            else:
                policy_set.warm_up(args.rnd_warmup_steps, seed)
        if policy_set is None:
            rollouts.reset(first.normalizer, first.buf, seed=seed)  # (Ray workers reset their own)
        else:
            policy_set.reset(seed=seed)
        self.log.start_progress(total=self.num_iterations * self.batch_size, initial=self.global_step,
                                desc=f"{args.env_id}", num_iterations=self.num_iterations)
        self.ready = True
        if ckpt:
            self._say_resumed()

    def _write_args_json(self) -> None:
        game_settings = self.rollouts.game_settings  # Godot games: what the instances were given
        self.command = train_command(asdict(self.args), self.args_class)
        write_args_json(self.run_dir, self.args, {
            "num_envs_resolved": self.num_envs, "batch_size": self.batch_size, "minibatch_size": self.minibatch_size,
            "num_iterations": self.num_iterations, **({"game_settings": game_settings} if game_settings else {}),
            # the path engine_actors.decide took (a resume without the flag decides again, by the same rule)
            **({"in_engine": getattr(self.rollouts, "in_engine", False)} if isinstance(self.game, GodotGame) else {}),
            "command": self.command, **tracked_fields(self.tracked)})

    def _clone(self):
        """--demos, behavioural cloning (cloning.py): pre-training (not on --resume), then PPO's auxiliary loss.
        Returns (the auxiliary loss or None, the clone's fit to the demonstrations)."""
        args, first, aux, fit = self.args, self.first, None, {}
        if self.policy_set is not None:
            raise TrainError(refusal("policies/demos", env_id=args.env_id, count=len(self.learners),
                                     names=", ".join(self.policy_set.names)))
        demos = load_demos(args.demos, first.agent.obs_dim, self.act_space, declared_actions(self.rollouts.env_info),
                           args.env_id, parsed=self.demo_files)
        print(f"demonstrations: {demos.summary()}", flush=True)
        if not self.ckpt:
            cloning.seed_normalizer(first.normalizer, demos)
            try:
                fit = cloning.pretrain(first.agent, first.normalizer, demos, args, args.seed)
            except cloning.CloningDiverged as e:  # nothing is saved: a NaN clone never reaches model.pt
                raise TrainError(f"behavioural cloning diverged: {e}; nothing was saved. Lower --bc-learning-rate "
                                 f"(now {args.bc_learning_rate:g}) or check the demonstrations' values") from None
            print("behavioural cloning: " + ", ".join(f"{k.split('/')[1]} {v:.3f}" for k, v in fit.items()))
        if args.bc_coef > 0:
            aux = cloning.CloningLoss(first.agent, first.normalizer, demos, args, args.seed)
        return aux, fit

    def _open_log(self, fit) -> None:
        """TensorBoard, episodes.csv, progress (a resumed run drops what was logged after its checkpoint)."""
        first, policy_set, schedule = self.first, self.policy_set, self.schedule
        self.log = RunLog(self.run_dir, self.global_step, resumed=bool(self.ckpt), hyperparameters={
            **asdict(self.args), "num_envs": self.num_envs, "batch_size": self.batch_size,
            "minibatch_size": self.minibatch_size, "norm_obs": first.normalizer.norm_obs,
            "norm_reward": first.normalizer.norm_reward, **policy_table(self.learners, policy_set)},
            policies=None if policy_set is None else policy_set.names,
            columns=schedule.columns() if schedule else ())
        self.writer = self.log.writer
        for tag, value in fit.items():  # the clone's fit to the demonstrations, before PPO
            self.writer.add_scalar(tag, value, self.global_step)

    def _say_resumed(self) -> None:
        ckpt, step, batch_size = self.ckpt, self.global_step, self.batch_size
        print(f"resuming {self.run_dir} at global step {step} (update {self.start_update}/{self.num_iterations})",
              flush=True)
        saved_batch = ckpt.get("batch_size") or (step // ckpt["update"] if ckpt["update"] else None)
        if saved_batch not in (None, batch_size):
            left = self.num_iterations - self.start_update
            say(f"note: the checkpoint's run collected {saved_batch} steps per update, this one {batch_size} "
                f"({self.num_envs} envs x {self.args.num_steps} steps): the {left} updates left "
                f"end at global step {step + left * batch_size} of --total-timesteps {self.args.total_timesteps}")

    # ---- the loop -----------------------------------------------------------------------------------------------------
    def loop(self) -> None:
        """ppo.iterations, every policy's in lockstep; what each update leaves: its episodes (TensorBoard,
        episodes.csv), the curriculum's next lesson, the scalars, each policy's behaviour (its actions' histograms
        and truncated share: behaviour.py), a checkpoint every --checkpoint-every, progress."""
        args, learners, first, schedule, writer = self.args, self.learners, self.first, self.schedule, self.writer
        rollouts, log, batch_size, num_envs = self.rollouts, self.log, self.batch_size, self.num_envs
        updates = lockstep([ppo.iterations(args, ln.agent, ln.optimizer, ln.rollouts, ln.buf, ln.normalizer, ln.bonus,
                                           self.aux if ln is first else None, num_iterations=self.num_iterations,
                                           start=self.start_update, global_step=self.global_step,
                                           time_share=self.clock.share)
                            for ln in learners])
        start_time, start_step = self.start_time, self.start_step
        self.timing, since = TimeShares(), time.perf_counter()
        behaviours = [Behaviour(ln.rollouts.single_action_space, ln.rollouts.env_info, ln.tag, say) for ln in learners]
        self.diagnoses = {ln.name: Diagnosis(ln.tag, say, args.ent_coef, ln.normalizer.norm_reward,
                                             log.recent[ln.tag[:-1]], args.learning_rate, args.update_epochs)
                          for ln in learners}
        if self.clock.spent():  # --resume of a run whose --max-seconds are spent: straight to its end
            print(self.clock.end_line(self.global_step, args.total_timesteps), flush=True)
            return
        try:
            for its in updates:
                self.global_step += batch_size
                global_step = self.global_step
                for ln in learners:  # episodic return/length -> TensorBoard and episodes.csv
                    for t, infos in ln.buf.episodes:
                        log.record_episodes(infos, global_step - batch_size + (t + 1) * num_envs, ln.tag,
                                            schedule.episodes(infos) if schedule else None)
                if schedule is not None:  # the curriculum: a lesson whose criterion is met moves on
                    changes = schedule.advance(global_step)
                    for line in changes:
                        print(line, flush=True)
                    if changes:
                        rollouts.set_env_params(schedule.message())
                sps = int((global_step - start_step) / max(time.time() - start_time, 1e-9))
                perf = perf_scalars(its)
                since, other_s = time.perf_counter(), self.timing.add(perf, time.perf_counter() - since, first.buf)
                tags = {**perf, "perf/other_s": other_s, "charts/SPS": sps, **rollouts.scalars(),
                        **(schedule.scalars() if schedule else {})}
                for ln, it in zip(learners, its):  # each policy's own numbers, under its name when there are several
                    tags.update({ln.tag + k: v for k, v in it.scalars.items() if not k.startswith("perf/")})
                for tag, value in tags.items():
                    writer.add_scalar(tag, value, global_step)
                for ln, it, behaviour in zip(learners, its, behaviours):  # diagnosis.py: when it does not learn
                    behaviour.log(writer, ln.buf, global_step)
                    self.diagnoses[ln.name].update(it.scalars, self.clock.run_share(it.iteration, self.num_iterations))

                # ---- CHECKPOINT (episodes.csv flushed first) and progress ------------------------------------------
                self.done_step, self.done_update = global_step, its[0].iteration
                out_of_time = self.clock.update_done()  # --max-seconds: no time left for another update
                log.flush_episodes()
                if args.checkpoint_every and self.done_update % args.checkpoint_every == 0:
                    writer.flush()
                    self.checkpoint(self.run_dir / CHECKPOINT_NAME, global_step, self.done_update)
                    self.saved_step = global_step
                log.progress(global_step, self.done_update, sps, self.evals.after_update(global_step, tags))  # --eval-every
                self.diagnoses[first.name].evaluations_so_far(self.evals.history, self.evals.score)
                if out_of_time:
                    print(self.clock.end_line(global_step, args.total_timesteps), flush=True)
                    break
        except NonFiniteEnvData as e:
            raise TrainError(
                f"{args.env_id} returned NaN/inf {e.what} at global step "
                f"{self.done_step + (e.t + 1) * num_envs}: fix the env's observation/reward code ({self.checkpoint_note()})"
            ) from None
        except ppo.NonFiniteLoss as e:  # nothing of that update is saved: the model on disk stays finite
            raise TrainError(
                f"{e} in the update to global step {self.done_step + batch_size}; {self.checkpoint_note()}. Lower "
                f"--learning-rate{' or --bc-coef' if e.aux_loss is not None else ''}, turn on --norm-obs / "
                f"--norm-reward or check the env's reward scale, then {'--resume' if self.saved_step is not None else 'train anew'}"
            ) from None

    # ---- finish -------------------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """The end: final checkpoint and model, the deterministic evaluation, the learning curve, --capture-video."""
        args, run_dir, step = self.args, self.run_dir, self.global_step
        self.log.close_progress()
        if self.timing.updates:
            group_size = self.num_envs // max(1, self.first.buf.group_steps // args.num_steps)
            print(self.timing.summary(self.batch_size, group_size), flush=True)
        self.checkpoint(run_dir / CHECKPOINT_NAME, step, self.done_update)
        self.saved_step = step
        self.checkpoint(run_dir / MODEL_NAME, step, self.done_update)
        self.evals.finish(step)  # --eval-every: the last one, and RUN_DIR/best/
        self.diagnoses[self.first.name].evaluations_so_far(self.evals.history, self.evals.score)
        eval_mean = self.evaluate() if args.eval_episodes else None
        self.log.plot(eval_mean)
        if args.capture_video and isinstance(self.game, GodotGame):
            record_final_video(run_dir, self.game, args.seed, args.connect_timeout)
        print(f"run folder: {run_dir}  (model: {run_dir / MODEL_NAME}; tensorboard --logdir {run_dir.parent})")
        self.evals.say_share(time.time() - self.start_time)  # --eval-every: the run's last line, their share of its time

    def evaluate(self) -> Optional[float]:
        """The deterministic policy (argmax / mean action) over --eval-episodes episodes, said and logged; with several
        policies, every policy plays and each one's episodes are counted apart. Returns the mean return of a game of
        one policy."""
        args, step = self.args, self.global_step
        acts = {ln.name: LoadedAgent(ln.agent, ln.normalizer, ln.rollouts.single_observation_space,
                                     ln.rollouts.single_action_space, args.env_id, step).act for ln in self.learners}
        if self.policy_set is None:
            results = {None: self.rollouts.evaluate(acts[None], args.eval_episodes, seed=eval_seed(args.seed))}
        else:
            results = self.policy_set.evaluate(acts, args.eval_episodes, seed=eval_seed(args.seed))
        means = {}
        for ln in self.learners:
            returns = results[ln.name]
            if not returns:
                continue
            mean = means[ln.name] = float(np.mean(returns))
            self.writer.add_scalar(f"{ln.tag}eval/episodic_return", mean, step)
            who = "deterministic policy" if self.policy_set is None else f"policy {ln.name!r}, deterministic"
            print(f"eval: {who}, {len(returns)} episodes: mean return {mean:.2f} +- "
                  f"{np.std(returns):.2f} (min {min(returns):.1f}, max {max(returns):.1f})")
            self.diagnoses[ln.name].evaluated(mean)  # a deterministic policy far below its training episodes
        return means.get(None)  # the learning curve's line: a game of one policy only

    # ---- checkpoints and the policy file ------------------------------------------------------------------------------
    def checkpoint(self, path, step, update, folder=None) -> None:  # folder: an evaluation's snapshot (evaluation.py)
        args, first, learners = self.args, self.first, self.learners
        with signals_deferred():  # a signal during torch.save is raised after it (torch would garble it)
            curriculum_state = self.schedule.state_dict() if self.schedule else None
            if self.policy_set is None:
                save_checkpoint(path, agent=first.agent, optimizer=first.optimizer, normalizer=first.normalizer,
                                args=args, global_step=step, update=update, observation_space=self.obs_space,
                                action_space=self.act_space, env_info=self.env_info, rnd=first.bonus,
                                batch_size=self.batch_size,
                                rollouts=self.rollouts.state_dict() if args.self_play else None,
                                curriculum=curriculum_state, clock=self.clock.state_dict())
                if args.self_play and folder is None:  # written: the pool's files only older checkpoints list can go
                    self.rollouts.checkpoint_saved()
            else:
                save_checkpoint(path, agent=None, optimizer=None, normalizer=None, args=args, global_step=step,
                                update=update, observation_space=None, action_space=None, env_info=self.env_info,
                                batch_size=self.batch_size, policies={ln.name: policy_state(ln) for ln in learners},
                                curriculum=curriculum_state, clock=self.clock.state_dict())
        if self.env_info is not None:  # keep RUN_DIR/policy.json (the in-engine player's weights) up to date
            self.write_policy(path, step, update, folder or self.run_dir)

    def write_policy(self, path, step, update, folder=None) -> None:
        args, env_info, first = self.args, self.env_info, self.first
        source = policy_source(path, global_step=step, update=update, trained_env=args.env_id, seed=args.seed,
                               command=self.command, env_path=args.env_path)
        if self.policy_set is None:
            write_policy_or_warn((folder or self.run_dir) / POLICY_NAME, lambda: game_policy(
                first.agent, first.normalizer, self.act_space, env_info, env_id=args.env_id, source=source,
                where=str(path)))
            return
        # RUN_DIR/policy.json, the bundle of every policy (play, --watch), and RUN_DIR/policies/<name>.json each
        write_policies_or_warn(folder or self.run_dir, lambda: [game_policy(
            ln.agent, ln.normalizer, ln.rollouts.single_action_space, ln.rollouts.env_info, env_id=args.env_id,
            source=source, where=f"{path} (policy {ln.name!r})", policy_name=ln.name) for ln in self.learners])

    def checkpoint_note(self) -> str:
        if self.saved_step is None:
            return "no checkpoint was written yet"
        return f"the last checkpoint {self.run_dir / CHECKPOINT_NAME} (global step {self.saved_step}) is intact"

    # ---- on a crash, and the end either way ---------------------------------------------------------------------------
    def on_crash(self, e) -> tuple[int, str]:
        """The checkpoint of the last completed update (once training started), the progress closed and the learning
        curve drawn; returns (exit status, what to say: crash.stop_message)."""
        saved, save_error = False, None
        if self.ready and is_disk_full(e) and self.saved_step == self.done_step:
            saved = True  # the checkpoint on disk is of the last completed update: nothing to write on a full disk
        elif self.ready:
            try:
                self.checkpoint(self.run_dir / CHECKPOINT_NAME, self.done_step, self.done_update)
                saved = True
            except Exception as error:  # a full disk, most likely: said with what was kept
                save_error = error
        crash.quiet_closed_stdout()
        if self.log is not None:
            crash.best_effort(self.log.close_progress)
            if saved:
                crash.best_effort(self.log.plot)
        return crash.stop_message(e, self.run_dir, ready=self.ready, saved=saved, save_error=save_error,
                                  saved_step=self.saved_step, done_step=self.done_step, resumed=bool(self.ckpt))

    def close(self) -> None:
        if self.evals is not None:
            self.evals.close()
        if self.watcher is not None:
            self.watcher.close()
        if self.log is not None:
            self.log.close()
        self.rollouts.close()
        finish_tracking(self.tracked, self.run_dir, self.stopped_by)  # after the writer's close: its last scalars
        self.lock.release()


def record_final_video(run_dir, game, seed, connect_timeout=DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """--capture-video of a Godot game: the run's policy.json played in the windowed export, as RUN_DIR/videos/final.mp4
    (a failed recording is reported; the trained model is saved already)."""
    out = Path(run_dir) / VIDEO_DIR / "final.mp4"
    try:
        record(Path(run_dir) / POLICY_NAME, out, game, seed=seed, seconds=FINAL_VIDEO_SECONDS,
               connect_timeout=connect_timeout)
    except (PlaybackError, GameError, InstanceStartError, OutputError) as e:
        say(f"warning: --capture-video: no video ({one_line(e)})")
    except OSError as e:
        say(f"warning: --capture-video: no video ({write_error(out, e)})")
