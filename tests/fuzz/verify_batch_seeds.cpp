// Writes the seed corpus of verify_batch_fuzz: small valid verify-batch inputs (docs/hdf5.md
// "speclab verify-batch input") in the layouts and file-format versions HDF5 writers produce —
// compact, contiguous and chunked + deflate datasets, fixed and variable-length strings, every
// method and optional field — each under libFuzzer's 4 KiB input limit (no metadata block
// aggregation). Usage: verify_batch_seeds DIR.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Seed {
  std::string name;
  H5F_libver_t libver = H5F_LIBVER_LATEST;
  H5D_layout_t layout = H5D_COMPACT;
  bool deflate = false;
  std::string method = "token";
  bool probs_draft = true;
  bool n_draft = false;
  bool leniency = false;
  bool step = false;
  bool variable_string = false;
  bool positions = false;  ///< the match verifiers' output positions
  std::string sampling;    ///< the match verifiers' sampling attribute; empty: absent
};

void dataset(hid_t file, const char* name, hid_t type, hid_t memory_type, const void* data,
             const std::vector<hsize_t>& dims, const Seed& seed) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (seed.deflate) {
    H5Pset_chunk(dcpl, static_cast<int>(dims.size()), dims.data());
    H5Pset_deflate(dcpl, 4);
  } else {
    H5Pset_layout(dcpl, seed.layout);
  }
  const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(set, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(set);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void scalar_attribute(hid_t file, const char* name, hid_t type, hid_t memory_type,
                      const void* value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, memory_type, value);
  H5Aclose(attribute);
  H5Sclose(space);
}

void string_attribute(hid_t file, const char* name, const std::string& value, bool variable) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  if (variable) {
    H5Tset_size(type, H5T_VARIABLE);
    const char* pointer = value.c_str();
    scalar_attribute(file, name, type, type, &pointer);
  } else {
    H5Tset_size(type, value.size());
    scalar_attribute(file, name, type, type, value.c_str());
  }
  H5Tclose(type);
}

// B = 2, γ = 2, V = 4: rows with zeros (as top-k leaves them), request 1 ragged at γ_1 = 1.
bool write(const std::string& dir, const Seed& seed) {
  const std::string path = dir + "/" + seed.name + ".h5";
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, seed.libver, H5F_LIBVER_LATEST);
  H5Pset_meta_block_size(fapl, 0);
  H5Pset_small_data_block_size(fapl, 0);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (file < 0) return false;
  const std::vector<float> target = {0.5f, 0.5f, 0.f,  0.f, 0.25f, 0.25f, 0.25f, 0.25f,
                                     0.f,  1.f,  0.f,  0.f, 0.1f,  0.2f,  0.3f,  0.4f,
                                     0.7f, 0.f,  0.3f, 0.f, 0.25f, 0.25f, 0.25f, 0.25f};
  const std::vector<float> draft = {0.25f, 0.75f, 0.f,  0.f,  1.f, 0.f,  0.f, 0.f,
                                    0.4f,  0.4f,  0.1f, 0.1f, 0.f, 0.5f, 0.f, 0.5f};
  const std::vector<int32_t> tokens = {1, 0, 2, 1};
  const std::vector<int32_t> n_draft = {2, 1};
  dataset(file, "probs_target", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, target.data(), {2, 3, 4}, seed);
  if (seed.probs_draft) {
    dataset(file, "probs_draft", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, draft.data(), {2, 2, 4}, seed);
  }
  dataset(file, "draft_tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, tokens.data(), {2, 2}, seed);
  if (seed.n_draft) {
    dataset(file, "n_draft", H5T_STD_I32LE, H5T_NATIVE_INT32, n_draft.data(), {2}, seed);
  }
  if (seed.positions) {
    const std::vector<int64_t> positions = {0, 41};
    dataset(file, "positions", H5T_STD_I64LE, H5T_NATIVE_INT64, positions.data(), {2}, seed);
  }
  string_attribute(file, "method", seed.method, seed.variable_string);
  const uint64_t random_seed = 1234;
  scalar_attribute(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &random_seed);
  if (seed.leniency) {
    const double leniency = 0.5;
    scalar_attribute(file, "leniency", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &leniency);
  }
  if (seed.step) {
    const int64_t step = 7;
    scalar_attribute(file, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &step);
  }
  if (!seed.sampling.empty()) string_attribute(file, "sampling", seed.sampling, false);
  return H5Fclose(file) >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: verify_batch_seeds DIR\n");
    return 2;
  }
  const Seed seeds[] = {
      {.name = "token_compact"},
      {.name = "token_contiguous_v18", .libver = H5F_LIBVER_V18, .layout = H5D_CONTIGUOUS},
      {.name = "token_deflate", .deflate = true, .n_draft = true},
      {.name = "greedy_no_draft", .method = "greedy", .probs_draft = false},
      {.name = "lenient_all",
       .method = "lenient",
       .n_draft = true,
       .leniency = true,
       .step = true,
       .variable_string = true},
      {.name = "coupled_positions", .method = "coupled", .n_draft = true, .positions = true},
      {.name = "sampled_match_gumbel",
       .method = "sampled-match",
       .probs_draft = false,
       .positions = true,
       .sampling = "gumbel"},
  };
  for (const Seed& seed : seeds) {
    if (!write(argv[1], seed)) {
      std::fprintf(stderr, "verify_batch_seeds: cannot write %s/%s.h5\n", argv[1],
                   seed.name.c_str());
      return 1;
    }
  }
  return 0;
}
