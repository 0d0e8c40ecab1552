"""A policy's numbers as one float32 array: the values of the in-engine actors' weights message, in the order the
game's generated setter reads them (godot_project/addons/rl_sync/weights_setter.gd).

After each update the trainer sends every game new weights. Reloading a policy file costs the game about 3 us a weight
(JSON, a check of every number, a compile); the compiled forward pass depends only on the network's shape, so the
game keeps it and sets its members from these values instead, a few hundred times faster. The order (the wire's):

- for each entry of ``layers`` in file order, its ``weight`` row by row (each row one output unit's input weights,
  as the file nests them), then its ``bias``;
- then each continuous key's ``log_std``, in ``action_keys`` order (what the game samples with);
- then, when ``obs_normalization`` is not null, its ``mean``, then its ``var`` (``epsilon`` and ``clip`` stay the
  file's).

The policy dict is policy_file.py's (``game_policy`` builds it from a trained agent). The game takes MLP policies
only: an LSTM or a camera policy is refused, as is a continuous key without its log-std (an old file: re-export it).

Building that dict writes every weight as its shortest decimal (for the JSON file): about 4 us a weight, 25 ms for
ball_chase's network, some 50 times what the game spends on the update. ``agent_weights`` gives the same values
straight from a trained agent and its normaliser (tests/test_weights_setter.py holds the two equal), for the message
sent after every update; the dict is needed only for the policy file the game first loads.
"""

from __future__ import annotations

import numpy as np

from python_trainer.engine.policy_file import PolicyFileError
from python_trainer.engine.policy_format import LOG_STD, is_bundle

MLP_ONLY = "in-engine actors take MLP policies; this one {}: train it with --no-in-engine"


def _parts(policy: dict) -> list:
    """The policy's number arrays in the wire's order (each as the file holds it, nested lists or arrays)."""
    if is_bundle(policy):
        raise PolicyFileError("a weights message carries one policy; this is a bundle of several (give one entry)")
    if policy.get("lstm") is not None:
        raise PolicyFileError(MLP_ONLY.format("has an LSTM (--lstm)"))
    if "cnn" in policy or "image" in policy:
        raise PolicyFileError(MLP_ONLY.format("sees a camera through a CNN"))
    parts = []
    for layer in policy["layers"]:
        parts += [layer["weight"], layer["bias"]]
    for key in policy["action_keys"]:
        if key["action_type"] == "continuous":
            log_std = key.get(LOG_STD)
            if log_std is None or np.size(log_std) != int(key["size"]):
                raise PolicyFileError(f"the continuous key {key['key']!r} has no {LOG_STD!r} (format version 5), "
                                      "which the in-engine actors sample with: re-export the policy with this godot-ppo")
            parts.append(log_std)
    norm = policy.get("obs_normalization")
    if norm is not None:
        parts += [norm["mean"], norm["var"]]
    return parts


def flat_weights(policy: dict) -> np.ndarray:
    """The policy's weights message values: one float32 array (see the module's docstring for the order)."""
    return np.concatenate([np.asarray(part, np.float32).reshape(-1) for part in _parts(policy)])


def agent_weights(agent, normalizer) -> np.ndarray:
    """flat_weights(game_policy(agent, normalizer, ...)) without the policy dict: the actor's Linear layers' weights
    and biases in order (agent.policy_parts(), as policy_file.actor_layers walks them), the continuous log-stds (the
    agent's ``actor_logstd``, in the action keys' order, as policy_file.with_log_std splits it), then the normaliser's
    observation mean and var when it normalises them."""
    import torch.nn as nn

    parts = agent.policy_parts()
    if set(parts) != {"actor"}:
        raise PolicyFileError(MLP_ONLY.format("has an LSTM (--lstm)" if "lstm" in parts else "sees a camera through a CNN"))
    arrays = []
    for module in parts["actor"]:
        if isinstance(module, nn.Linear):
            arrays += [module.weight, module.bias]
    log_std = getattr(agent, "actor_logstd", None)
    arrays = [a.detach().cpu().numpy() for a in arrays + ([log_std] if log_std is not None else [])]
    stats = normalizer.obs_statistics()
    if stats is not None:
        arrays += [stats["mean"], stats["var"]]
    return np.concatenate([np.asarray(a, np.float32).reshape(-1) for a in arrays])


def weight_count(policy: dict) -> int:
    """How many values flat_weights(policy) holds (the game answers its own count on entering actor mode)."""
    return int(sum(np.size(part) for part in _parts(policy)))
