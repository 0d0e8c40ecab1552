"""The policy file: a trained actor as JSON that the game runs by itself in plain GDScript
(godot_project/addons/rl_sync/policy_runner.gd reads it).

    {"format": "godot-ppo-policy", "version": 3, "env": "ball_chase",
     "policy_name": "chaser",                                   # optional (version 3): the agents' policy_name it plays
     "observation_size": 12,
     "action_keys": [{"key": "move", "action_type": "continuous", "size": 2}],   # network-output order
     "action_rule": "clipped_mean" | "argmax" | "per_key",
     "obs_normalization": null | {"mean": [...], "var": [...], "epsilon": 1e-8, "clip": 10.0},
     "layers": [{"weight": [[...] x in] x out, "bias": [...], "activation": "tanh" | "relu" | "sigmoid" | "linear"}],
     "lstm": null | {"after_layer": k, "input_size": I, "hidden_size": H,     # a recurrent policy (--lstm): layers
                     "weight_ih": 4H x I, "weight_hh": 4H x H, "bias": 4H},  # [0, k) encode, the LSTM (one state
                                                                              # per agent), then layers [k, ...)
     "source": {...}}                                                            # informational only

A camera policy (version 4) also holds "image" (its observation key, [H, W, C], the frame stack K) and "cnn" (the
encoder's convolutions and dense layer, engine/policy_cnn.py); its "observation_size" counts the vector keys' values
alone, and its "layers" take cat([the CNN's features, the normalised vector]).

A bundle (version 3) holds the policies of a game with several (one network per agents' policy_name):

    {"format": "godot-ppo-policy", "version": 3, "env": "tag",
     "policies": [{...a single policy as above, with its "policy_name"...}, ...],   # distinct names, the same env
     "source": {...}}

A single policy without "policy_name" (versions 1 and 2, a game trained with one policy) drives every agent; a named
one drives the agents whose policy_name is its name. The trainer writes RUN_DIR/policy.json (one policy, or the bundle)
and, for several policies, RUN_DIR/policies/<name>.json as well (write_policies_or_warn).

Weights are float32 in PyTorch; they are written with the shortest decimal that reads back as the same float32
(numpy's float32 repr), so the file is small and the GDScript forward pass matches PyTorch to ~1e-6.
Normalisation statistics are float64 and written with Python's repr (exact).

Built from what is in memory (`game_policy`: a trained agent's networks, its normaliser's statistics, the game's
action keys): the train command writes it at every checkpoint, export-policy (tools/policy_export.py) builds it
from a checkpoint file. Imports neither.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from python_trainer.base.errors import UserError
from python_trainer.base.files import write_atomic
from python_trainer.engine.policy_cnn import cnn_entries, vector_statistics
from python_trainer.engine.policy_format import (  # noqa: F401  (FORMAT and VERSION: read from here too)
    FORMAT, LOG_STD, MAX_SIZE, MLP_VERSION, READABLE_VERSIONS, VERSION, file_size_problem, format_problem, is_bundle,
    size_problem, version_needed,
)

# torch and gymnasium are imported where they are used: in_engine imports this module to read policy files and
# should not pay for them.

POLICY_NAME = "policy.json"
# RUN_DIR/policies/<name>.json: a game with several policies also gets each policy as a file of its own.
POLICIES_DIR = "policies"
MAX_FILE_STEM = 64  # a policy name's file in it: at most this many characters before ".json" (and a hash if cut)
class PolicyFileError(UserError):
    """A policy file that cannot be built, read or played (in_engine.PlaybackError is this class), said in one line
    that names the fix."""


def f32(x) -> float:
    """The shortest decimal that reads back as the same float32, as a Python float (json writes it short)."""
    return float(str(np.float32(x)))


def _key_list(keys) -> str:
    """[(key, kind, size)] as "[jump (discrete, 2), move (continuous, 2)]" for error messages."""
    return "[" + ", ".join(f"{key} ({kind}, {size})" for key, kind, size in keys) + "]"


def action_keys(game_spaces, obs_dim: int, action_space, where: str, game: str = "?") -> list[dict]:
    """[{key, action_type, size}] in the order of the network's outputs, checked against the actor's spaces.

    ``game_spaces`` is ``spaces.spaces_from_env_info(env_info)`` of the game that will run the policy:
    (observation space, action space, observation layout, action kind, action layout [(key, size)]).
    The network's outputs (agent.action_heads): the continuous keys' means, then the discrete keys' logits, each kind in
    sorted key order (the game's layout is sorted, so a space of one kind keeps it).
    """
    import gymnasium as gym

    obs_space, act_space, _obs_layout, kind, act_layout = game_spaces
    if int(obs_space.shape[0]) != obs_dim:
        raise PolicyFileError(f"{where}: the actor takes {obs_dim} observations, but {game} gives {obs_space.shape[0]}")
    if kind == "hybrid":
        game_keys = [(key, "discrete" if isinstance(act_space[key], gym.spaces.Discrete) else "continuous", size)
                     for key, size in act_layout]
    else:
        game_keys = [(key, "discrete" if kind != "continuous" else "continuous", size) for key, size in act_layout]
    if isinstance(action_space, gym.spaces.Discrete) and int(action_space.start) != 0:
        raise PolicyFileError(f"{where}: Discrete actions starting at {action_space.start} cannot be played in the engine")
    if isinstance(action_space, gym.spaces.Box) and not (np.all(action_space.low == -1.0) and np.all(action_space.high == 1.0)):
        raise PolicyFileError(f"{where}: in-engine playback clips actions to [-1, 1]; this action space is {action_space}")
    if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.Dict)):
        raise PolicyFileError(f"{where}: action space {action_space} cannot be played in the engine")
    if action_space != act_space:
        raise PolicyFileError(f"{where}: the actor's action space is {action_space}, but {game}'s action keys "
                              f"{_key_list(game_keys)} make {act_space}")
    ordered = sorted(game_keys, key=lambda k: k[1] != "continuous")  # stable: sorted by key within each kind
    return [{"key": key, "action_type": kind, "size": int(size)} for key, kind, size in ordered]


def with_log_std(keys: list[dict], log_std) -> list[dict]:
    """The keys with each continuous key's log-std (``log_std``: the agent's state-independent parameter, one value per
    continuous output, in the keys' order; None: discrete keys only), what --policy_sample draws with (version 5)."""
    if log_std is None:
        return keys
    values, offset, out = [f32(x) for x in np.asarray(log_std.detach(), np.float32).reshape(-1).tolist()], 0, []
    for key in keys:
        if key["action_type"] == "continuous":
            key = {**key, LOG_STD: values[offset: offset + key["size"]]}
            offset += key["size"]
        out.append(key)
    return out


def action_rule(keys: list[dict]) -> str:
    """"clipped_mean" (every key continuous), "argmax" (every key discrete) or "per_key" (both kinds: the clipped mean
    for each continuous key, the argmax for each discrete one)."""
    kinds = {k["action_type"] for k in keys}
    return "per_key" if len(kinds) > 1 else ("argmax" if kinds == {"discrete"} else "clipped_mean")


def actor_layers(actor, where: str) -> list[dict]:
    """The actor's Linear layers with their activations (Tanh folded into the Linear before it)."""
    import torch
    import torch.nn as nn

    layers = []
    with torch.no_grad():
        for module in actor:
            if isinstance(module, nn.Linear):
                w = module.weight.detach().cpu().numpy().astype(np.float32)
                b = module.bias.detach().cpu().numpy().astype(np.float32)
                i = len(layers)
                if not np.isfinite(w).all():
                    raise PolicyFileError(
                        f"{where}: the actor's layer {i} holds {int((~np.isfinite(w)).sum())} NaN/inf weights; this model "
                        "cannot be played (training diverged: use an earlier checkpoint or retrain with a lower learning rate)"
                    )
                if not np.isfinite(b).all():
                    raise PolicyFileError(f"{where}: the actor's layer {i} holds NaN/inf biases; this model cannot be played")
                layers.append({
                    "weight": [[f32(x) for x in row] for row in w.tolist()],
                    "bias": [f32(x) for x in b.tolist()],
                    "activation": "linear",
                })
            elif isinstance(module, nn.Tanh):
                if not layers or layers[-1]["activation"] != "linear":
                    raise PolicyFileError(f"{where}: Tanh without a Linear layer before it; cannot export {actor}")
                layers[-1]["activation"] = "tanh"
            else:
                raise PolicyFileError(f"{where}: the actor holds {type(module).__name__}; only Linear and Tanh layers can be exported")
    if not layers:
        raise PolicyFileError(f"{where}: the actor has no Linear layer")
    return layers


def obs_normalization(stats: Optional[dict], where: str) -> Optional[dict]:
    """``{"mean", "var", "epsilon", "clip"}`` (arrays or lists; None: observations are not normalised) as JSON values."""
    if stats is None:
        return None
    mean = np.asarray(stats["mean"], np.float64)
    var = np.asarray(stats["var"], np.float64)
    if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
        raise PolicyFileError(f"{where}: the observation normalisation statistics hold NaN/inf; this model cannot be played")
    return {"mean": mean.tolist(), "var": var.tolist(), "epsilon": float(stats["epsilon"]), "clip": float(stats["clip"])}


def policy_source(checkpoint_path, *, global_step, update, trained_env, seed, command, env_path=None) -> dict:
    """The file's informational "source": which run/checkpoint, how far it trained, how to train it again."""
    checkpoint_path = Path(checkpoint_path)
    return {
        "run": checkpoint_path.resolve().parent.name,
        "checkpoint": checkpoint_path.name,
        "global_step": int(global_step),
        "update": int(update),
        "trained_env": trained_env,
        "seed": seed,
        "command": command,
        "env_path": env_path,  # the export it was trained with (None: this repository's); `play` runs it there
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def lstm_weights(weights: dict, after_layer: int, where: str) -> dict:
    """recurrent.LSTMCore.export_weights()'s dict as the file's "lstm" entry (float32 values, checked finite)."""
    out = {"after_layer": int(after_layer), "input_size": int(weights["input_size"]),
           "hidden_size": int(weights["hidden_size"])}
    for name in ("weight_ih", "weight_hh", "bias"):
        values = np.asarray(weights[name], np.float32)
        if not np.isfinite(values).all():
            raise PolicyFileError(f"{where}: the LSTM's {name} holds NaN/inf values; this model cannot be played")
        out[name] = [[f32(x) for x in row] for row in values.tolist()] if values.ndim == 2 else [f32(x) for x in values]
    return out


def policy_dict(actor, obs_stats: Optional[dict], keys: list[dict], *, env: str, source: dict, where: str,
                encoder=None, lstm: Optional[dict] = None, policy_name: Optional[str] = None, image=None,
                vector_keys: Optional[list] = None) -> dict:
    """The policy file's content for an in-memory actor.

    ``obs_stats``: see obs_normalization; ``keys``: see action_keys; ``where`` names the model in error messages.
    A recurrent policy: ``encoder`` (Linear/Tanh layers before the LSTM), ``lstm`` (LSTMCore.export_weights()).
    A camera policy (cnn_agent.py's policy_parts()): ``encoder`` the CnnEncoder, ``image`` its ImageLayout
    (envs/images.py, with the frame stack); the actor (or, with ``lstm``, the LSTM) takes cat([features, vector]),
    and ``obs_stats`` covers the vector columns (the row's first ``image.start``; a whole row's are cut to them);
    ``vector_keys`` [(key, size)] names those columns for the ONNX inputs (default: one "obs" key).
    ``policy_name``: the agents' policy_name this network plays (None: it plays every agent, as one policy does).
    """
    name = {} if policy_name is None else {"policy_name": _checked_name(policy_name, where)}
    camera = {}
    if image is not None:
        try:
            camera = cnn_entries(encoder, image, vector_keys, f32, where)
        except ValueError as e:
            raise PolicyFileError(str(e)) from None
        encoder, obs_stats = None, vector_statistics(obs_stats, image)  # the LSTM (if any) comes right after the CNN
    norm = obs_normalization(obs_stats, where)
    encoder_layers = actor_layers(encoder, where) if encoder is not None else []
    layers = encoder_layers + actor_layers(actor, where)
    # the first Linear layer's in_features; a camera policy's vector columns
    obs_dim = len(layers[0]["weight"][0]) if image is None else image.start
    return {
        "format": FORMAT,
        "version": version_needed(bool(camera), keys),
        "env": env,
        **name,
        "observation_size": int(obs_dim),
        **({"image": camera["image"], "vector_keys": camera["vector_keys"]} if camera else {}),
        "action_keys": keys,
        "action_rule": action_rule(keys),
        "obs_normalization": norm,
        **({"cnn": camera["cnn"]} if camera else {}),
        "layers": layers,
        "lstm": None if lstm is None else lstm_weights(lstm, len(encoder_layers), where),
        "source": source,
    }


def _checked_name(name, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise PolicyFileError(f"{where}: a policy name must be a non-empty string, got {str(name)[:40]!r}")
    return name


def policy_entries(policy: dict) -> list[dict]:
    """The single policies a file holds: a bundle's entries, or the file itself."""
    return list(policy["policies"]) if is_bundle(policy) else [policy]


def policy_bundle(policies: list[dict], *, env: str, source: dict) -> dict:
    """One file holding several policies (each ``policy_dict``'s content with its ``policy_name``): the engine plays
    each agent with the entry named by the agent's policy_name. PolicyFileError when an entry has no name, two share
    one, or an entry was made for another game."""
    if not isinstance(policies, list) or not policies:
        raise PolicyFileError("a policy bundle needs a non-empty list of policies")
    seen = set()
    for i, entry in enumerate(policies):
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            raise PolicyFileError(f"policy bundle entry {i}: not a policy (policy_dict's content)")
        name = _checked_name(entry.get("policy_name"), f"policy bundle entry {i}")
        if name in seen:
            raise PolicyFileError(f"policy bundle: two entries are named {name!r}; each policy name comes once")
        seen.add(name)
        if entry.get("env") != env:
            raise PolicyFileError(f"policy bundle: the policy {name!r} was made for {entry.get('env')!r}, not {env!r}")
    version = max([MLP_VERSION] + [int(entry.get("version", MLP_VERSION)) for entry in policies])
    return {"format": FORMAT, "version": version, "env": env, "policies": policies, "source": source}


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _policy_lines(policy: dict, indent: str) -> str:
    """A single policy as JSON: one key per line, one line per layer (a CNN's: one per convolution, one for its
    dense layer)."""
    lines = []
    for key, value in policy.items():
        if key == "layers":
            layer_lines = [f"{indent}    {_compact(layer)}" for layer in value]
            lines.append(f'{indent}  "layers": [\n' + ",\n".join(layer_lines) + f"\n{indent}  ]")
        elif key == "cnn" and isinstance(value, dict) and isinstance(value.get("convs"), list):
            convs = ",\n".join(f"{indent}      {_compact(conv)}" for conv in value["convs"])
            parts = [f'{indent}    "convs": [\n{convs}\n{indent}    ]' if k == "convs" else
                     f"{indent}    {json.dumps(k)}: {_compact(v)}" for k, v in value.items()]
            lines.append(f'{indent}  "cnn": {{\n' + ",\n".join(parts) + f"\n{indent}  }}")
        else:
            lines.append(f"{indent}  {json.dumps(key)}: {_compact(value)}")
    return f"{indent}{{\n" + ",\n".join(lines) + f"\n{indent}}}"


def policy_json(policy: dict) -> str:
    """One key per line, one line per layer (a bundle: each entry so, indented); number lists compact. Floats keep
    repr precision (json writes Python's repr)."""
    if not is_bundle(policy):
        return _policy_lines(policy, "") + "\n"
    lines = [f"  {json.dumps(k)}: {_compact(v)}" for k, v in policy.items() if k != "policies"]
    entries = ",\n".join(_policy_lines(entry, "    ") for entry in policy["policies"])
    lines.append('  "policies": [\n' + entries + "\n  ]")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def game_policy(agent, normalizer, action_space, env_info: dict, *, env_id: str, source: dict, where: str,
                policy_name: Optional[str] = None) -> dict:
    """The policy file's content for a trained agent in memory (agent.Agent or recurrent.RecurrentAgent) and its
    normaliser, to be played in the Godot game whose ``env_info`` is given (its action keys name the outputs).
    ``policy_name``: see policy_dict; given, the agent is checked against that policy's agents only (policy_env_info).
    Raises PolicyFileError when the agent cannot be played in the engine (e.g. NaN weights)."""
    from python_trainer.envs.game import GameError  # here, so that reading a policy file needs no gymnasium
    from python_trainer.envs.spaces import policy_env_info, spaces_from_env_info

    if policy_name is not None:
        try:
            env_info = policy_env_info(env_info, policy_name)
        except GameError as e:  # no agent plays it: the policy file cannot be built
            raise PolicyFileError(str(e)) from None

    parts = agent.policy_parts()
    image = parts.get("image")  # a camera policy: the game's row holds one frame, the agent's the K stacked
    obs_dim = agent.obs_dim if image is None else image.start + image.frame_size
    game_spaces = spaces_from_env_info(env_info)
    keys = action_keys(game_spaces, obs_dim, action_space, where, env_info.get("env", "?"))
    keys = with_log_std(keys, getattr(agent, "actor_logstd", None))
    if image is not None:  # the game's vector keys (its observation layout: [(key, size)], the image last)
        parts["vector_keys"] = [(key, size) for key, size in game_spaces[2] if key != image.key]
    return policy_dict(parts.pop("actor"), normalizer.obs_statistics(), keys, env=str(env_info.get("env") or env_id),
                       source=source, where=where, policy_name=policy_name, **parts)


def write_policy(path, policy: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, policy_json(policy))


def write_policy_or_warn(path, make_policy: Callable[[], dict]) -> Optional[Path]:
    """For training: write ``make_policy()`` to ``path``. Never raises (training must not stop over playback):
    on a problem (e.g. NaN weights) it prints a warning and returns None."""
    path = Path(path)
    try:
        return write_policy(path, make_policy())
    except Exception as e:
        print(f"godot-ppo: warning: could not write the policy file {path}: {e}", file=sys.stderr, flush=True)
        return None


def policy_file_names(names: list) -> dict:
    """{policy name: its file in RUN_DIR/policies/}: the name with anything but letters, digits, '-', '_' and '.' as
    '_' (a name is the game's string; it must not reach outside the folder), at most MAX_FILE_STEM characters, and
    ".json". Names that this makes alike (é and è, a/b and a_b, .. and _; or alike but for case, as some file systems
    see them), and cut ones, get "-" and a short hash of the name each, so that every policy has a file of its own."""
    stems = {}
    for name in names:
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name).lstrip(".") or "_"
        stems[name] = (safe[:MAX_FILE_STEM], len(safe) > MAX_FILE_STEM)
    alike = Counter(stem.casefold() for stem, _ in stems.values())
    files = {name: (f"{stem}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}" if cut or alike[stem.casefold()] > 1
                    else stem) + ".json" for name, (stem, cut) in stems.items()}
    if len({f.casefold() for f in files.values()}) != len(files):  # a hash that meets another name: not in practice
        raise PolicyFileError(f"the policy names {list(names)} do not make distinct file names")
    return files


def write_policies(run_dir, policies: list[dict]) -> Path:
    """A game of several policies: RUN_DIR/policies/<name>.json for each (a single-policy file with its
    "policy_name"; policy_file_names), then RUN_DIR/policy.json, the bundle of them all (last: `train --watch` reloads
    it). Each file is written atomically. The bundle's env and source are its first policy's (one checkpoint writes
    them all)."""
    run_dir = Path(run_dir)
    bundle = policy_bundle(policies, env=policies[0]["env"] if policies else "?",
                           source=(policies[0].get("source") if policies else None) or {})
    files = policy_file_names([p["policy_name"] for p in policies])
    for policy in policies:
        write_policy(run_dir / POLICIES_DIR / files[policy["policy_name"]], policy)
    return write_policy(run_dir / POLICY_NAME, bundle)


def write_policies_or_warn(run_dir, make_policies: Callable[[], list[dict]]) -> Optional[Path]:
    """For training a game of several policies: ``write_policies(run_dir, make_policies())``, returning the bundle's
    path (RUN_DIR/policy.json). Never raises, like write_policy_or_warn: a problem is one warning, and None."""
    try:
        return write_policies(run_dir, make_policies())
    except Exception as e:
        print(f"godot-ppo: warning: could not write the policy files in {run_dir}: {e}", file=sys.stderr, flush=True)
        return None


def read_policy(path) -> dict:
    """Load and lightly check a policy file, single or bundle (the game does the full validation)."""
    path = Path(path)
    try:
        too_big = file_size_problem(path.stat().st_size)  # before a read of gigabytes
        if too_big:
            raise PolicyFileError(f"policy file {path}: {too_big}")
        policy = json.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyFileError(f"policy file {path}: the file does not exist") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise PolicyFileError(f"policy file {path}: not valid JSON ({e}); is it truncated?") from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise PolicyFileError(
            f"policy file {path}: JSON nested too deeply to read (thousands of levels); a policy file is a few levels "
            "deep: this is not one"
        ) from None
    problem = format_problem(policy) or size_problem(policy)
    if problem:
        raise PolicyFileError(f"policy file {path}: {problem}")
    return policy
