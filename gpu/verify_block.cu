// Host side of the block verifier kernel (gpu/verify_block.cuh): shape checks and the launch.
#include "gpu/verify_block.cuh"

namespace speclab::gpu {

cudaError_t verify_block(const ChainBatch& batch, const BlockParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const BlockKernelOptions& options) {
  // V5 reads the same inputs as V1 (probs_draft required) and writes the same outputs.
  detail::check_chain_launch(batch, ChainParams{ChainMethod::kToken, 1.0, params.seed, params.step},
                             output);
  detail::BlockKernelArgs args{};
  args.probs_target = batch.probs_target.data();
  args.probs_draft = batch.probs_draft.data();
  args.draft_tokens = batch.draft_tokens.data();
  args.n_draft = batch.n_draft.empty() ? nullptr : batch.n_draft.data();
  args.request_ids = batch.request_ids.empty() ? nullptr : batch.request_ids.data();
  args.emitted_tokens = output.emitted_tokens.data();
  args.n_accepted = output.n_accepted.data();
  args.accept_mask = output.accept_mask.data();
  args.residual_fallback = output.residual_fallback.data();
  args.status = output.status.data();
  args.gamma = batch.gamma;
  args.vocab = batch.vocab;
  args.n_chunks = (batch.vocab + detail::kChunkTokens - 1) / detail::kChunkTokens;
  args.seed = params.seed;
  args.step = params.step;
  args.always_serial_z = options.always_serial_z ? 1 : 0;
  const size_t shared_bytes = detail::block_shared_bytes(batch.gamma, args.n_chunks);
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(detail::verify_block_kernel,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  return launch_kernel(detail::verify_block_kernel, dim3(static_cast<unsigned>(batch.batch)),
                       dim3(static_cast<unsigned>(detail::chain_block_threads(batch.vocab))),
                       shared_bytes, stream, args);
}

}  // namespace speclab::gpu
