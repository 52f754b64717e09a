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
  detail::fill_common_args(args, batch, output);
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
