// The sandbox's three child processes (rl/sandbox.h has the picture): the helper, which makes the
// namespaces and kills everything at the end; init, pid 1 of the new pid namespace, which makes
// the read-only mounts and reaps; the worker, which drops to the sandbox uid, sets the rlimits and
// the seccomp filter and execs the command. Everything they use is prepared by the parent in a
// ChildPlan before fork; they allocate nothing and report over the status pipe in fixed-size Msgs.
//
// Not here: choosing the mechanisms, the cgroup (sandbox_cgroup.h), the parent's loop and the
// result (sandbox.cpp), building the seccomp program (sandbox_seccomp.h).
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>

namespace mmx::rl::detail {

// The helper moves the fds it needs to these numbers and closes every other one (so a concurrent
// sandbox's pipes or the caller's sockets never reach the command).
constexpr int kGoFd = 3;      // parent -> helper: one byte once the cgroup and the directory are ready
constexpr int kStatusFd = 4;  // helper, init, worker -> parent: Msg records
constexpr int kOutFd = 5;     // the command's stdout
constexpr int kErrFd = 6;     // the command's stderr
constexpr int kKillFd = 7;    // parent -> helper: closed (or one byte) = kill everything now
// The sandbox cgroups' cgroup.procs, opened by the parent before the mounts turn read-only; the
// worker writes "0" (itself) into each: only the command's processes are in the cgroup, not the
// helper and init, which, forked from a caller that may hold gigabytes, would look like the
// biggest process to the memory cgroup's OOM killer.
constexpr int kMemProcsFd = 8;
constexpr int kPidsProcsFd = 9;
constexpr int kNumFds = 7;  // kGoFd .. kPidsProcsFd

// Namespace / containment bits reported in Msg::flags.
enum : int32_t { kNsNet = 1, kNsPid = 2, kNsMount = 4, kNsUser = 8, kRoMount = 16 };

enum MsgKind : int32_t {
  kMsgInit = 1,       // helper: namespaces made (flags), init's pid in the host namespace (pid)
  kMsgMounts = 2,     // init: flags |= kRoMount when everything but the directory is read-only
  kMsgSetupFail = 3,  // any: step failed with errno err (the run is an infra_error)
  kMsgDone = 4,       // init: the worker ended with wait status `status`, its rusage
};

// Setup steps, for the infra_error text (step_name()).
enum Step : int32_t {
  kStepUnshare, kStepIdMap, kStepForkInit, kStepForkWorker, kStepFds, kStepRlimit, kStepSetgroups,
  kStepSetgid, kStepSetuid, kStepNoNewPrivs, kStepSeccomp, kStepChdir, kStepExec, kStepCgroup,
};
const char* step_name(int32_t step);

struct Msg {
  int32_t kind = 0, step = 0, err = 0, status = 0, flags = 0, pid = 0;
  int64_t utime_us = 0, stime_us = 0, maxrss_kb = 0;
};

struct ChildPlan {
  char* const* argv = nullptr;        // the command, null-terminated
  char* const* candidates = nullptr;  // paths to execve in order (PATH search done here), null-terminated
  char* const* envp = nullptr;
  const char* dir = nullptr;          // absolute working directory
  // namespaces: tried from the first set to the last; kNsUser is added by the helper when not root
  const int32_t* ns_sets = nullptr;   // bits kNsNet|kNsPid|kNsMount, terminated by -1
  bool user_ns = false;               // not root: a user namespace maps uid/gid to themselves
  uid_t outer_uid = 0;
  gid_t outer_gid = 0;
  const sock_fprog* seccomp = nullptr;  // loaded when the namespace set has no kNsNet (required then)
  bool drop_uid = false;              // root: the worker runs as uid = gid = uid_base + the helper's pid
  uid_t uid_base = 0;
  // rlimits for the worker (0 = leave as inherited). nproc is set only when it counts the sandbox's
  // processes alone: the fresh sandbox uid, or the caller's uid in a user namespace of its own.
  uint64_t cpu_s = 0, fsize_bytes = 0, as_bytes = 0, nproc = 0;
  bool cg_mem = false, cg_pids = false;  // kMemProcsFd / kPidsProcsFd are open
};

// The forked helper's whole life. fds: the child ends of the go, status, stdout, stderr and kill
// channels and the two cgroup.procs (-1: none), moved to kGoFd..kPidsProcsFd here. Never returns.
[[noreturn]] void helper_main(const ChildPlan& plan, const int fds[kNumFds]);

}  // namespace mmx::rl::detail
