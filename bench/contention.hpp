// `speclab bench ... --contend N`: N competing processes, each spinning on a core for as long as
// the timed section runs, so a bench shows what a shared machine does to a fast path (an OpenMP
// team whose idle threads spin takes the cores the working threads need, docs/benchmarks.md).
#pragma once

#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <vector>

#include "core/base/error.hpp"

namespace speclab::cli {

class CompetingLoad {
 public:
  explicit CompetingLoad(int processes) {
    for (int i = 0; i < processes; ++i) {
      const pid_t pid = ::fork();
      if (pid < 0) {
        stop();
        throw IoError("bench --contend: cannot start a competing process (fork failed)");
      }
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the bench
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
      }
      children_.push_back(pid);
    }
  }
  CompetingLoad(const CompetingLoad&) = delete;
  CompetingLoad& operator=(const CompetingLoad&) = delete;
  ~CompetingLoad() { stop(); }

 private:
  void stop() {
    for (const pid_t pid : children_) ::kill(pid, SIGKILL);
    for (const pid_t pid : children_) ::waitpid(pid, nullptr, 0);
    children_.clear();
  }
  std::vector<pid_t> children_;
};

}  // namespace speclab::cli
