#!/usr/bin/env bash
# `pip install .` as a user runs it: into a fresh virtual environment of Debian's python3 (with its
# system packages, for numpy), the build tools from the package index, then `import speclab` from another
# directory without PYTHONPATH. The installed package must be the one in the environment and give
# the same tokens, exact law and statistics as the build tree's package (build/python).
#
#   tests/pip/pip_install_test.sh SOURCE_DIR BUILD_PYTHON_DIR
#
# Exit 77 (ctest: skipped) when the package index cannot be reached, unless SPECLAB_PIP_REQUIRED=1 (CI).
set -euo pipefail
source_dir=$1
build_python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! /usr/bin/python3 -m venv --system-site-packages "$work/venv"; then
  echo "pip_install_test: /usr/bin/python3 -m venv failed; install python3-venv" \
    "(scripts/install-deps.sh)" >&2
  exit 1
fi
venv_python=$work/venv/bin/python
if ! "$venv_python" -m pip download --no-deps -q -d "$work/probe" scikit-build-core \
  >/dev/null 2>&1; then
  if [ "${SPECLAB_PIP_REQUIRED:-0}" = 1 ]; then
    echo "pip_install_test: the package index cannot be reached (scikit-build-core)" >&2
    exit 1
  fi
  echo "pip_install_test: skipped, the package index cannot be reached"
  exit 77
fi

start=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL=${SPECLAB_JOBS:-2} "$venv_python" -m pip install -q \
  --disable-pip-version-check "$source_dir"
echo "pip_install_test: pip install . took $((SECONDS - start)) s"

cat >"$work/check.py" <<'PY'
import sys
from fractions import Fraction

import numpy as np

import speclab
import speclab.io  # noqa: F401
import speclab.plot  # noqa: F401

expected_prefix = sys.argv[1]
assert speclab.__file__.startswith(expected_prefix), (speclab.__file__, expected_prefix)
rng = np.random.default_rng(7)
b, g, v = 16, 4, 50
p = rng.dirichlet(np.ones(v), (b, g + 1)).astype(np.float32)
q = rng.dirichlet(np.ones(v), (b, g)).astype(np.float32)
x = rng.integers(0, v, (b, g)).astype(np.int32)
r = speclab.verify_chain(p, q, x, seed=1234, n_draft=np.arange(b, dtype=np.int32) % (g + 1))
law = speclab.exact.step([[Fraction(1, 2), Fraction(1, 2)]] * 2, [[Fraction(3, 4), Fraction(1, 4)]])
print("emitted", r.emitted_tokens.tolist())
print("n_accepted", r.n_accepted.tolist())
print("law", sorted((k, str(f)) for k, f in law["distribution"].items()))
print("sample_size", speclab.stats.sample_size(8, 0.02, 1e-6))
PY
cd "$work"
env -u PYTHONPATH "$venv_python" check.py "$work/venv/" >installed.txt
PYTHONPATH=$build_python /usr/bin/python3 check.py "$build_python/" >build_tree.txt
if ! cmp -s installed.txt build_tree.txt; then
  echo "pip_install_test: the installed package and the build tree's disagree:" >&2
  diff installed.txt build_tree.txt >&2 || true
  exit 1
fi
echo "pip_install_test: the installed speclab ($("$venv_python" -c 'import speclab; print(speclab.__file__)')) gives the build tree's results"
