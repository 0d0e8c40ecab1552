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
