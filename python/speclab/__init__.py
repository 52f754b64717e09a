"""speclab from Python: the verifiers of speculative decoding (docs/verifiers.md) on numpy
arrays and torch CPU tensors without copies, the exact laws of one step, the statistics behind
speclab's distributional checks, the sampling pipeline, the result readers, and a conformance
test for samplers speclab did not write (speclab.conformance, docs/python.md).

    import speclab
    r = speclab.verify_chain(p, q, x, seed=1234)   # p [B, γ+1, V], q [B, γ, V] f32, x [B, γ] i32
    r.emitted_tokens, r.n_accepted
    speclab.__version__                            # pyproject.toml's version, e.g. "0.1.0"
"""

import importlib as _importlib
import os as _os

# OpenMP threads that find no work would otherwise spin and take the cores of a shared machine
# from the threads that have work; the OpenMP runtime reads this once, when the extension loads it
# (a runtime that numpy or torch loaded earlier keeps its own setting). docs/benchmarks.md.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "passive"



def _version():
    """The version of this copy of the package. Its one source is the [project] version of
    pyproject.toml (CMakeLists.txt's project(VERSION), which the C++ build records, repeats it; a
    test keeps the two equal): as pip recorded it when this copy is the installed distribution,
    else read from the pyproject.toml of the source tree this copy belongs to: the folder above
    python/speclab/, or for a build's build/python/speclab/ the folder above it or the source
    directory its CMakeCache.txt names. "0+unknown" when none is found."""
    here = _os.path.dirname(_os.path.realpath(__file__))
    try:
        from importlib import metadata
        dist = metadata.distribution(__name__)
        # Another speclab installed beside a source tree would otherwise lend it its version.
        if _os.path.realpath(str(dist.locate_file(f"{__name__}/__init__.py"))) == \
                _os.path.join(here, "__init__.py"):
            return dist.version
    except Exception:  # noqa: BLE001 - no distribution, or metadata this Python cannot read
        pass
    parent = here
    while True:
        found = _pyproject_version(_os.path.join(parent, "pyproject.toml"))
        source = _cmake_source_dir(_os.path.join(parent, "CMakeCache.txt"))
        if not found and source:
            found = _pyproject_version(_os.path.join(source, "pyproject.toml"))
        if found:
            return found
        parent, child = _os.path.dirname(parent), parent
        if parent == child:
            return "0+unknown"


def _cmake_source_dir(path):
    """The source directory a build's CMakeCache.txt at PATH names for speclab, else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("speclab_SOURCE_DIR:"):
                    return line.split("=", 1)[1].strip() or None
    except OSError:
        pass
    return None


def _pyproject_version(path):
    """The [project] version of PATH when it is speclab's pyproject.toml, else None."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        import tomllib  # Python ≥ 3.11
        project = tomllib.loads(text).get("project", {})
    except ImportError:  # Python 3.9, 3.10: the two keys of the [project] table, by line
        import re
        table = re.search(r"^\[project\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        project = dict(re.findall(r'^(name|version)\s*=\s*"([^"]*)"', table.group(1), re.M)
                       if table else [])
    except ValueError:  # not TOML
        return None
    if project.get("name") != "speclab":
        return None
    return project.get("version")


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
    if name == "__version__":
        # Found on first use: importlib.metadata alone would add 25 ms to every import.
        globals()["__version__"] = _version()
        return globals()["__version__"]
    if _extension_error is not None and name in __all__:
        raise ImportError(
            f"speclab.{name} needs the compiled extension speclab._speclab, which does not load "
            f"from {__path__[0]}: {_extension_error}; build it (pybind11: Debian's pybind11-dev) "
            "and use PYTHONPATH=build/python, or `pip install .`; speclab.io and speclab.plot "
            "work without it")
    raise AttributeError(f"module 'speclab' has no attribute {name!r}")
