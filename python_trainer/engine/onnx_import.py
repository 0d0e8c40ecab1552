"""Importing an ONNX MLP policy (ours, or godot-rl's export of SB3's and CleanRL's PPO) as a policy file the engine
plays (onnx_policy.py writes them; docs/onnx.md):

    godot-ppo import-policy model.onnx --env-id ball_chase -o policy.json

The graph's `output` must be a chain of affine maps (Gemm, MatMul, Add, Sub, Mul, Div, Slice) and activations of its
one observation input; a Clip right after a first diagonal map becomes the engine's observation normaliser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from python_trainer.base.errors import one_line
from python_trainer.engine.onnx_policy import policy_from_metadata
from python_trainer.engine.policy_format import MAX_LAYERS, MAX_SIZE, size_problem
from python_trainer.engine.policy_file import FORMAT, PolicyFileError, action_rule, f32, obs_normalization
from python_trainer.engine.policy_format import version_needed

# The activations an imported layer may end with, as the policy file names them.
IMPORTED_ACTIVATIONS = {"Tanh": "tanh", "Relu": "relu", "Sigmoid": "sigmoid"}
PASS_THROUGH = {"Identity", "Flatten", "Reshape", "Cast", "Concat"}  # no change to a [batch, n] float row
OUTPUT_ONLY = {"Softmax", "LogSoftmax"}  # at the output: dropped, the engine's argmax of the logits picks the same


class _Chain:
    """The value of a graph node as a function of the observations: ``layers`` [(W, b, activation)] applied in turn,
    then the pending affine map x -> W x + b (float64, folded from Gemm/MatMul/Add/Sub/Mul/Div/Slice); W a matrix, or
    a 1-D array when it is diagonal (held so: an n x n identity costs n numbers, not n^2); ``norm``: the observation
    normaliser (mean, scale, clip) when a Clip closed a first diagonal map."""

    def __init__(self, n: int):
        self.layers, self.norm = [], None
        self.w, self.b = np.ones(n), np.zeros(n)

    def copy(self) -> "_Chain":
        c = _Chain(0)
        c.layers, c.norm, c.w, c.b = list(self.layers), self.norm, self.w.copy(), self.b.copy()
        return c

    def pending_is_identity(self) -> bool:
        return self.w.ndim == 1 and (self.w == 1).all() and not self.b.any()

    def left(self, m: np.ndarray) -> np.ndarray:
        """m @ W (m: a model's own weight matrix, so the result is no bigger than it)."""
        return m * self.w[None, :] if self.w.ndim == 1 else m @ self.w

    def scale_rows(self, c: np.ndarray) -> np.ndarray:
        return self.w * c if self.w.ndim == 1 else self.w * c[:, None]

    def dense(self, budget: int, what: str) -> np.ndarray:
        """W as a matrix, refused when it would hold more than ``budget`` numbers (a diagonal map of a huge input)."""
        if self.w.ndim == 2:
            return self.w
        if len(self.w) ** 2 > budget:
            raise PolicyFileError(f"{what}: a layer acting on each of the {len(self.w)} observations alone would hold "
                                  f"{len(self.w)}^2 weights; import a model whose first layer is a Gemm/MatMul")
        return np.diag(self.w)


def _node_name(node) -> str:
    return f"{node.op_type} node {node.name or (node.output[0] if node.output else '?')!r}"


# What folding one node may raise from numpy on inputs of shapes that do not fit (our own errors are PolicyFileError).
FOLDING_ERRORS = (ArithmeticError, IndexError, TypeError, ValueError)


def _tensor(t, what: str) -> np.ndarray:
    """An ONNX tensor (an initializer, a Constant's value) as an array: its declared shape within MAX_SIZE per axis
    checked before any array is made from it, and data that fits that shape."""
    from onnx import numpy_helper

    if any(not 0 <= d <= MAX_SIZE for d in t.dims) or len(t.dims) > 4:
        raise PolicyFileError(f"{what} declares the shape {list(t.dims)[:6]}, beyond the policy file's {MAX_SIZE} per "
                              "axis; import a policy of real size")
    try:
        return numpy_helper.to_array(t).astype(np.float64)
    except FOLDING_ERRORS as e:  # e.g. "cannot reshape array of size 0": dims without the data
        raise PolicyFileError(f"{what} declares the shape {list(t.dims)} but its data does not fit it "
                              f"({one_line(e)[:120]}): the file is damaged; export the model again") from None


def _constants(graph, where: str) -> dict:
    """{name: array} of the graph's initializers and Constant nodes' values."""
    from onnx import helper

    consts = {t.name: _tensor(t, f"{where}: the initializer {t.name!r}") for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "Constant":
            continue
        what = f"{where}: {_node_name(node)}"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if len(node.output) != 1 or len(attrs) != 1:
            raise PolicyFileError(f"{what} has {len(attrs)} values and {len(node.output)} outputs; a Constant holds "
                                  "one value (attribute `value`) for one output: fix or export the model again")
        (name, value), = attrs.items()
        if name == "value":
            consts[node.output[0]] = _tensor(value, what)
        elif name in ("value_float", "value_floats", "value_int", "value_ints"):
            consts[node.output[0]] = np.asarray(value, np.float64)
        else:
            raise PolicyFileError(f"{what} holds a {name}; import-policy maps numeric constants only")
    return consts


def onnx_to_policy(model, where: str) -> tuple[dict, int, int]:
    """(the policy file's "obs_normalization", "layers" entries, observation size, output size) of an ONNX MLP
    policy whose `output` is a chain of affine maps and activations of its one observation input."""
    graph = model.graph
    consts = _constants(graph, where)
    inputs = [i for i in graph.input if i.name not in consts]
    if any(node.op_type == "Conv" for node in graph.node) or any(len(i.type.tensor_type.shape.dim) == 4 for i in inputs):
        raise PolicyFileError(f"{where}: the model has convolutions or an image input (a camera policy); import-policy "
                              "maps MLP policies only: play a camera policy trained here from its policy file "
                              "(godot-ppo export-policy RUN writes it)")
    observed = [i for i in inputs if i.name != "state_ins"]
    if len(observed) != 1:
        raise PolicyFileError(f"{where}: {len(observed)} inputs besides state_ins ({', '.join(i.name for i in observed)}); "
                              "import-policy maps one observation input (godot-rl's `obs`)")
    dims = observed[0].type.tensor_type.shape.dim
    if len(dims) != 2 or not dims[1].dim_value:
        raise PolicyFileError(f"{where}: the input {observed[0].name!r} is not a [batch, n] row of observations")
    n_obs = int(dims[1].dim_value)
    if n_obs > MAX_SIZE:
        raise PolicyFileError(f"{where}: the input {observed[0].name!r} declares {n_obs} observations, beyond the "
                              f"policy file's {MAX_SIZE}; import a policy of real size")
    if "output" not in {o.name for o in graph.output}:
        raise PolicyFileError(f"{where}: no output named 'output' (godot-rl's convention: output, state_outs)")
    producers = {out: node for node in graph.node for out in node.output}
    needed, todo = set(), ["output"]  # only the nodes `output` depends on (the value head may be there too)
    while todo:
        node = producers.get(todo.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            todo += list(node.input)
    depth = sum(id(node) in needed and node.op_type in IMPORTED_ACTIVATIONS for node in graph.node)
    if depth > MAX_LAYERS:  # each activation closes a layer
        raise PolicyFileError(f"{where}: the model has {depth} layers, beyond the engine's {MAX_LAYERS}: import a "
                              "shallower network")
    values = {observed[0].name: _Chain(n_obs)}
    for node in graph.node:
        if id(node) in needed and node.op_type != "Constant":
            try:
                values[node.output[0]] = _apply(node, values, consts, where)
            except FOLDING_ERRORS as e:  # numpy's word on inputs that do not fit: named for the node
                raise PolicyFileError(f"{where}: {_node_name(node)}: its inputs do not fit together "
                                      f"({one_line(e)[:160]}); check the model's shapes (onnx.checker.check_model("
                                      "model, full_check=True)) and export it again") from None
    chain = values.get("output")
    if not isinstance(chain, _Chain):
        raise PolicyFileError(f"{where}: `output` does not depend on the observations")
    layers = list(chain.layers)
    if not chain.pending_is_identity() or not layers:
        layers.append((chain.dense(_budget(consts), where), chain.b, "linear"))
    norm = None
    if chain.norm is not None:
        mean, scale, clip = chain.norm
        # the engine computes (obs - mean) / sqrt(var + epsilon): var = 1 / scale^2 with epsilon 0 gives the scale
        norm = obs_normalization({"mean": mean, "var": 1.0 / scale**2, "epsilon": 0.0, "clip": clip}, where)
    entries = []
    for w, b, activation in layers:
        w32, b32 = w.astype(np.float32), b.astype(np.float32)
        if not (np.isfinite(w32).all() and np.isfinite(b32).all()):
            raise PolicyFileError(f"{where}: a layer holds NaN/inf weights; it cannot be played")
        entries.append({"weight": [[f32(x) for x in row] for row in w32], "bias": [f32(x) for x in b32],
                        "activation": activation})
    return norm, entries, n_obs, len(layers[-1][1])


def _budget(consts: dict) -> int:
    """How many numbers a folded layer may hold: of the order of the model's own weights."""
    return 4 * sum(int(np.size(c)) for c in consts.values()) + 4 * MAX_SIZE


def _apply(node, values: dict, consts: dict, where: str):
    """The value of one node's first output: a _Chain (it depends on the observations) or a constant array."""
    from onnx import helper

    op, what = node.op_type, f"{where}: {_node_name(node)}"
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    args = [values.get(name, consts.get(name)) if name else None for name in node.input]
    chains = [a for a in args if isinstance(a, _Chain)]
    if any(a is None for a, name in zip(args, node.input) if name):
        missing = [name for a, name in zip(args, node.input) if name and a is None]
        raise PolicyFileError(f"{what} reads {missing[0]!r}, which is neither the observations nor a constant (a "
                              "recurrent or multi-input model?)")
    if not chains and op in ("Identity", "Cast") and len(args) == 1:  # e.g. a weight passed on by an Identity
        return args[0]
    if not chains:  # constant folding is beyond this importer: only the path from the observations is mapped
        raise PolicyFileError(f"{what} computes on constants only; cannot map it")
    if len(chains) > 1:
        raise PolicyFileError(f"{what} combines the observations with themselves; only a chain of layers can be "
                              "imported")
    x = chains[0].copy()
    if op in PASS_THROUGH:
        shape = np.asarray(args[1]).reshape(-1) if op == "Reshape" else None
        if (op == "Concat" and len(args) != 1) or (op == "Flatten" and attrs.get("axis", 1) != 1) or \
                (shape is not None and (len(shape) != 2 or shape[1] not in (-1, len(x.b)))):
            raise PolicyFileError(f"{what} changes the shape of a [batch, n] row; cannot map it")
        return x
    if op in IMPORTED_ACTIVATIONS:
        x.layers.append((x.dense(_budget(consts), what), x.b, IMPORTED_ACTIVATIONS[op]))
        x.w, x.b = np.ones(len(x.b)), np.zeros(len(x.b))
        return x
    if op in OUTPUT_ONLY and node.output[0] == "output":
        return x
    const = next((np.asarray(a, np.float64) for a in args if a is not None and not isinstance(a, _Chain)), None)
    if op == "Gemm":
        return _gemm(x, args, attrs, what)
    if op == "MatMul" and isinstance(args[0], _Chain):
        if const is None or const.ndim != 2 or const.shape[0] != len(x.b):
            raise PolicyFileError(f"{what} multiplies a row of {len(x.b)} by a weight of shape "
                                  f"{list(np.shape(const))}; a MatMul takes a [{len(x.b)}, m] weight: fix the model")
        x.w, x.b = x.left(const.T), const.T @ x.b
        return x
    if op in ("Add", "Sub", "Mul", "Div") and const is not None and const.size in (1, len(x.b)):
        return _elementwise(op, x, const, isinstance(args[0], _Chain), what)
    if op == "Slice":
        return _slice(x, args, what)
    if op == "Clip" and not x.layers and x.norm is None and (x.w.ndim == 1 or np.count_nonzero(x.w - np.diag(np.diag(x.w))) == 0):
        return _clip(x, args, attrs, what)
    raise PolicyFileError(f"{what} ({op}) is not supported; import-policy maps Gemm, MatMul, Add, Sub, Mul, Div, Clip "
                          "(the normaliser), Tanh, Relu, Sigmoid, Slice, Concat, Flatten, Reshape, Identity, Cast and a "
                          "final Softmax")


def _gemm(x: "_Chain", args: list, attrs: dict, what: str) -> "_Chain":
    """alpha * x @ B + beta * C folded into the chain's affine map (x the observations' side)."""
    if attrs.get("transA", 0) or not isinstance(args[0], _Chain):
        raise PolicyFileError(f"{what} multiplies in an order this importer does not map")
    b_mat = np.asarray(args[1], np.float64)
    b_mat = b_mat.T if attrs.get("transB", 0) else b_mat  # (in, out)
    if b_mat.ndim != 2 or b_mat.shape[0] != len(x.b):
        raise PolicyFileError(f"{what} multiplies a row of {len(x.b)} by a weight of shape {list(np.shape(args[1]))}; "
                              f"a Gemm takes a [{len(x.b)}, m] weight ([m, {len(x.b)}] with transB=1): fix the model")
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    bias = np.asarray(args[2], np.float64) * beta if len(args) > 2 and args[2] is not None else 0.0
    x.w, x.b = alpha * x.left(b_mat.T), alpha * b_mat.T @ x.b + bias
    return x


def _elementwise(op: str, x: "_Chain", const: np.ndarray, chain_first: bool, what: str) -> "_Chain":
    """Add, Sub, Mul or Div by a constant (a scalar or one value per row), folded into the affine map."""
    c = np.broadcast_to(const.reshape(-1), x.b.shape)
    if op == "Add":
        x.b = x.b + c
    elif op == "Sub":
        x.w, x.b = (x.w, x.b - c) if chain_first else (-x.w, c - x.b)
    elif op == "Mul":
        x.w, x.b = x.scale_rows(c), x.b * c
    elif chain_first:  # Div by a constant (a constant divided by the observations is not affine)
        x.w, x.b = x.scale_rows(1.0 / c), x.b / c
    else:
        raise PolicyFileError(f"{what} divides by the observations; cannot map it")
    return x


def _slice(x: "_Chain", args: list, what: str) -> "_Chain":
    """Keeping some of a row's values: the rows of the affine map that the slice keeps."""
    starts, ends = (np.asarray(a).reshape(-1) for a in args[1:3])
    axes = np.asarray(args[3]).reshape(-1) if len(args) > 3 and args[3] is not None else np.arange(len(starts))
    steps = np.asarray(args[4]).reshape(-1) if len(args) > 4 and args[4] is not None else np.ones(len(starts), int)
    rows = np.arange(len(x.b))
    if (steps == 0).any():
        raise PolicyFileError(f"{what} has a step of 0 (ONNX's Slice steps are non-zero): fix the model")
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if axis in (1, -1):
            rows = rows[int(start) : int(min(end, len(rows))) : int(step)]
        elif not (axis == 0 and start == 0 and end >= 2**31 - 1):
            raise PolicyFileError(f"{what} slices the batch axis; cannot map it")
    x.w, x.b = (x.w[rows] if x.w.ndim == 2 else _diag_rows(x.w, rows)), x.b[rows]
    return x


def _diag_rows(d: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows ``rows`` of diag(d), made without diag(d) itself."""
    w = np.zeros((len(rows), len(d)))
    w[np.arange(len(rows)), rows] = d[rows]
    return w


def _clip(x: "_Chain", args: list, attrs: dict, what: str) -> "_Chain":
    """A clip of (obs - mean) / std to [-c, c] at the chain's start: the engine's observation normaliser."""
    low, high = (float(np.asarray(a)) if a is not None else None for a in (args + [None, None])[1:3])
    low, high = attrs.get("min", low), attrs.get("max", high)
    scale = (x.w if x.w.ndim == 1 else np.diag(x.w)).copy()
    if low is None or high is None or low != -high or high <= 0 or (scale <= 0).any():
        raise PolicyFileError(f"{what} clips in a way the engine's normaliser cannot (it clips (obs - mean) / std to "
                              "[-c, c])")
    x.norm = (-x.b / scale, scale, high)
    x.w, x.b = np.ones(len(x.b)), np.zeros(len(x.b))
    return x


def read_onnx(path):
    """The ONNX model in a file, or a one-line PolicyFileError."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file (give an .onnx model)")
    if path.stat().st_size == 0:
        raise PolicyFileError(f"{path}: the file is empty, not an ONNX model: give the .onnx file your exporter wrote")
    try:
        model = onnx.load(str(path))
    except Exception as e:  # protobuf's DecodeError and friends
        raise PolicyFileError(f"{path}: not an ONNX model ({type(e).__name__}: {one_line(e)[:200]})") from None
    if not model.graph.node and not model.graph.input:
        raise PolicyFileError(f"{path}: holds no ONNX graph (no nodes, no inputs): not an ONNX model; give the .onnx "
                              "file your exporter wrote")
    return model


def game_action_keys(env_info: dict) -> list[dict]:
    """The game's action keys in godot-rl's output order, as the policy file lists them: env_info's order, which is
    sorted by name (Godot's to_json sorts a Dictionary's keys), as godot-rl's gymnasium Dict sorts them too."""
    space = env_info["action_space"]
    space = space[0] if isinstance(space, list) else space
    return [{"key": str(k), "action_type": str(v["action_type"]), "size": int(v["size"])} for k, v in space.items()]


def _policy_of(env_info: dict, policy_name: Optional[str], described: dict, where: str) -> tuple[dict, Optional[str]]:
    """(``env_info`` narrowed to the agents of the policy the model plays, that policy's name): --policy-name's, else
    the one our export's metadata names; a game of several policies needs one of them (PolicyFileError)."""
    from python_trainer.envs.game import GameError  # gymnasium: only with a game to check against
    from python_trainer.envs.spaces import agent_policy_names, policy_env_info

    env, names = env_info.get("env", "?"), list(dict.fromkeys(agent_policy_names(env_info)))
    ours = described.get("policy_name")
    name = policy_name if policy_name is not None else ours if ours in names else None
    if name is None and len(names) > 1:
        known = f"; its metadata names the policy {ours!r}, which no agent of {env} plays" if ours is not None else ""
        raise PolicyFileError(f"{where}: {env}'s agents play several policies ({', '.join(map(str, names))}) and the "
                              f"model does not say which one it is{known}: name it with --policy-name")
    if name is None:
        return env_info, None
    try:
        return policy_env_info(env_info, name), name
    except GameError as e:  # no agent plays it
        raise PolicyFileError(f"{e}: give one of them with --policy-name") from None


def _other_policy(env: str, game_obs: int, policy_name: Optional[str], described: dict) -> str:
    """The end of the line of a model whose observations do not fit: whose they are, and what the metadata says."""
    ours = described.get("policy_name")
    if policy_name is None:
        return f"{env} gives {game_obs}: it was trained on another game"
    if ours not in (None, policy_name) and described.get("env") == env:
        return (f"the policy {policy_name!r} of {env} takes {game_obs}: the model is {env}'s policy {ours!r} (its "
                f"metadata says): drop --policy-name, or give --policy-name {ours}")
    return f"the policy {policy_name!r} of {env} takes {game_obs}: it was trained for another policy or game"


def _described(model, where: str) -> dict:
    """The policy's description in our export's metadata (policy_from_metadata), its action keys checked: the list of
    {key, action_type, size} a policy file holds."""
    try:
        described = policy_from_metadata(model)
    except ValueError as e:  # json's
        raise PolicyFileError(f"{where}: its godot_ppo.* metadata is not JSON ({one_line(e)[:120]}): export it again "
                              "(godot-ppo export-policy RUN -o model.onnx), or drop those metadata_props") from None
    keys = described.get("action_keys")
    if keys is not None and (not isinstance(keys, list) or not all(
            isinstance(k, dict) and isinstance(k.get("key"), str) and k.get("action_type") in ("continuous", "discrete")
            and not isinstance(k.get("size"), bool) and isinstance(k.get("size"), int) and 1 <= k["size"] <= MAX_SIZE
            for k in keys)):
        raise PolicyFileError(f"{where}: its metadata godot_ppo.action_keys is {str(keys)[:60]!r}, not a list of "
                              '{"key", "action_type" (continuous or discrete), "size"}: export it again (godot-ppo '
                              "export-policy RUN -o model.onnx), or name the game with --env-id")
    return described


def import_policy(path, env_info: Optional[dict] = None, policy_name: Optional[str] = None) -> dict:
    """The policy file's content for an ONNX MLP policy: the game's action keys from ``env_info`` (godot-rl's order:
    SB3's and CleanRL's exports hold no description), else from our own export's metadata. ``policy_name``: the
    agents' policy_name it plays (None: our export's own, else none, and it plays every agent)."""
    from python_trainer.envs.spaces import spaces_from_env_info

    where = str(path)
    model = read_onnx(path)
    described = _described(model, where)
    name = policy_name if policy_name is not None else described.get("policy_name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise PolicyFileError(f"{where}: a policy name must be a non-empty string, got {str(name)[:40]!r}")
    if env_info is not None:  # the agents of the policy the model plays (a name no agent of the game plays is left out)
        env_info, policy_name = _policy_of(env_info, policy_name, described, where)
        name = policy_name
    norm, layers, n_obs, n_out = onnx_to_policy(model, where)  # sizes checked before anything is folded
    if env_info is not None:
        keys, env = game_action_keys(env_info), str(env_info.get("env") or described.get("env") or "?")
        game_obs = int(spaces_from_env_info(env_info)[0].shape[0])
        if game_obs != n_obs:
            raise PolicyFileError(f"{where}: the model takes {n_obs} observations, but " + _other_policy(
                env, game_obs, policy_name, described))
    elif described.get("action_keys"):
        keys, env = described["action_keys"], str(described.get("env"))
    else:
        raise PolicyFileError(f"{where}: the model does not say which game it plays (no godot-ppo metadata): name the "
                              "game with --env-id (and --env-path for your own export)")
    kinds = {k["action_type"] for k in keys}
    if len(kinds) > 1:
        raise PolicyFileError(f"{where}: {env} mixes continuous and discrete action keys; godot-rl's exporters write "
                              "those as one Box (a discrete key as one value), which the engine's policy file does "
                              "not play: train it with godot-ppo (one head per key) instead")
    expected = sum(k["size"] for k in keys)
    if expected != n_out:
        raise PolicyFileError(f"{where}: the model has {n_out} outputs, but {env}'s action keys "
                              f"{[k['key'] for k in keys]} need {expected}")
    policy = {
        "format": FORMAT,
        "version": version_needed(False, keys),  # 5 when our own export's keys carry their log_std
        "env": env,
        **({"policy_name": name} if name is not None else {}),
        "observation_size": n_obs,
        "action_keys": keys,
        "action_rule": action_rule(keys),
        "obs_normalization": norm,
        "layers": layers,
        "lstm": None,
        "source": {"imported_from": Path(path).name, "producer": model.producer_name or None,
                   "described": described.get("source")},
    }
    problem = size_problem(policy)  # what read_policy and the game check (e.g. at most MAX_LAYERS layers)
    if problem:
        raise PolicyFileError(f"{where}: {problem}")
    return policy
