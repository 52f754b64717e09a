"""speclab from Python: the verifiers of speculative decoding (docs/verifiers.md) on numpy
arrays and torch CPU tensors without copies, the exact laws of one step, the statistics behind
speclab's distributional checks, the sampling pipeline, the result readers, and a conformance
test for samplers speclab did not write (speclab.conformance, docs/python.md).

    import speclab
    r = speclab.verify_chain(p, q, x, seed=1234)   # p [B, γ+1, V], q [B, γ, V] f32, x [B, γ] i32
    r.emitted_tokens, r.n_accepted
"""

import importlib as _importlib
import os as _os

# OpenMP threads that find no work would otherwise spin and take the cores of a shared machine
# from the threads that have work; the OpenMP runtime reads this once, when the extension loads it
# (a runtime that numpy or torch loaded earlier keeps its own setting). docs/benchmarks.md.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "passive"

__all__ = ["verify_chain", "verify_block", "verify_typical", "verify_tree", "verifiers",
           "VerifyResult", "TreeResult", "CopyWarning", "exact", "sampling", "stats"]

# speclab.io and speclab.plot (the result readers and figures) need no compiled code, so the
# package imports without the extension (the source tree's python/ folder, `speclab plot` of a
# build without pybind11); everything in __all__ then raises ImportError saying why.
try:
    _importlib.import_module("._speclab", __name__)
except ModuleNotFoundError:
    _extension_error = "it is not there"
except ImportError as _error:  # there but unloadable (built for another Python, a missing symbol)
    _extension_error = str(_error)
else:
    _extension_error = None
    from . import exact, sampling, stats  # noqa: F401
    from ._arrays import CopyWarning  # noqa: F401
    from .verify import (TreeResult, VerifyResult, verifiers, verify_block,  # noqa: F401
                         verify_chain, verify_tree, verify_typical)


def __getattr__(name):
    if _extension_error is not None and name in __all__:
        raise ImportError(
            f"speclab.{name} needs the compiled extension speclab._speclab, which does not load "
            f"from {__path__[0]}: {_extension_error}; build it (pybind11: Debian's pybind11-dev) "
            "and use PYTHONPATH=build/python, or `pip install .`; speclab.io and speclab.plot "
            "work without it")
    raise AttributeError(f"module 'speclab' has no attribute {name!r}")
