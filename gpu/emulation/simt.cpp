// The SIMT scheduler of the emulation (gpu/emulation/simt.hpp): blocks one after another (in grid
// order, reversed or shuffled), each block's threads as Boost.Context fibers resumed round-robin
// (in thread order, reversed or shuffled every round: the Schedule). A thread runs until
// it reaches a barrier or a scheduling point (an atomic, __ldcv, __nanosleep); after each round
// the scheduler releases every warp barrier whose mask has fully arrived (computing shuffles and
// votes) and the block barrier once every live thread is there, and resumes the threads that
// yielded. No release possible with threads still waiting is a deadlock, and kSpinRounds rounds in
// which the only activity is threads reading again what they read before is a spin-wait that
// cannot end (a deadlock too): both are reported as failures naming the kernel, block and thread.
#include "gpu/emulation/simt.hpp"

#include <cxxabi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

#include "gpu/emulation/runtime_state.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace speclab::emulation {
namespace detail {

const ThreadBuiltins* current = nullptr;

namespace {

namespace ctx = boost::context;

constexpr unsigned kWarpSize = 32;

// Fiber stacks: mmap'd once and reused, with a PROT_NONE guard page below each so an overflow
// faults instead of corrupting a neighbour.
constexpr size_t kStackBytes = 256 * 1024;

class StackPool {
 public:
  ctx::stack_context allocate() {
    std::lock_guard lock(mutex_);
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      base = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      mprotect(base, page, PROT_NONE);
      base = static_cast<char*>(base) + page;
    }
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + kStackBytes;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) {
    std::lock_guard lock(mutex_);
    free_.push_back(static_cast<char*>(sc.sp) - sc.size);
  }

 private:
  std::mutex mutex_;
  std::vector<void*> free_;
};

StackPool& stack_pool() {
  static StackPool* pool = new StackPool;  // never destroyed: fibers may outlive static teardown
  return *pool;
}

struct PooledStack {
  ctx::stack_context allocate() { return stack_pool().allocate(); }
  void deallocate(ctx::stack_context& sc) { stack_pool().deallocate(sc); }
};

enum class Wait { kRunnable, kYield, kWarp, kBlock, kDone };

struct Thread {
  ThreadBuiltins builtins;
  unsigned linear = 0, lane = 0, warp = 0;
  Wait wait = Wait::kRunnable;
  // The warp exchange this thread waits in.
  WarpOp op = WarpOp::kSync;
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
  size_t bytes = 0;
  // The block barrier this thread waits at.
  BlockOp block_op = BlockOp::kSync;
  int predicate = 0, block_result = 0;
  // The last scheduling point: what it read where (a spin reads the same again).
  const void* spin_address = nullptr;
  uint64_t spin_value = 0;
  bool spun = false;     // has passed a scheduling point
  ctx::fiber fiber;      // the suspended thread, held by the scheduler
  ctx::fiber scheduler;  // the scheduler, held by the running thread
  void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;
};

struct StaticShared {
  const void* key = nullptr;
  size_t bytes = 0;
  std::unique_ptr<unsigned char[]> storage;  // exactly `bytes`, so ASan sees its bounds
};

struct Block {
  std::vector<Thread> threads;
  unsigned char* shared = nullptr;
  std::vector<StaticShared> statics;  // of this launch, created as threads first reach them
  Schedule schedule;
  uint64_t round = 0;     // rounds run in this launch (varies the shuffles)
  bool progress = false;  // in this round: memory changed, a new value read, a barrier reached
  unsigned stagnant = 0;  // rounds in a row without progress in which threads only yielded
  std::string failure;    // the first SIMT rule broken in this launch
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
};

Block* g_block = nullptr;
Thread* g_thread = nullptr;

std::string where(const Thread& t) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, "block (%u,%u,%u) thread (%u,%u,%u) (warp %u lane %u)",
                t.builtins.block_idx.x, t.builtins.block_idx.y, t.builtins.block_idx.z,
                t.builtins.thread_idx.x, t.builtins.thread_idx.y, t.builtins.thread_idx.z, t.warp,
                t.lane);
  return buffer;
}

void fail_block(const std::string& message) {
  if (g_block->failure.empty()) g_block->failure = message;
}

// AddressSanitizer must be told about every stack switch, or it reports the fibers' frames as
// overflows of the scheduler's stack (Boost.Context's fcontext does not annotate switches).
void asan_start_switch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                       [[maybe_unused]] size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}

void asan_finish_switch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** old_bottom,
                        [[maybe_unused]] size_t* old_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_size);
#endif
}

// Called by a thread at a barrier: back to the scheduler until released.
void suspend_current() {
  Thread* self = g_thread;
  asan_start_switch(&self->fake_stack, g_block->scheduler_stack_bottom,
                    g_block->scheduler_stack_size);
  self->scheduler = std::move(self->scheduler).resume();
  asan_finish_switch(self->fake_stack, nullptr, nullptr);
}

void resume(Thread& t) {
  g_thread = &t;
  current = &t.builtins;
  void* fake_stack = nullptr;
  asan_start_switch(&fake_stack, t.stack_bottom, t.stack_size);
  t.fiber = std::move(t.fiber).resume();
  asan_finish_switch(fake_stack, nullptr, nullptr);
  g_thread = nullptr;
  current = nullptr;
}

// The source lane of a shuffle, or -1 when the lane keeps its own value.
int shuffle_source(const Thread& t) {
  const int lane = static_cast<int>(t.lane);
  const int width = t.width;
  const int base = lane & ~(width - 1);
  const int offset = lane & (width - 1);
  switch (t.op) {
    case WarpOp::kShfl:
      return base + (t.arg & (width - 1));
    case WarpOp::kShflUp:
      return offset >= t.arg ? lane - t.arg : lane;
    case WarpOp::kShflDown:
      return offset + t.arg < width ? lane + t.arg : lane;
    case WarpOp::kShflXor: {
      const int source = lane ^ t.arg;
      return source >= base && source < base + width ? source : lane;
    }
    default:
      return -1;
  }
}

// Releases warp `w`'s waiters whose mask has fully arrived; returns whether any was released.
bool release_warp(Block& block, unsigned w, unsigned n_threads) {
  const unsigned first = w * kWarpSize;
  const unsigned last = first + kWarpSize < n_threads ? first + kWarpSize : n_threads;
  bool released = false;
  for (unsigned i = first; i < last; ++i) {
    Thread& t = block.threads[i];
    if (t.wait != Wait::kWarp) continue;
    const unsigned mask = t.mask;
    bool complete = true;
    for (unsigned j = first; j < last && complete; ++j) {
      const Thread& u = block.threads[j];
      if (!(mask >> u.lane & 1u) || u.wait == Wait::kDone) continue;
      complete = u.wait == Wait::kWarp && u.mask == mask;
    }
    if (!complete) continue;
    // Every lane named in the mask is here: compute the exchange for the whole group.
    unsigned votes = 0, group = 0;
    for (unsigned j = first; j < last; ++j) {
      const Thread& u = block.threads[j];
      if (u.wait != Wait::kWarp || u.mask != mask) continue;
      group |= 1u << u.lane;
      if (u.op != t.op) {
        fail_block(where(u) + " is in a different warp collective than " + where(t) +
                   " with the same mask");
      }
      if (u.op == WarpOp::kBallot || u.op == WarpOp::kAny || u.op == WarpOp::kAll) {
        int predicate = 0;
        std::memcpy(&predicate, &u.value, sizeof predicate);
        votes |= static_cast<unsigned>(predicate != 0) << u.lane;
      }
    }
    for (unsigned j = first; j < last; ++j) {
      Thread& u = block.threads[j];
      if (u.wait != Wait::kWarp || u.mask != mask) continue;
      switch (u.op) {
        case WarpOp::kSync:
          break;
        case WarpOp::kBallot:
          u.result = votes;
          break;
        case WarpOp::kAny:
          u.result = votes != 0;
          break;
        case WarpOp::kAll:
          u.result = votes == group;
          break;
        default: {
          const int source = shuffle_source(u);
          const Thread* s = source >= 0 ? &block.threads[first + source] : nullptr;
          // Reading a lane outside the mask, or one that has exited, is undefined in CUDA:
          // the emulation returns the poison pattern.
          if (s == nullptr || !(mask >> s->lane & 1u) || s->wait != Wait::kWarp) {
            std::memset(&u.result, kSharedPoison, sizeof u.result);
          } else {
            u.result = s->value;
          }
        }
      }
    }
    for (unsigned j = first; j < last; ++j) {
      Thread& u = block.threads[j];
      if (u.wait == Wait::kWarp && u.mask == mask) u.wait = Wait::kRunnable;
    }
    released = true;
  }
  return released;
}

bool release_block(Block& block) {
  int any = 0, all = 1, count = 0;
  bool someone_waits = false;
  for (const Thread& t : block.threads) {
    if (t.wait == Wait::kDone) continue;
    if (t.wait != Wait::kBlock) return false;
    someone_waits = true;
    any |= t.predicate != 0;
    all &= t.predicate != 0;
    count += t.predicate != 0;
  }
  if (!someone_waits) return false;
  for (Thread& t : block.threads) {
    if (t.wait != Wait::kBlock) continue;
    switch (t.block_op) {
      case BlockOp::kSync:
        t.block_result = 0;
        break;
      case BlockOp::kOr:
        t.block_result = any;
        break;
      case BlockOp::kAnd:
        t.block_result = all;
        break;
      case BlockOp::kCount:
        t.block_result = count;
        break;
    }
    t.wait = Wait::kRunnable;
  }
  return true;
}

std::string describe_deadlock(const Block& block) {
  unsigned at_block = 0, at_warp = 0;
  const Thread* example = nullptr;
  for (const Thread& t : block.threads) {
    if (t.wait == Wait::kBlock) ++at_block;
    if (t.wait == Wait::kWarp) {
      ++at_warp;
      if (example == nullptr) example = &t;
    }
  }
  std::string message = "deadlock: " + std::to_string(at_block) +
                        " threads wait at __syncthreads, " + std::to_string(at_warp) +
                        " at warp barriers";
  if (example != nullptr) {
    char mask[16];
    std::snprintf(mask, sizeof mask, "0x%08x", example->mask);
    message += " (first: " + where(*example) + " with mask " + mask + ")";
  }
  return message;
}

std::string describe_spin(const Block& block) {
  unsigned spinning = 0, at_block = 0, at_warp = 0;
  const Thread* example = nullptr;
  for (const Thread& t : block.threads) {
    if (t.wait == Wait::kYield) {
      ++spinning;
      if (example == nullptr) example = &t;
    }
    at_block += t.wait == Wait::kBlock;
    at_warp += t.wait == Wait::kWarp;
  }
  std::string message = "spin-wait deadlock: " + std::to_string(spinning) +
                        " threads read the same value again and again at an atomic or volatile "
                        "load, " +
                        std::to_string(kSpinRounds) +
                        " rounds with no write, barrier or exit in the block (" +
                        std::to_string(at_block) + " threads wait at __syncthreads, " +
                        std::to_string(at_warp) + " at warp barriers)";
  if (example != nullptr) {
    char text[96];
    std::snprintf(text, sizeof text, " at address %p reading 0x%" PRIx64, example->spin_address,
                  example->spin_value);
    message += "; first: " + where(*example) + text;
  }
  return message;
}

// Threads left suspended by a deadlock are never resumed or unwound: their fibers are kept
// reachable here and their stacks are not reused.
std::vector<ctx::fiber>& abandoned_fibers() {
  static auto* fibers = new std::vector<ctx::fiber>;
  return *fibers;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 0..n-1 in `order`; kShuffled is a Fisher-Yates permutation seeded by (seed, salt).
void fill_order(std::vector<unsigned>& out, unsigned n, Order order, uint64_t seed, uint64_t salt) {
  out.resize(n);
  for (unsigned i = 0; i < n; ++i) out[i] = order == Order::kReverse ? n - 1 - i : i;
  if (order != Order::kShuffled) return;
  uint64_t state = seed ^ (salt * 0xd1342543de82ef95ull);
  for (unsigned i = n; i > 1; --i) {
    const auto j = static_cast<unsigned>(splitmix64(state) % i);
    std::swap(out[i - 1], out[j]);
  }
}

Schedule schedule_from_environment() {
  const char* text = std::getenv("SPECLAB_EMU_SCHEDULE");
  if (text == nullptr || *text == 0) return {};
  try {
    return parse_schedule(text);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "speclab SIMT emulation: %s\n", e.what());
    std::exit(2);
  }
}

Schedule& schedule_setting() {
  static Schedule schedule = schedule_from_environment();
  return schedule;
}

void run_block(Block& block, const ThreadBuiltins& shape, size_t shared_bytes,
               const std::function<void()>& thread_body) {
  const unsigned n = shape.block_dim.x * shape.block_dim.y * shape.block_dim.z;
  block.threads.clear();
  block.threads.resize(n);
  std::memset(block.shared, kSharedPoison, shared_bytes);
  for (StaticShared& s : block.statics) std::memset(s.storage.get(), kSharedPoison, s.bytes);
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = block.threads[i];
    t.builtins = shape;
    t.builtins.thread_idx = {i % shape.block_dim.x, i / shape.block_dim.x % shape.block_dim.y,
                             i / (shape.block_dim.x * shape.block_dim.y)};
    t.linear = i;
    t.lane = i % kWarpSize;
    t.warp = i / kWarpSize;
    PooledStack allocator;
    const ctx::stack_context sc = allocator.allocate();
    t.stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    t.stack_size = sc.size;
    ctx::preallocated prealloc(sc.sp, sc.size, sc);
    t.fiber = ctx::fiber(
        std::allocator_arg, prealloc, allocator,
        [&t, &block, &thread_body](ctx::fiber&& scheduler) {
          t.scheduler = std::move(scheduler);
          asan_finish_switch(nullptr, &block.scheduler_stack_bottom, &block.scheduler_stack_size);
          thread_body();
          t.wait = Wait::kDone;
          asan_start_switch(nullptr, block.scheduler_stack_bottom, block.scheduler_stack_size);
          return std::move(t.scheduler);
        });
  }
  const unsigned n_warps = (n + kWarpSize - 1) / kWarpSize;
  unsigned alive = n;
  std::vector<unsigned> order;
  const uint64_t block_linear =
      shape.block_idx.x +
      static_cast<uint64_t>(shape.grid_dim.x) *
          (shape.block_idx.y + static_cast<uint64_t>(shape.grid_dim.y) * shape.block_idx.z);
  block.stagnant = 0;
  while (alive > 0) {
    fill_order(order, n, block.schedule.threads, block.schedule.seed,
               (block_linear << 20) ^ block.round++);
    block.progress = false;
    for (unsigned i : order) {
      Thread& t = block.threads[i];
      if (t.wait != Wait::kRunnable) continue;
      resume(t);
      // Reaching a barrier or the end is progress; a scheduling point says for itself.
      if (t.wait != Wait::kYield) block.progress = true;
    }
    alive = 0;
    for (const Thread& t : block.threads) alive += t.wait != Wait::kDone;
    if (alive == 0) break;
    bool released = false;
    for (unsigned w = 0; w < n_warps; ++w) released |= release_warp(block, w, n);
    released |= release_block(block);
    bool yielded = false;
    for (const Thread& t : block.threads) yielded |= t.wait == Wait::kYield;
    block.stagnant = released || block.progress ? 0 : block.stagnant + 1;
    if ((!released && !yielded) || block.stagnant >= kSpinRounds) {
      fail_block(yielded ? describe_spin(block) : describe_deadlock(block));
      for (Thread& t : block.threads) {
        if (t.wait != Wait::kDone) abandoned_fibers().push_back(std::move(t.fiber));
      }
      break;
    }
    for (Thread& t : block.threads) {
      if (t.wait == Wait::kYield) t.wait = Wait::kRunnable;
    }
  }
}

}  // namespace

void warp_exchange(WarpOp op, unsigned mask, const void* value, size_t bytes, int arg, int width,
                   void* result) {
  Thread* self = g_thread;
  if (!(mask >> self->lane & 1u) || (width & (width - 1)) != 0 || width < 1 ||
      width > static_cast<int>(kWarpSize)) {
    char text[64];
    std::snprintf(text, sizeof text, " mask 0x%08x width %d", mask, width);
    fail_block(where(*self) + " calls a warp collective with" + text +
               " (the caller must be in the mask, the width a power of two ≤ 32)");
    if (result != nullptr) std::memset(result, kSharedPoison, bytes > 0 ? bytes : 4);
    return;
  }
  self->op = op;
  self->mask = mask;
  self->arg = arg;
  self->width = width;
  self->bytes = bytes;
  self->value = 0;
  if (bytes > 0) std::memcpy(&self->value, value, bytes);
  self->wait = Wait::kWarp;
  suspend_current();
  if (result == nullptr) return;
  if (op == WarpOp::kBallot || op == WarpOp::kAny || op == WarpOp::kAll) {
    const unsigned vote = static_cast<unsigned>(self->result);
    std::memcpy(result, &vote, sizeof vote);
  } else {
    std::memcpy(result, &self->result, bytes);
  }
}

void scheduling_point(const void* address, uint64_t observed, bool modified) {
  Thread* self = g_thread;
  if (self == nullptr) return;  // host code (not a kernel): nothing to schedule
  if (modified || !self->spun || address != self->spin_address || observed != self->spin_value) {
    g_block->progress = true;
  }
  self->spun = true;
  self->spin_address = address;
  self->spin_value = observed;
  self->wait = Wait::kYield;
  suspend_current();
}

bool check_kernel_arguments(const void* kernel, const KernelArgument* arguments, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const KernelArgument& a = arguments[i];
    if (a.data == nullptr || a.bytes < sizeof(uintptr_t)) continue;
    const auto* bytes = static_cast<const unsigned char*>(a.data);
    for (size_t offset = 0; offset + sizeof(uintptr_t) <= a.bytes; offset += sizeof(uintptr_t)) {
      uintptr_t word = 0;
      std::memcpy(&word, bytes + offset, sizeof word);
      if (word == 0 || is_device_address(word)) continue;
      // A pointer parameter is a pointer: anything but null or device memory is wrong. In a
      // struct only a word that points into a host object is one (the rest are its numbers).
      std::string kind = host_memory_kind(word);
      if (kind.empty() && !a.pointer) continue;
      if (kind.empty()) kind = "not device memory";
      int status = 0;
      char* type = abi::__cxa_demangle(a.type, nullptr, nullptr, &status);
      char text[64];
      std::snprintf(text, sizeof text, "%#" PRIxPTR, word);
      std::string message = "kernel " + function_name(kernel) + ": argument " + std::to_string(i) +
                            " (" + (status == 0 ? type : a.type) + ")";
      std::free(type);
      if (!a.pointer) message += ", the word at byte " + std::to_string(offset) + ",";
      message += std::string(" is ") + text + ", " + kind +
                 ", not a device allocation: a device kernel faults on it (illegal address)";
      record_execution_failure(message, cudaErrorIllegalAddress);
      return false;
    }
  }
  return true;
}

int block_barrier(BlockOp op, int predicate) {
  Thread* self = g_thread;
  self->block_op = op;
  self->predicate = predicate;
  self->wait = Wait::kBlock;
  suspend_current();
  return self->block_result;
}

void* dynamic_shared() { return g_block->shared; }

void* static_shared(const void* key, size_t bytes) {
  for (StaticShared& s : g_block->statics) {
    if (s.key == key) return s.storage.get();
  }
  StaticShared s{key, bytes, std::unique_ptr<unsigned char[]>(new unsigned char[bytes])};
  std::memset(s.storage.get(), kSharedPoison, bytes);
  g_block->statics.push_back(std::move(s));
  return g_block->statics.back().storage.get();
}

cudaError_t run_grid(const void* kernel, dim3 grid, dim3 block_dim, size_t shared_bytes,
                     const std::function<void()>& thread_body) {
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  const unsigned long long threads =
      static_cast<unsigned long long>(block_dim.x) * block_dim.y * block_dim.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535 || threads == 0 || threads > kMaxThreadsPerBlock || block_dim.x > 1024 ||
      block_dim.y > 1024 || block_dim.z > 64) {
    set_last_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  if (shared_bytes > dynamic_shared_limit(kernel)) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  static std::mutex launch_mutex;  // one emulated launch at a time (the scheduler's globals)
  std::lock_guard lock(launch_mutex);
  // Exactly the requested bytes, so AddressSanitizer catches a read past dynamic shared memory.
  std::unique_ptr<unsigned char[]> shared(new unsigned char[shared_bytes > 0 ? shared_bytes : 1]);
  Block block;
  block.shared = shared_bytes > 0 ? shared.get() : nullptr;
  block.schedule = schedule_setting();
  static uint64_t launches = 0;  // varies the block shuffle from one launch to the next
  g_block = &block;
  ThreadBuiltins shape;
  shape.block_dim = block_dim;
  shape.grid_dim = grid;
  const unsigned long long n_blocks = static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
  if (n_blocks > 0xffffffffull) {
    g_block = nullptr;
    set_last_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  std::vector<unsigned> blocks;
  fill_order(blocks, static_cast<unsigned>(n_blocks), block.schedule.blocks,
             block.schedule.seed ^ 0x5bd1e995u, launches++);
  for (size_t i = 0; i < blocks.size() && block.failure.empty(); ++i) {
    const unsigned b = blocks[i];
    shape.block_idx = {b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)};
    run_block(block, shape, shared_bytes, thread_body);
  }
  g_block = nullptr;
  if (!block.failure.empty()) {
    record_execution_failure("kernel " + function_name(kernel) + ": " + block.failure,
                             cudaErrorLaunchFailure);
  }
  return cudaSuccess;
}

}  // namespace detail

Schedule set_schedule(const Schedule& schedule) {
  const Schedule previous = detail::schedule_setting();
  detail::schedule_setting() = schedule;
  return previous;
}

Schedule current_schedule() { return detail::schedule_setting(); }

Schedule parse_schedule(const std::string& text) {
  Schedule s;
  if (text == "forward") return s;
  if (text == "reverse") return {Order::kReverse, Order::kReverse, 0};
  if (text.rfind("shuffle", 0) == 0) {
    s = {Order::kShuffled, Order::kShuffled, 1};
    if (text.size() == 7) return s;
    char* end = nullptr;
    if (text[7] == ':' && text.size() > 8) {
      s.seed = std::strtoull(text.c_str() + 8, &end, 10);
      if (end != nullptr && *end == 0) return s;
    }
  }
  throw std::invalid_argument("SPECLAB_EMU_SCHEDULE: '" + text +
                              "' is not forward, reverse, shuffle or shuffle:SEED");
}

}  // namespace speclab::emulation
