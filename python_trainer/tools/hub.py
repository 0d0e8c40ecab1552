"""The Hugging Face Hub's side of `godot-ppo package`: the repository id's check, the model card (README.md, whose
YAML front matter holds the evaluation as a `model-index`, written by huggingface_hub's `metadata_eval_result` and
`metadata_save` as the course's `package_to_hub` writes it), and the upload (`HfApi.create_repo` + `upload_folder`).

    check_repo_id("USER/ppo-ball_chase")
    write_model_card(folder, env_id="ball_chase", evaluation={...}, hyperparameters={...}, files={...})
    push(folder, "USER/ppo-ball_chase")      # the token: HF_TOKEN, or `huggingface-cli login`'s
"""

from __future__ import annotations

import json
from pathlib import Path

from python_trainer.base.errors import Fault, UserError, one_line

CARD_NAME = "README.md"
LIBRARY_TAG = "godot-ppo"  # the card's tag that marks a folder this command wrote (so it may replace it)
TAGS = ["ppo", "deep-reinforcement-learning", "reinforcement-learning", "custom-implementation", "deep-rl-course",
        "godot", LIBRARY_TAG]
COMMIT_MESSAGE = "Push agent to the Hub"  # the course's


class HubError(UserError):
    """A repository id the Hub would refuse (status 2)."""


class UploadFailed(Fault, HubError):
    """An upload to the Hub that failed (no network, no token): a fault (status 1); the folder is complete."""


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` as the Hub takes a model's: USER/NAME (letters, digits, '-', '_', '.'); HubError otherwise."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    fix = "give --repo-id USER/NAME, e.g. --repo-id your-name/ppo-ball_chase"
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HubError(f"--repo-id {repo_id!r}: a Hub model's id is USER/NAME: {fix}")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise HubError(f"--repo-id {repo_id!r}: the Hub refuses it ({one_line(e)[:200]}): {fix}") from None
    return repo_id


def card_metadata(env_id: str, mean: float, std: float) -> dict:
    """The card's YAML front matter: the tags, and the evaluation as a model-index (the course's generate_metadata)."""
    from huggingface_hub import metadata_eval_result

    evaluation = metadata_eval_result(
        model_pretty_name="PPO", task_pretty_name="reinforcement-learning", task_id="reinforcement-learning",
        metrics_pretty_name="mean_reward", metrics_id="mean_reward", metrics_value=f"{mean:.2f} +/- {std:.2f}",
        dataset_pretty_name=env_id, dataset_id=env_id)
    return {"tags": [env_id, *TAGS], **evaluation}


def write_model_card(folder: Path, *, env_id: str, repo_id: str, evaluation: dict, hyperparameters: dict,
                     files: dict) -> Path:
    """FOLDER/README.md: what the agent is, its evaluation, the folder's files (``files``: name -> what), how to play
    it, and the hyperparameters; the metadata (card_metadata) in its front matter."""
    from huggingface_hub import metadata_save

    mean, std, n = evaluation["mean_reward"], evaluation["std_reward"], evaluation["n_evaluation_episodes"]
    rows = "\n".join(f"| `{name}` | {what} |" for name, what in files.items())
    params = "\n".join(f"| {key} | {_cell(value)} |" for key, value in hyperparameters.items())
    play = (f"godot-ppo play policy.json --env {env_id}    # the game plays the policy by itself, in its window"
            if "policy.json" in files else
            "from python_trainer.variants.trained_agent import load_agent\n"
            "actions = load_agent('model.pt').act(observations)    # a gymnasium task's observations")
    text = f"""# PPO agent playing {env_id}

This is a trained model of a PPO agent playing **{env_id}**, trained with godot-ppo (a PPO in the shape of CleanRL's
`ppo.py`, for Godot games). Its Hub repository: `{repo_id}`.

## Evaluation

mean reward **{mean:.2f} +/- {std:.2f}** over {n} episodes of the deterministic policy ({evaluation['where']}),
seed {evaluation['seed']} (`results.json`).

## Files

| file | what |
| --- | --- |
{rows}

## Usage

```
{play}
```

## Hyperparameters

| flag | value |
| --- | --- |
{params}
"""
    path = Path(folder) / CARD_NAME
    path.write_text(text, encoding="utf-8")
    metadata_save(path, card_metadata(env_id, mean, std))
    return path


def _cell(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("|", "\\|").replace("\n", " ")


def is_package(folder: Path) -> bool:
    """Whether ``folder`` holds a package this command wrote (its card carries the godot-ppo tag)."""
    from huggingface_hub import metadata_load

    try:
        return LIBRARY_TAG in ((metadata_load(Path(folder) / CARD_NAME) or {}).get("tags") or [])
    except Exception:  # no card, or not one of ours
        return False


def push(folder: Path, repo_id: str, commit_message: str = COMMIT_MESSAGE) -> str:
    """Create the Hub repository when missing and upload the folder (the course's package_to_hub); returns the
    commit's URL. HubError in one line when it fails (no network, no token, a refused id): the folder stays whole."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id=repo_id, private=False, exist_ok=True)
        info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), path_in_repo="",
                                 commit_message=commit_message)
    except Exception as e:  # a connection refused or offline mode, a 401 without a token, a 403...
        raise UploadFailed(f"--push: the upload to the Hub failed ({type(e).__name__}: {one_line(e)[:300]}); "
                           f"{folder} is complete: log in (`huggingface-cli login` or HF_TOKEN) and check the network, "
                           f"then push it with `huggingface-cli upload {repo_id} {folder}`") from None
    return str(getattr(info, "commit_url", None) or f"https://huggingface.co/{repo_id}")
