"""--track: the run's Weights & Biases run (CleanRL's), started before the TensorBoard writer so that W&B syncs its
scalars, given the run's videos at the end, and finished however the run ends.

    tracked = start_tracking(args, run_dir, resumed)   # None without --track; wandb.init(dir=RUN_DIR): RUN_DIR/wandb/
    write_args_json(..., {**tracked_fields(tracked)})  # the W&B run's id, which --resume continues
    finish_tracking(tracked, run_dir, stopped_by)      # the videos, then wandb.finish(exit_code=...)

`WANDB_MODE=offline` keeps the run in RUN_DIR/wandb/offline-run-*/ (`wandb sync` uploads it later).
"""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from python_trainer.base.errors import Fault, one_line, say
from python_trainer.base.flags import GoesWith, flag
from python_trainer.base.signals import signum_of
from python_trainer.run.learners import VIDEO_DIR
from python_trainer.run.run_folder import ARGS_JSON, TrainError

WANDB_DIR = "wandb"  # RUN_DIR/wandb/: W&B's files (wandb.init(dir=RUN_DIR) makes it)
RUN_ID_KEY = "wandb_run_id"  # args.json's entry: the W&B run that --resume continues
_TRACKED = GoesWith("track", "tracking with Weights & Biases", "--track")


@dataclass
class TrackArgs:
    track: bool = False
    """if toggled, this experiment will be tracked with Weights & Biases (its files in RUN_DIR/wandb/;
    WANDB_MODE=offline keeps it on disk for `wandb sync`; --resume continues the same W&B run)"""
    wandb_project_name: str = flag("cleanRL", goes_with=_TRACKED)
    """the wandb's project name"""
    wandb_entity: Optional[str] = flag(None, goes_with=_TRACKED)
    """the entity (team) of wandb's project"""


class TrackingFailed(Fault, TrainError):
    """Weights & Biases did not start (no API key, no network): a fault (status 1), before training."""


@dataclass
class TrackedRun:
    run: object  # wandb's Run
    run_id: str


def start_tracking(args, run_dir: Path, resumed: bool) -> Optional[TrackedRun]:
    """wandb.init as CleanRL's ppo.py calls it, with its files in RUN_DIR/wandb/; a resumed run continues the W&B run
    its args.json names (resume="allow": the same run, or a new one under that id when W&B has none). None without
    --track. A TrainError in one line when wandb is missing (status 2) or does not start (status 1)."""
    if not args.track:
        return None
    try:
        import wandb
        import wandb.integration.tensorboard
    except ImportError as e:
        raise TrainError(f"--track needs the wandb package ({one_line(e)}): pip install wandb, or drop --track") from None
    run_id = (_saved_run_id(run_dir) if resumed else None) or _new_run_id()
    try:
        # sync_tensorboard's own patch would also upload the event files (save=True): wandb's symlinks to them land
        # in RUN_DIR/wandb/, inside the logdir it watches, and it syncs each scalar again through them; and without
        # a root_logdir it waits 10 s at the end to guess one
        if not wandb.patched["tensorboard"]:
            wandb.integration.tensorboard.patch(save=False, root_logdir=str(run_dir))
        # monitor_gym stays off: its patch of gymnasium 1.0's RecordVideo fails at close ('enabled'); the videos are
        # logged at the end instead (finish_tracking)
        run = wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True,
                         config=asdict(args), name=run_dir.name, monitor_gym=False, save_code=True,
                         dir=str(run_dir), id=run_id, resume="allow", settings=wandb.Settings(quiet=True))
    except KeyboardInterrupt:  # a signal while W&B starts: what it started ends now, before the stop is said
        _unpatch()
        _teardown(wandb)
        raise
    except Exception as e:  # no API key without a terminal, no network, a bad entity...
        _unpatch()
        _teardown(wandb)  # its service process ends now, not at exit
        raise TrackingFailed(f"--track: Weights & Biases did not start ({type(e).__name__}: {one_line(e)[:300]}); "
                             "run `wandb login`, set WANDB_MODE=offline, or drop --track") from None
    return TrackedRun(run, run_id)


def tracked_fields(tracked: Optional[TrackedRun]) -> dict:
    """args.json's entries of the W&B run (none without --track)."""
    return {} if tracked is None else {RUN_ID_KEY: tracked.run_id}


def finish_tracking(tracked: Optional[TrackedRun], run_dir: Path, stopped_by: Optional[BaseException]) -> None:
    """The run's videos (RUN_DIR/videos/*.mp4) logged, then the W&B run finished with the run's exit code (0, 1, or
    128 + N after signal N), so wandb's service process ends with it. A failure here is said, not raised: the run's
    own files are saved already."""
    if tracked is None:
        return
    import wandb

    code = 0 if stopped_by is None else 1
    if isinstance(stopped_by, KeyboardInterrupt):
        code = 128 + signum_of(stopped_by)
    try:
        videos = sorted((Path(run_dir) / VIDEO_DIR).glob("*.mp4"))
        if videos and code == 0:
            tracked.run.log({f"videos/{path.stem}": wandb.Video(str(path), format="mp4") for path in videos})
    except Exception as e:
        say(f"warning: --track: the videos were not logged to W&B ({one_line(e)})")
    try:
        tracked.run.finish(exit_code=code)
    except Exception as e:
        say(f"warning: --track: the W&B run did not finish cleanly ({one_line(e)}); its files are in "
            f"{Path(run_dir) / WANDB_DIR}")
    finally:
        _unpatch()


def _saved_run_id(run_dir: Path) -> Optional[str]:
    try:
        value = json.loads((Path(run_dir) / ARGS_JSON).read_text()).get(RUN_ID_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _new_run_id() -> str:
    """A W&B run id as wandb makes them: 8 lowercase letters and digits."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def _teardown(wandb) -> None:
    try:
        wandb.teardown()
    except Exception:
        pass


def _unpatch() -> None:
    """Take wandb's TensorBoard patch off again (a later run in this process patches afresh)."""
    try:
        import wandb.integration.tensorboard

        wandb.integration.tensorboard.unpatch()
    except Exception:
        pass
