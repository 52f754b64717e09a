#!/usr/bin/env bash
# Installs the Debian 12 packages speclab needs, only those that are missing. Idempotent.
#   scripts/install-deps.sh           the build, the tests, the figures and notebooks, the Coq
#                                     proofs (proofs/coq)
#   scripts/install-deps.sh cluster   also Slurm and munge, for the cluster test
#                                     (tests/cluster/slurm_sweep.sh)
set -euo pipefail

packages=(
  build-essential cmake git pkg-config ccache ninja-build
  libeigen3-dev
  libboost-dev libboost-math-dev libboost-fiber-dev libboost-context-dev
  libgmp-dev
  libhdf5-dev hdf5-tools
  librandom123-dev
  libtomlplusplus-dev
  nlohmann-json3-dev
  libcli11-dev
  libfmt-dev
  libgtest-dev libgmock-dev
  librapidcheck-dev
  libbenchmark-dev
  clang-14 libclang-rt-14-dev python3-pip python3-venv
  python3-h5py python3-numpy python3-pandas
  python3-matplotlib python3-scipy pybind11-dev python3-pybind11 python3-pytest jupyter-nbconvert python3-ipykernel python3-nbformat
  chromium
  coq libcoq-mathcomp-ssreflect libcoq-mathcomp-fingroup libcoq-mathcomp-algebra
  libcoq-mathcomp-algebra-tactics libcoq-mathcomp-zify
)
if [ "${1:-}" = cluster ]; then
  packages+=(slurm-wlm munge)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "speclab: all Debian packages present"
  exit 0
fi

echo "speclab: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
