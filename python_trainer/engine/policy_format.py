"""What a policy file is: its format name, its versions, the largest size it may declare, and what is wrong with a
file's format or sizes (policy_file.py builds, writes and reads the files; the game checks the same:
policy_runner.gd, block_compiler.gd)."""

from __future__ import annotations

from typing import Optional

from python_trainer.base import bounds, contract
from python_trainer.engine.policy_cnn import cnn_features

FORMAT = contract.POLICY_FORMAT
# 2: layers may end in relu or sigmoid too (ONNX imports); 3: "policy_name", and bundles of several policies;
# 4: a camera's "image" and "cnn"; 5: each continuous key's "log_std" (LOG_STD), what the engine's --policy_sample draws
# with (addons/rl_sync/policy_sampling.gd). A file says the version it needs: one without a camera or a continuous key
# stays version 3 (MLP_VERSION), so games with an older addon still play it. Files of every readable version play the
# same way. The versions are the contract's (the game reads them from contract.gd); policy_sampling.gd reads LOG_STD.
VERSION = contract.POLICY_VERSION
MLP_VERSION = contract.POLICY_BUNDLE_VERSION
CAMERA_VERSION = contract.POLICY_CAMERA_VERSION
SAMPLING_VERSION = contract.POLICY_VERSION
READABLE_VERSIONS = tuple(contract.POLICY_VERSIONS)
LOG_STD = "log_std"  # a continuous action key's log-std of its Gaussian, one per value (version 5)
# The largest size a policy file may declare (observations, a layer's inputs or outputs, the LSTM, an action key):
# bounds.LAYER_SIZE (the game's is block_compiler.gd's MAX_SIZE); MAX_SIZE is the name other modules import.
MAX_SIZE = bounds.LAYER_SIZE.value
# The largest file: BYTES_PER_WEIGHT bytes for each of the most weights a policy holds (bounds.POLICY_WEIGHTS; our
# writer takes 12 to 15 a weight: a float32's shortest decimal and a comma). The game refuses a larger file before it
# reads a byte (block_compiler.gd's MAX_FILE_BYTES, the same product), so a file of gigabytes costs no parse.
BYTES_PER_WEIGHT = contract.POLICY_BYTES_PER_WEIGHT
MAX_FILE_BYTES = BYTES_PER_WEIGHT * bounds.POLICY_WEIGHTS.value
SMALLER = "train a smaller network (a smaller camera image, a larger stride or narrower layers)"  # the fix of a size
# The most layers a policy file holds (contract.MAX_POLICY_LAYERS; docs/watching.md gives the load times).
MAX_LAYERS = contract.MAX_POLICY_LAYERS


def version_needed(camera: bool, keys: list) -> int:
    """The version a single policy's file says: the lowest that reads everything it holds."""
    return SAMPLING_VERSION if any(LOG_STD in key for key in keys) else CAMERA_VERSION if camera else MLP_VERSION


def is_bundle(policy: dict) -> bool:
    """A file of several policies ("policies": [...]) rather than one network."""
    return isinstance(policy, dict) and "policies" in policy


def _size(value, name: str) -> int:
    """``value`` as a declared size: a whole number from 1 to MAX_SIZE, else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= MAX_SIZE or value != int(value):
        raise ValueError(f"{name} must be a whole number from 1 to {MAX_SIZE}, got {str(value)[:40]}")
    return int(value)


def _matrix(rows, name: str, n_rows: int, n_columns: int) -> None:
    if not isinstance(rows, list) or len(rows) != n_rows:
        raise ValueError(f"{name} must have {n_rows} rows, got {len(rows) if isinstance(rows, list) else 'no list'}")
    if any(not isinstance(row, list) or len(row) != n_columns for row in rows):
        raise ValueError(f"every row of {name} must hold {n_columns} numbers")


def file_size_problem(n_bytes: int) -> Optional[str]:
    """What is wrong with a policy file of ``n_bytes`` bytes (more than MAX_FILE_BYTES), or None: checked before the
    file is read."""
    if n_bytes <= MAX_FILE_BYTES:
        return None
    return (f"the file holds {n_bytes} bytes, beyond the engine's {MAX_FILE_BYTES} ({BYTES_PER_WEIGHT} for each of the "
            f"{bounds.POLICY_WEIGHTS.value} weights a policy may hold): {SMALLER}")


def format_problem(policy) -> Optional[str]:
    """What is wrong with a file's format, version and (a bundle) entries' names and games, or None."""
    if not isinstance(policy, dict) or policy.get("format") != FORMAT:
        return f'not a godot-ppo policy file (expected "format": "{FORMAT}")'
    version = policy.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        return f"unknown version {version!r}; this godot-ppo reads versions {READABLE_VERSIONS[0]} to {VERSION}"
    if ("cnn" in policy or "image" in policy) and version < 4:
        return f"a camera policy (\"image\", \"cnn\") needs version 4, this file says {version!r}"
    if "policy_name" in policy and (not isinstance(policy["policy_name"], str) or not policy["policy_name"].strip()):
        return f'"policy_name" must be a non-empty string, got {str(policy["policy_name"])[:40]!r}'
    if not is_bundle(policy):
        return None
    entries = policy["policies"]
    if version < 3:
        return f"a bundle of policies (\"policies\") needs version 3, this file says {version!r}"
    if not isinstance(entries, list) or not entries:
        return '"policies" must be a non-empty list of policies'
    names = []
    for i, entry in enumerate(entries):
        name = entry.get("policy_name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip():
            return f"the bundle's entry {i} has no \"policy_name\" (each entry names the policy it plays)"
        if name in names:
            return f"two entries of the bundle are named {name!r}; each policy comes once"
        names.append(name)
        problem = format_problem(entry) if not is_bundle(entry) else "a bundle inside a bundle"
        if problem is None and entry.get("env") != policy.get("env"):
            problem = f"it was made for {entry.get('env')!r}, the bundle for {policy.get('env')!r}"
        if problem:
            return f"policy {name!r}: {problem}"
    return None


def size_problem(policy: dict) -> Optional[str]:
    """What is wrong with a policy file's sizes, or None: every size it declares (observation_size, each action key's
    size, the LSTM's input_size and hidden_size, each layer's inputs and outputs, a camera's CNN features) is a whole
    number from 1 to MAX_SIZE, the weights number at most bounds.POLICY_WEIGHTS, and every array has the size its
    neighbours say (the game checks the same before it builds anything from them: policy_runner.gd,
    policy_limits.gd). Values are the game's to check. A bundle: each entry so checked, the problem named by the
    entry's policy."""
    if is_bundle(policy):
        for entry in policy["policies"] if isinstance(policy["policies"], list) else []:
            problem = size_problem(entry) if isinstance(entry, dict) else "not a policy"
            if problem:
                return f"policy {str(entry.get('policy_name') if isinstance(entry, dict) else '?')!r}: {problem}"
        return None
    try:
        # a camera policy may see its image alone (no vector keys: observation_size 0)
        n_in = 0 if "cnn" in policy and policy.get("observation_size") == 0 else _size(policy.get("observation_size"), "observation_size")
        features = cnn_features(policy)  # a camera policy's layers (or LSTM) take cat([the CNN's features, the vector])
        n_in += features
        weights = _cnn_weights(policy)
        keys = policy.get("action_keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, dict) for k in keys):
            raise ValueError('"action_keys" must be a non-empty list of {"key", "action_type", "size"}')
        n_out = sum(_size(k.get("size"), f"action key {str(k.get('key'))[:40]!r}'s size") for k in keys)
        layers, lstm = policy.get("layers"), policy.get("lstm")
        if not isinstance(layers, list) or not layers or not all(isinstance(layer, dict) for layer in layers):
            raise ValueError('"layers" must be a non-empty list of {"weight", "bias", "activation"}')
        convs = policy["cnn"].get("convs") if isinstance(policy.get("cnn"), dict) else None
        depth = len(layers) + (len(convs) if isinstance(convs, list) else 0)
        if depth > MAX_LAYERS:
            raise ValueError(f"it has {depth} layers (convolutions included), beyond the engine's {MAX_LAYERS}: "
                             "train a shallower network")
        after = -1
        if lstm is not None:
            if not isinstance(lstm, dict) or not isinstance(lstm.get("after_layer"), int) or not 0 <= lstm["after_layer"] < len(layers):
                raise ValueError('"lstm" must be null or the LSTM\'s weights with "after_layer" (the index of a layer)')
            after = lstm["after_layer"]
            lstm_in, hidden = _size(lstm.get("input_size"), "the LSTM's input_size"), _size(lstm.get("hidden_size"), "the LSTM's hidden_size")
            _matrix(lstm.get("weight_ih"), "the LSTM's weight_ih", 4 * hidden, lstm_in)
            _matrix(lstm.get("weight_hh"), "the LSTM's weight_hh", 4 * hidden, hidden)
            weights += 4 * hidden * (lstm_in + hidden)
        for i, layer in enumerate(layers):
            if i == after:
                if n_in != lstm_in:
                    raise ValueError(f"the LSTM takes {lstm_in} inputs, but the layers before it give {n_in}")
                n_in = hidden
            if n_in > MAX_SIZE:
                raise ValueError(f"layer {i} takes {n_in} inputs ({features} CNN features and {n_in - features} vector "
                                 f"values), beyond the engine's {MAX_SIZE}: {SMALLER}")
            weight = layer.get("weight")
            n_rows = len(weight) if isinstance(weight, list) else 0
            if not n_rows or n_rows > MAX_SIZE:
                raise ValueError(f"layer {i}'s weight must be a list of 1 to {MAX_SIZE} rows")
            _matrix(weight, f"layer {i}'s weight", n_rows, n_in)
            if not isinstance(layer.get("bias"), list) or len(layer["bias"]) != n_rows:
                raise ValueError(f"layer {i} has {n_rows} weight rows, so its bias must hold {n_rows} numbers")
            weights += n_rows * n_in
            n_in = n_rows
        if weights > bounds.POLICY_WEIGHTS.value:
            raise ValueError(f"it holds {weights} weights, beyond the engine's {bounds.POLICY_WEIGHTS.value}: {SMALLER}")
        if n_in != n_out:
            raise ValueError(f"the network has {n_in} outputs but action_keys need {n_out}")
    except ValueError as e:
        return str(e)
    return None


def _cnn_weights(policy: dict) -> int:
    """The weights of a camera policy's CNN, whose shapes cnn_features found to chain (0 without one), once its dense
    layer's inputs (the last convolution's outputs, flattened) are found to be at most MAX_SIZE."""
    if "cnn" not in policy:
        return 0
    convs, weight = policy["cnn"]["convs"], policy["cnn"]["dense"]["weight"]
    if len(weight[0]) > MAX_SIZE:
        raise ValueError(f"the CNN's dense layer takes {len(weight[0])} inputs, beyond the engine's {MAX_SIZE}: {SMALLER}")
    return len(weight) * len(weight[0]) + sum(len(c["weight"]) * len(c["weight"][0]) * int(c["kernel"]) ** 2 for c in convs)
