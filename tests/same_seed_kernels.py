"""Which float kernels this machine runs, for the same-seed fixtures: tests/test_same_seed.py repeats the runs that
scripts/make_same_seed_fixtures.py recorded and asks for the same numbers bit for bit, which only the same kernels
give.

Two things pick a library's kernels. The CPU's vector instructions: the fixtures were recorded with torch's AVX2
kernels, and an AVX-512 machine is held to them (AVX2_ON_AVX512: each library reads its variable before it loads).
And the CPU's maker: Intel's MKL, under torch's matrix products and its exp and tanh, takes other AVX2 code on an
Intel CPU than on an AMD one, so the same run rounds differently on the two (seen here: an Intel Xeon with AVX-512
held to AVX2 against an AMD EPYC held alike and an AVX2 machine, which agree). `fingerprint` tells the kernels apart
by their results: a digest of a few products and functions of fixed inputs, as the trainer computes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Union

# The fixture sets: {"cpu_capability", "torch", "sets": {folder: {"fingerprint", "recorded_on"}}}, one folder each
# under this file's directory.
SETS_FILE = Path(__file__).resolve().parent / "fixtures" / "same_seed" / "kernels.json"

# An AVX-512 CPU running the AVX2 kernels: what each library reads (before it loads) to pick its kernels.
AVX2_ON_AVX512 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}

# The fingerprint's computations, in a fresh process (the kernels are picked when the libraries load): torch's
# products at the shapes of acting, a CartPole and a ball_chase minibatch and their backward, torch's exp, tanh and
# log_softmax, numpy's product and tanh, each on fixed inputs, one thread as the trainer runs.
_FINGERPRINT = r"""
import hashlib, numpy as np, torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
digest = hashlib.sha256()
for m, k, n in [(1, 4, 64), (16, 12, 128), (128, 4, 64), (128, 64, 64), (1024, 12, 64), (1024, 64, 64),
                (64, 1024, 64), (64, 1024, 12), (1024, 64, 2), (4, 64, 2)]:
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    digest.update((a @ b).numpy().tobytes())
    digest.update(torch.addmm(torch.randn(n, generator=g), a, b).numpy().tobytes())
x = torch.randn(1024, 64, generator=g)
for y in (x.exp(), x.tanh(), x[:128].tanh(), torch.log_softmax(x, -1)):
    digest.update(y.numpy().tobytes())
xn = x.numpy()
digest.update((xn[:16] @ xn[:64].T).tobytes())
digest.update(np.tanh(xn).tobytes())
print(digest.hexdigest()[:16])
"""


def kernels_env(recorded_capability: str) -> Union[dict, str]:
    """The environment that gives this machine the kernels of ``recorded_capability`` ({} when it has them already),
    or a String saying why it cannot."""
    import torch

    here = torch.backends.cpu.get_cpu_capability()
    if here == recorded_capability:
        return {}
    # (some machines set OPENBLAS_CORETYPE=Haswell for everything already: that is the setting wanted)
    if (here, recorded_capability) == ("AVX512", "AVX2") and os.environ.get("OPENBLAS_CORETYPE", "Haswell") in (
            "", "Haswell"):
        return AVX2_ON_AVX512
    return f"the fixtures were recorded with {recorded_capability} kernels, this CPU has {here}"


def fingerprint(env: dict) -> str:
    """The digest of this machine's kernels under ``env`` (kernels_env's)."""
    result = subprocess.run([sys.executable, "-c", _FINGERPRINT], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, **env))
    if result.returncode != 0:
        raise RuntimeError(f"the kernel fingerprint failed:\n{result.stderr[-2000:]}")
    return result.stdout.strip().splitlines()[-1]


def read_sets() -> dict:
    return json.loads(SETS_FILE.read_text())


def set_of(kernels: dict, here: str) -> Optional[str]:
    """The folder of the set recorded with the kernels of fingerprint ``here``, or None."""
    return next((name for name, s in kernels["sets"].items() if s["fingerprint"] == here), None)
