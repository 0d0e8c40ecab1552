"""import-policy checks a model's declared sizes before it folds anything (onnx_import.py): a tiny model declaring
a huge input is refused in one line, in little memory and time; the pending identity map is held as a diagonal."""

import subprocess
import sys

import pytest

from helpers import REPO

onnx = pytest.importorskip("onnx")

# Run in a child limited to 1 GB of address space beyond the interpreter's: the old importer's n x n identity for
# 20,000 observations took 3.3 GB (a MemoryError traceback).
CHILD = """
import resource, sys, time
from onnx import TensorProto, helper, save
n = int(sys.argv[2])
node = helper.make_node("Tanh", ["obs"], ["output"])
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", n])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", n])])
save(helper.make_model(graph), sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
from python_trainer.engine.onnx_import import import_policy
from python_trainer.engine.policy_file import PolicyFileError
start = time.time()
try:
    import_policy(sys.argv[1])
except PolicyFileError as e:
    print("refused", str(e).count(chr(10)), round(time.time() - start, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.parametrize("n", [20000, 10**9])
def test_a_tiny_model_declaring_a_huge_input_is_refused_in_one_line_in_little_memory(tmp_path, n):
    path = tmp_path / "huge.onnx"
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(n)], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("refused 0 "), out.stderr[-2000:]
    _, _, seconds, maxrss_kb = out.stdout.split()
    assert float(seconds) < 5 and int(maxrss_kb) < 1_000_000, out.stdout


# Hand-built models that used to end in a traceback (IndexError, TypeError) or in a line naming neither the file nor
# the node: each is refused in one line naming the file, the node (op and name) where there is one, and the fix.
F = onnx.TensorProto.FLOAT


def _model(nodes, initializers=(), n=4, out=3, metadata=None):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("obs", F, ["batch", n])],
                              [helper.make_tensor_value_info("output", F, ["batch", out])], list(initializers))
    model = helper.make_model(graph)
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    return model


def _weight(name, shape, values=None):
    import numpy as np

    values = np.full(shape, 0.1, np.float32) if values is None else values
    return onnx.numpy_helper.from_array(np.asarray(values, np.float32), name)


def _bad_models():
    from onnx import helper

    gemm = helper.make_node("Gemm", ["obs", "W"], ["output"], name="fc1")
    return {
        "constant_without_value": (_model([helper.make_node("Constant", [], ["c"], name="k"),
                                           helper.make_node("Add", ["obs", "c"], ["output"], name="add")]),
                                   "Constant node 'k'"),
        "gemm_1d_weight": (_model([gemm], [_weight("W", [4])]), "Gemm node 'fc1'"),
        "action_keys_string": (_model([gemm], [_weight("W", [4, 3])], metadata={"godot_ppo.action_keys": '"move"'}),
                               "godot_ppo.action_keys is 'move'"),
        "initializer_without_data": (_model([gemm], [onnx.TensorProto(name="W", data_type=F, dims=[4, 3])]), "'W'"),
        "matmul_mismatch": (_model([helper.make_node("MatMul", ["obs", "W"], ["output"], name="mm")],
                                   [_weight("W", [5, 3])]), "MatMul node 'mm'"),
        "slice_step_zero": (_model([gemm, helper.make_node("Slice", ["output0", "s", "e", "a", "st"], ["output"],
                                                           name="cut")],
                                   [_weight("W", [4, 3]), *(onnx.numpy_helper.from_array(__import__("numpy").array(
                                       [v], "int64"), k) for k, v in (("s", 0), ("e", 3), ("a", 1), ("st", 0)))]),
                            "Slice node 'cut'"),
        "matmul_after_gemm": (_model([helper.make_node("Gemm", ["obs", "W"], ["h"], name="fc1"),
                                      helper.make_node("MatMul", ["h", "W2"], ["output"], name="mm")],
                                     [_weight("W", [4, 5]), _weight("W2", [3, 3])]), "MatMul node 'mm'"),
        # numpy's own error (a Clip bound of no values), named for its node by the per-node wrapper
        "clip_without_bound": (_model([helper.make_node("Clip", ["obs", "lo", "hi"], ["c"], name="clamp"), gemm],
                                      [_weight("lo", [0]), _weight("hi", [0]), _weight("W", [4, 3])]),
                               "Clip node 'clamp': its inputs do not fit together"),
        "empty_file": (None, "the file is empty"),
    }


@pytest.mark.parametrize("case", list(_bad_models()))
def test_bad_hand_built_models_are_refused_in_one_line_naming_the_file_and_node(tmp_path, capsys, case):
    from python_trainer import cli

    model, expected = _bad_models()[case]
    if case == "slice_step_zero":
        model.graph.node[0].output[0] = "output0"
    if case == "clip_without_bound":
        model.graph.node[1].input[0] = "c"
    path, out = tmp_path / f"{case}.onnx", tmp_path / "out.json"
    path.write_bytes(b"" if model is None else model.SerializeToString())
    code = cli.main(["import-policy", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    prefix = f"godot-ppo import-policy: error: {path}: "
    assert lines[0].startswith(prefix) and expected in lines[0][len(prefix):], lines[0]
    assert not out.exists()


def _chain(n_layers: int):
    from onnx import helper

    nodes, inits, x = [], [], "obs"
    for i in range(n_layers):
        nodes += [helper.make_node("Gemm", [x, f"W{i}"], [f"g{i}"], name=f"fc{i}"),
                  helper.make_node("Tanh", [f"g{i}"], [f"t{i}" if i < n_layers - 1 else "output"])]
        inits.append(_weight(f"W{i}", [4, 4 if i < n_layers - 1 else 3]))
        x = f"t{i}"
    return _model(nodes, inits, metadata={"godot_ppo.action_keys": '[{"key": "move", "action_type": "discrete", '
                                                                   '"size": 3}]'})


def test_a_model_deeper_than_max_layers_is_refused_and_one_of_max_layers_imports(tmp_path):
    from python_trainer.engine.onnx_import import import_policy
    from python_trainer.engine.policy_file import PolicyFileError
    from python_trainer.engine.policy_format import MAX_LAYERS

    path = tmp_path / "deep.onnx"
    path.write_bytes(_chain(MAX_LAYERS).SerializeToString())
    assert len(import_policy(path)["layers"]) == MAX_LAYERS
    path.write_bytes(_chain(MAX_LAYERS + 1).SerializeToString())
    with pytest.raises(PolicyFileError, match=f"has {MAX_LAYERS + 1} layers, beyond the engine's {MAX_LAYERS}"):
        import_policy(path)
