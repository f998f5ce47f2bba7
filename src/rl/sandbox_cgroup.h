// A cgroup of one sandbox run, below this process's own cgroup: memory.limit of the whole
// sandbox (all its processes together) and pids.max, with the counters that say a limit was hit
// (the OOM kills, the refused forks). cgroup v1 (a hierarchy per controller) or v2 (one unified);
// a controller that cannot be set up here (not mounted, not writable, not delegated) is left out
// and the sandbox falls back to rlimits (rl/sandbox.h).
//
// Not here: the rlimits, choosing between the two (sandbox.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace mmx::rl::detail {

class SandboxCgroup {
 public:
  // mem_bytes / pids_max <= 0: that controller is not wanted.
  SandboxCgroup(int64_t mem_bytes, int64_t pids_max);
  ~SandboxCgroup();  // removes the cgroup directories (retries while the last tasks exit)
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;

  bool has_mem() const { return !mem_dir_.empty(); }
  bool has_pids() const { return !pids_dir_.empty(); }
  int mem_version() const { return mem_v_; }
  int pids_version() const { return pids_v_; }
  // The cgroup.procs files to join (a task writes "0" into each): memory, pids ("" = none; the
  // same file twice in v2, where one directory holds both).
  std::string mem_procs() const { return has_mem() ? mem_dir_ + "/cgroup.procs" : ""; }
  std::string pids_procs() const { return has_pids() && pids_dir_ != mem_dir_ ? pids_dir_ + "/cgroup.procs" : ""; }
  int64_t oom_kills() const;     // processes killed for the memory limit so far
  int64_t pids_refused() const;  // forks refused for pids.max so far
  int64_t peak_bytes() const;    // peak memory of the cgroup (0 if unknown)

 private:
  std::string mem_dir_, pids_dir_;
  int mem_v_ = 0, pids_v_ = 0;
};

// The host-wide count of OOM kills (/proc/vmstat oom_kill; -1 if unknown): a SIGKILL that no
// limit explains is a host kill (infra_error) when this grew by more than the sandbox's own.
int64_t host_oom_kills();

}  // namespace mmx::rl::detail
