// `speclab bench`: throughput beside its floor and its peer (bench/bench_*.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <sstream>

#include "bench/benches.hpp"
#include "cli/command.hpp"

namespace speclab::cli {
namespace {

// --quiet without --json: the bench's report goes to /dev/null for the length of the command
// (the benches print it as they measure); errors still reach stderr.
class QuietStdout {
 public:
  explicit QuietStdout(bool json) {
    if (!quiet() || json) return;
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) ::dup2(null, STDOUT_FILENO);
    if (null >= 0) ::close(null);
  }
  ~QuietStdout() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  int saved_ = -1;
};

void setup_bench(CLI::App& app) {
  auto* bench =
      app.add_subcommand("bench", "Throughput against the measured memory-bandwidth floor");
  bench->require_subcommand(1);
  auto* verify = bench->add_subcommand("verify", "Time the V1 chain verifier on synthetic batches");
  auto o = std::make_shared<BenchVerifyOptions>();
  verify->add_option("--batch", o->batch, "requests per batch (B)")->capture_default_str();
  verify->add_option("--gamma", o->gamma, "draft tokens per request (γ)")->capture_default_str();
  verify->add_option("--vocab", o->vocab, "vocabulary size (V)")->capture_default_str();
  verify->add_option("--repeats", o->repeats, "passes over the distinct batches")
      ->capture_default_str();
  verify
      ->add_option("--draft-noise", o->draft_noise,
                   "logit noise separating draft from target (sets the acceptance rate)")
      ->capture_default_str();
  verify
      ->add_option("--contend", o->contend,
                   "competing processes, each spinning on a core while the verifiers are timed")
      ->capture_default_str();
  verify->add_flag("--peer", o->peer,
                   "also time a vLLM V0-style torch sampler (scripts/peer/torch_v0_sampler.py, "
                   "Debian's python3-torch) on the same batches");
  verify->add_flag("--json", o->json, "print one JSON object");
  document_exit_statuses(*verify);
  verify->callback([o] {
    const QuietStdout quiet_stdout(o->json);
    run_bench_verify(*o);
  });

  auto* sampling = bench->add_subcommand(
      "sampling", "Time one token drawn by inverse CDF and by Gumbel-max (decode.sampling)");
  auto so = std::make_shared<BenchSamplingOptions>();
  sampling->add_option("--vocab", so->vocab, "vocabulary size (V)")->capture_default_str();
  sampling->add_option("--repeats", so->repeats, "passes over the rows")->capture_default_str();
  sampling->add_flag("--json", so->json, "print one JSON object");
  document_exit_statuses(*sampling);
  sampling->callback([so] {
    const QuietStdout quiet_stdout(so->json);
    run_bench_sampling(*so);
  });

  auto* decode = bench->add_subcommand(
      "decode", "Measured speculative-decoding speedup of a model pair beside the closed forms");
  auto d = std::make_shared<BenchDecodeOptions>();
  decode->add_option("--target", d->target, "target model (see `speclab models`)")
      ->capture_default_str();
  decode
      ->add_option(
          "--draft", d->draft,
          "draft model (see `speclab models`), or synthetic:RATE / synthetic:R1,R2,... for a "
          "draft built from the target's own rows so that Σ min(p, q) = RATE at every position "
          "(per draft position with a list, the last rate repeated): lossless, since the verifier "
          "checks its q as any draft's; the rate is exact wherever RATE ≥ min p (always for "
          "RATE ≥ 1/V), below that Σ min(p, q) = min p; a draft step costs at least one target "
          "step, so "
          "read r, o and emitted/step, not c or the speedup; the draft samples at T = 1")
      ->capture_default_str();
  decode->add_option("--gamma", d->gamma, "draft lengths to measure, e.g. --gamma 1,2,4")
      ->delimiter(',')
      ->capture_default_str();
  decode->add_option("--tokens", d->tokens, "tokens generated per request")->capture_default_str();
  decode->add_option("--batch", d->batch, "requests decoded together")->capture_default_str();
  decode->add_option("--temperature", d->temperature, "sampling temperature of both models")
      ->capture_default_str();
  decode->add_option("--seed", d->seed, "Philox seed")->capture_default_str();
  decode
      ->add_option("--workload", d->workload,
                   "models with a tokenizer: chat workload, a data/workloads name (rewrite, "
                   "chat) or a .toml file; default rewrite")
      ->capture_default_str();
  decode->add_option("--prompt", d->prompt,
                     "models with a tokenizer: one user message instead of a workload");
  decode
      ->add_option("--contend", d->contend,
                   "competing processes, each spinning on a core while the decodes are timed")
      ->capture_default_str();
  decode->add_flag("--json", d->json, "print one JSON object");
  document_exit_statuses(*decode);
  decode->callback([d] {
    const QuietStdout quiet_stdout(d->json);
    run_bench_decode(*d);
  });

  auto* gpu = bench->add_subcommand(
      "gpu",
      "Device kernels' effective bandwidth beside the copy bandwidth, and the device "
      "decoding loop beside core's (needs a CUDA device)");
  auto g = std::make_shared<BenchGpuOptions>();
  gpu->add_option("--repeats", g->repeats, "timed launches per kernel and shape (median)")
      ->capture_default_str();
  gpu->add_option("--tokens", g->tokens, "tokens per request in the decoding-loop comparison")
      ->capture_default_str();
  gpu->add_option("--vocab", g->vocab,
                  "vocabulary sizes, e.g. --vocab 128256 (default 32000,128256)")
      ->delimiter(',');
  gpu->add_option("--batch", g->batch, "batch sizes, e.g. --batch 1,64 (default 1,8,64,256)")
      ->delimiter(',');
  gpu->add_option("--gamma", g->gamma, "draft lengths, e.g. --gamma 5 (default 1,5,8)")
      ->delimiter(',');
  gpu->add_option("--only", g->only,
                  "only the kernel rows whose name contains this, e.g. \"verify_chain V1\" (the "
                  "decoding loop then does not run)");
  gpu->add_flag("--json", g->json, "print one JSON object");
  document_exit_statuses(
      *gpu, {{0,
              "measured, or nothing to measure (no CUDA device, or a build without CUDA: it "
              "says so)"}});
  gpu->callback([g] {
    const QuietStdout quiet_stdout(g->json);
    run_bench_gpu(*g);
  });
}

const CommandRegistrar kRegistrar{"bench", &setup_bench};

}  // namespace
}  // namespace speclab::cli
