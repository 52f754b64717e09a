"""speclab from Python: the verifiers of speculative decoding (docs/verifiers.md) on numpy
arrays and torch CPU tensors without copies, the exact laws of one step, the statistics behind
speclab's distributional checks, the sampling pipeline, the result readers, and a conformance
test for samplers speclab did not write (speclab.conformance, docs/python.md).

    import speclab
    r = speclab.verify_chain(p, q, x, seed=1234)   # p [B, γ+1, V], q [B, γ, V] f32, x [B, γ] i32
    r.emitted_tokens, r.n_accepted
"""

import os as _os

# OpenMP threads that find no work would otherwise spin and take the cores of a shared machine
# from the threads that have work; the OpenMP runtime reads this once, when the extension loads it
# (a runtime that numpy or torch loaded earlier keeps its own setting). docs/benchmarks.md.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "passive"

from . import exact, sampling, stats  # noqa: F401
from ._arrays import CopyWarning  # noqa: F401
from .verify import (TreeResult, VerifyResult, verifiers, verify_block, verify_chain,  # noqa: F401
                     verify_tree, verify_typical)

__all__ = ["verify_chain", "verify_block", "verify_typical", "verify_tree", "verifiers",
           "VerifyResult", "TreeResult", "CopyWarning", "exact", "sampling", "stats"]
