// gpu::philox_bits against core::philox_bits: the shared header gives identical bits on device.
#include "core/base/philox.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "gpu/base/philox_uniforms.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace speclab {
namespace {

TEST(Philox, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  std::vector<RandomAddress> addresses;
  for (uint32_t request = 0; request < 16; ++request) {
    for (uint32_t position = 0; position < 9; ++position) {
      for (uint32_t purpose = 1; purpose <= 6; ++purpose) {
        addresses.push_back({0x1234'5678'9abc'def0ull + request, request, 7 * request, position,
                             static_cast<Purpose>(purpose), position % 3});
      }
    }
  }
  const int64_t n = static_cast<int64_t>(addresses.size());
  RandomAddress* d_addresses = nullptr;
  uint32_t* d_bits = nullptr;
  SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_addresses), n * sizeof(RandomAddress)));
  SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_bits), n * sizeof(uint32_t)));
  SPECLAB_CUDA_CHECK(
      cudaMemcpy(d_addresses, addresses.data(), n * sizeof(RandomAddress), cudaMemcpyHostToDevice));
  SPECLAB_CUDA_CHECK(gpu::philox_bits(d_addresses, d_bits, n, nullptr));
  std::vector<uint32_t> bits(n);
  SPECLAB_CUDA_CHECK(cudaMemcpy(bits.data(), d_bits, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  cudaFree(d_addresses);
  cudaFree(d_bits);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bits[i], philox_bits(addresses[i])) << "address " << i;
  }
}

TEST(GpuRuntime, DeviceCountTreatsDriverErrorsAsZero) {
  // Without a driver cudaGetDeviceCount fails (cudaErrorInsufficientDriver, 35) and leaves the
  // count unwritten; device_count() must report 0 rather than garbage, and do so every time.
  const int count = gpu::device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(gpu::device_count(), count);
  if (count > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

}  // namespace
}  // namespace speclab
