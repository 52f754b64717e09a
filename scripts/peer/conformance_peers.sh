#!/usr/bin/env bash
# speclab conformance on two samplers speclab did not write, run on the CPU:
#   vllm-v0  a torch rejection sampler written the way vLLM V0's is (torch_v0_sampler.py)
#   hf       Hugging Face transformers' _speculative_sampling (assisted generation's sampler)
#   hf-uniforms  the same through the uniforms interface (its accept coin injected), on the
#            instances that hold tokens of target probability 0 (the edge probes need them)
# Needs a speclab build with its Python package (build/python) and Debian's python3-torch. The
# Hugging Face check downloads transformers and the few packages it imports (pinned below,
# ~15 MB, no torch) from the package index into build-peer/hf the first time. Not part of CI: the Hugging Face
# sampler runs one request per call, about 10 minutes at the default ε.
#
#   scripts/peer/conformance_peers.sh [--build DIR] [vllm-v0|hf|hf-uniforms|all]
#                                     [-- speclab conformance options]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
which=all
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    vllm-v0|hf|hf-uniforms|all) which=$1; shift ;;
    --) shift; break ;;
    *) echo "conformance_peers.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
done
speclab=$build/bin/speclab
[[ -x $speclab ]] || { echo "conformance_peers.sh: no $speclab; build speclab first" >&2; exit 2; }
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "conformance_peers.sh: /usr/bin/python3 has no torch; apt-get install python3-torch" >&2; exit 2; }
hf_dir=${SPECLAB_PEER_DIR:-build-peer}/hf
status=0
if [[ $which == all || $which == vllm-v0 ]]; then
  echo "== vLLM V0-style torch sampler (scripts/peer/torch_v0_sampler.py)"
  PYTHONPATH=scripts/peer $speclab conformance --callable conformance_samplers:vllm_v0 "$@" || status=1
fi
if [[ $which == all || $which == hf || $which == hf-uniforms ]]; then
  if ! PYTHONPATH=$hf_dir /usr/bin/python3 -c "import transformers.generation.utils" 2>/dev/null; then
    mkdir -p "$hf_dir"
    /usr/bin/python3 -m pip install --quiet --target "$hf_dir" --no-deps transformers==4.46.3 \
      huggingface_hub==0.26.5 tokenizers==0.20.3 safetensors==0.4.5 regex==2024.11.6 \
      filelock==3.16.1 tqdm==4.67.1
  fi
fi
hf_version() {
  PYTHONPATH=$hf_dir /usr/bin/python3 -c 'import transformers; print(transformers.__version__)'
}
if [[ $which == all || $which == hf ]]; then
  echo "== Hugging Face transformers $(hf_version) _speculative_sampling"
  PYTHONPATH=scripts/peer:$hf_dir $speclab conformance \
    --callable conformance_samplers:hf_speculative_sampling "$@" || status=1
fi
if [[ $which == all || $which == hf-uniforms ]]; then
  echo "== Hugging Face transformers $(hf_version) _speculative_sampling, injected uniforms"
  PYTHONPATH=scripts/peer:$hf_dir $speclab conformance --interface uniforms \
    --instances one-hot,disjoint,zero-tail \
    --callable conformance_samplers:hf_speculative_sampling_uniforms "$@" || status=1
fi
exit $status
