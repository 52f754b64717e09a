// Host side of the block verifier kernel (gpu/verify/verify_block.cuh): shape checks and the
// launch.
#include "gpu/verify/verify_block.cuh"

namespace speclab::gpu {
namespace {

void set_block_params(detail::BlockKernelArgs& args, const BlockParams& params,
                      const BlockKernelOptions& options) {
  detail::set_launch_seed(args, params.seed, params.step, options.seed_step);
  args.always_serial_z = options.always_serial_z ? 1 : 0;
}

template <bool kLogits>
cudaError_t launch_verify_block(detail::BlockKernelArgs& args, int64_t batch, int64_t gamma,
                                int64_t vocab, const BlockParams& params,
                                const BlockKernelOptions& options, cudaStream_t stream,
                                const ChainWorkspace& workspace = {}) {
  set_block_params(args, params, options);
  const size_t shared_bytes = detail::block_shared_bytes(gamma, args.n_chunks, kLogits);
  // The logits kernel reduces the rows' statistics in parallel when the batch is small.
  const bool rows =
      kLogits && !workspace.bytes.empty() &&
      detail::rows_in_parallel(batch, gamma, vocab, workspace, detail::device_multiprocessors());
  auto kernel =
      rows ? detail::verify_block_kernel<kLogits, kLogits> : detail::verify_block_kernel<kLogits>;
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  const detail::SplitArgs split =
      rows ? detail::split_args(workspace, batch, gamma, vocab, 1) : detail::SplitArgs{};
  const int64_t ctas = rows ? batch * (2 * gamma + 1) : batch;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(ctas)),
                       dim3(static_cast<unsigned>(detail::row_block_threads(vocab))), shared_bytes,
                       stream, args, split);
}

}  // namespace

cudaError_t verify_block(const ChainBatch& batch, const BlockParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const BlockKernelOptions& options) {
  // V5 reads the same inputs as V1 (probs_draft required) and writes the same outputs.
  detail::check_chain_launch(batch, ChainParams{ChainMethod::kToken, 1.0, params.seed, params.step},
                             output);
  detail::BlockKernelArgs args{};
  detail::fill_common_args(args, batch, output);
  const int slices =
      output.workspace.bytes.empty()
          ? 1
          : detail::vocab_split_slices(batch.batch, batch.gamma, batch.vocab, output.workspace,
                                       detail::device_multiprocessors());
  if (slices == 1) {
    return launch_verify_block<false>(args, batch.batch, batch.gamma, batch.vocab, params, options,
                                      stream);
  }
  set_block_params(args, params, options);
  const detail::SplitArgs split =
      detail::split_args(output.workspace, batch.batch, batch.gamma, batch.vocab, slices);
  const size_t shared_bytes = detail::block_shared_bytes(batch.gamma, args.n_chunks);
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(detail::verify_block_split_kernel,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  return launch_kernel(detail::verify_block_split_kernel,
                       dim3(static_cast<unsigned>(batch.batch * (batch.gamma + 1) * slices)),
                       dim3(static_cast<unsigned>(detail::split_block_threads(split.slice_chunks))),
                       shared_bytes, stream, args, split);
}

cudaError_t verify_block(const LogitsBatch& batch, const BlockParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const BlockKernelOptions& options) {
  detail::check_logits_launch(batch, true, output);
  detail::BlockKernelArgs args{};
  detail::fill_request_args(args, batch, output);
  args.target = detail::logits_source(batch.target);
  args.draft = detail::logits_source(batch.draft);
  return launch_verify_block<true>(args, batch.batch, batch.gamma, batch.vocab, params, options,
                                   stream, output.workspace);
}

}  // namespace speclab::gpu
