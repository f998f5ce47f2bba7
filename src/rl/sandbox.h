// The sandbox for verifiable rewards (docs/rl.md "Sandbox"): runs one command under CPU, memory,
// process-count, file-size, output and wall-clock limits, in its own working directory, with no
// network, and says how it ended — separating a failure of the sandbox itself (infra_error) from
// a failure of the task (non-zero exit, signal, limit hit).
//
//   parent (this process) ──fork──▶ helper (host namespaces, root or the caller; in the cgroup)
//        └─ unshare(net, pid, mount [, user]) ──fork──▶ init (pid 1 of the new pid namespace:
//           read-only mounts, /proc) ──fork──▶ worker (rlimits, the sandbox uid, seccomp) ─exec─▶ CMD
//
// How each limit is enforced is chosen per run from what this kernel allows and reported in
// SandboxResult (the *_via fields; `mmx sandbox --verbose` prints them). The mechanisms, their
// fallbacks and the numbers measured on the dev machine are in docs/rl.md.
//
// Not here: the CLI (tools/mmx/cmd_sandbox.cpp), the reward functions that use it (rl/), a disk
// quota (many files each under the file-size limit can still fill the working directory's disk).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mmx::rl {

// Which mechanism to use for a limit; kAuto picks the strongest this kernel allows. The others
// force one (a forced mechanism that is unavailable is an infra_error): the tests use them to
// exercise the fallbacks on a machine where the preferred one works.
enum class NetVia { kAuto, kNamespace, kSeccomp };
enum class MemVia { kAuto, kCgroup, kRlimit };
enum class ProcsVia { kAuto, kCgroup, kRlimit };

struct SandboxOptions {
  double cpu_s = 10;      // CPU seconds per process (RLIMIT_CPU, rounded up; SIGXCPU, then SIGKILL 1 s later)
  int64_t mem_mb = 512;   // memory of the whole sandbox (cgroup) or address space per process (RLIMIT_AS)
  int procs = 32;         // processes + threads alive at once; the first refused fork ends the run
  double wall_s = 30;     // wall clock from start to the end of the last process
  int64_t out_kb = 1024;  // kept bytes of stdout and of stderr, each; one byte more ends the run
  int64_t file_mb = 64;   // largest file the command may write (RLIMIT_FSIZE); past it: limit "output"
  std::string dir;        // working directory (must exist; the sandbox uid is given it for the run,
                          // and what it wrote is handed back to the directory's owner after);
                          // empty = a fresh directory under $TMPDIR or /tmp, removed after
  std::vector<std::string> env;  // NAME=VALUE added to the clean environment (PATH, HOME=TMPDIR=dir, LANG)
  NetVia net_via = NetVia::kAuto;
  MemVia mem_via = MemVia::kAuto;
  ProcsVia procs_via = ProcsVia::kAuto;
};

enum class Limit { kNone, kCpu, kMem, kProcs, kWall, kOutput };
const char* limit_name(Limit l);  // "cpu", "mem", ... (kNone: nullptr)

struct SandboxResult {
  std::optional<int> exit;    // the command's exit status when it exited
  std::optional<int> signal;  // the signal that ended it (9 when the sandbox killed it at a limit)
  bool timed_out = false;     // limit is cpu or wall
  Limit limit = Limit::kNone;  // the first limit hit
  std::string out, err;       // captured stdout / stderr (at most out_kb KiB each)
  std::optional<std::string> infra_error;  // the sandbox failed, not the task: nothing else is meaningful
  double wall_s = 0;

  // How it was contained on this run (not in the JSON contract; `mmx sandbox --verbose`).
  std::string net_via;    // "netns" (a new network namespace) | "seccomp" (socket(): AF_UNIX only)
  std::string mem_via;    // "cgroup-v1" | "cgroup-v2" (memory.limit of the whole sandbox) | "rlimit-as"
  std::string procs_via;  // "cgroup-v1" | "cgroup-v2" (pids.max) | "rlimit-nproc"
  std::string fs_via;     // "ro-mount" (everything read-only but dir) | "uid" (only the uid's rights)
  bool pid_ns = false;    // in its own pid namespace (all its processes die with its init)
  int64_t uid = -1;       // the uid the command ran as
  double cpu_s = 0;       // the command's CPU time (user + sys, with its waited-for children)
  int64_t peak_kb = 0;    // peak memory: the cgroup's when there is one, else the command's max RSS
};

// Runs argv[0] (searched in PATH) with argv. Never throws for anything the command does; bad
// options (empty argv, a limit <= 0) throw mmx::Error.
SandboxResult run_sandbox(const std::vector<std::string>& argv, const SandboxOptions& o);

// The stable JSON contract of `mmx sandbox`: exit, signal, timed_out, limit, stdout, stderr,
// infra_error, wall_s — exactly these keys, in this order.
nlohmann::ordered_json to_json(const SandboxResult& r);

}  // namespace mmx::rl
