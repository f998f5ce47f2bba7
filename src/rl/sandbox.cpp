// The sandbox's parent side (rl/sandbox.h): chooses the mechanisms, prepares the directory, the
// cgroup and the ChildPlan, forks the helper, then watches the pipes, the cgroup counters and the
// clock until the helper is gone, and turns what happened into a SandboxResult.
#include "rl/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "rl/sandbox_cgroup.h"
#include "rl/sandbox_child.h"
#include "rl/sandbox_seccomp.h"

namespace mmx::rl {

const char* limit_name(Limit l) {
  switch (l) {
    case Limit::kNone: return nullptr;
    case Limit::kCpu: return "cpu";
    case Limit::kMem: return "mem";
    case Limit::kProcs: return "procs";
    case Limit::kWall: return "wall";
    case Limit::kOutput: return "output";
  }
  return nullptr;
}

nlohmann::ordered_json to_json(const SandboxResult& r) {
  nlohmann::ordered_json j;
  j["exit"] = r.exit ? nlohmann::ordered_json(*r.exit) : nlohmann::ordered_json(nullptr);
  j["signal"] = r.signal ? nlohmann::ordered_json(*r.signal) : nlohmann::ordered_json(nullptr);
  j["timed_out"] = r.timed_out;
  const char* l = limit_name(r.limit);
  j["limit"] = l ? nlohmann::ordered_json(l) : nlohmann::ordered_json(nullptr);
  j["stdout"] = r.out;
  j["stderr"] = r.err;
  j["infra_error"] = r.infra_error ? nlohmann::ordered_json(*r.infra_error) : nlohmann::ordered_json(nullptr);
  j["wall_s"] = std::round(r.wall_s * 1000.0) / 1000.0;
  return j;
}

namespace {

using detail::Msg;

// The sandbox uid is kUidBase + the helper's pid: unique among running sandboxes (the helper lives
// for the whole run), so RLIMIT_NPROC and the cleanup sweep count this run's processes only.
constexpr uid_t kUidBase = 1000000;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

bool make_pipe(Fd* r, Fd* w) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  r->fd = p[0];
  w->fd = p[1];
  return true;
}

// Processes of `uid` now (the rlimit fallback's process count; /proc/N/status "Uid:" = real uid).
int count_uid_procs(uid_t uid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::ifstream f(e.path() / "status");
    std::string line;
    while (std::getline(f, line))
      if (line.compare(0, 4, "Uid:") == 0) {
        n += std::strtoul(line.c_str() + 4, nullptr, 10) == uid;
        break;
      }
  }
  return n;
}

// Processes in the pid namespace `link` (readlink of /proc/N/ns/pid) now, its init included (the
// rlimit fallback when not root: the sandbox runs as the caller's uid, in a namespace of its own).
int count_ns_procs(const std::string& link) {
  int n = 0;
  std::error_code ec;
  char buf[64];
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    const ssize_t k = readlink((e.path() / "ns/pid").c_str(), buf, sizeof buf);
    n += k > 0 && std::string(buf, size_t(k)) == link;
  }
  return n;
}

// A file the command wrote up to the file-size limit (a child that died of SIGXFSZ, or one that
// ignored it, leaves one exactly that big): a regular file in dir modified since `since` (the
// coarse clock file times use), owned by the sandbox uid when it has one of its own (uid >= 0).
bool hit_file_limit(const std::string& dir, uint64_t limit, const timespec& since, int64_t uid) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) < limit) continue;
    if (uid >= 0 && st.st_uid != uid_t(uid)) continue;
    if (st.st_mtim.tv_sec > since.tv_sec || (st.st_mtim.tv_sec == since.tv_sec && st.st_mtim.tv_nsec >= since.tv_nsec))
      return true;
  }
  return false;
}

// Everything the sandbox uid left in dir goes back to the directory's owner (no symlink followed).
void hand_back(const std::string& dir, uid_t from, uid_t uid, gid_t gid) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) == 0 && st.st_uid == from) lchown(it->path().c_str(), uid, gid);
  }
  lchown(dir.c_str(), uid, gid);
}

bool mentions_oom(const std::string& s) {
  for (const char* k : {"MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory"})
    if (s.find(k) != std::string::npos) return true;
  return false;
}

// The command's name for messages.
std::string quoted(const std::string& s) { return "'" + s + "'"; }

struct Strings {  // NUL-terminated arrays of C strings for the ChildPlan, owned here
  std::vector<std::string> s;
  std::vector<char*> p;
  char* const* finish() {
    p.clear();
    for (std::string& x : s) p.push_back(x.data());
    p.push_back(nullptr);
    return p.data();
  }
};

}  // namespace

SandboxResult run_sandbox(const std::vector<std::string>& argv, const SandboxOptions& o) {
  if (argv.empty() || argv[0].empty()) fail("sandbox: no command given (put it after --)");
  if (!(o.cpu_s > 0) || o.mem_mb <= 0 || o.procs <= 0 || !(o.wall_s > 0) || o.out_kb <= 0 || o.file_mb <= 0)
    fail("sandbox: every limit must be > 0 (cpu {} s, mem {} MB, procs {}, wall {} s, out {} KB, file {} MB)",
         o.cpu_s, o.mem_mb, o.procs, o.wall_s, o.out_kb, o.file_mb);
  SandboxResult r;
  const double t0 = now_s();
  timespec start_time = {};
  clock_gettime(CLOCK_REALTIME_COARSE, &start_time);
  const bool root = geteuid() == 0;

  // The working directory.
  std::string dir;
  bool fresh = o.dir.empty();
  struct stat dir_st = {};
  if (fresh) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mmx-sandbox-XXXXXX";
    if (!mkdtemp(templ.data())) {
      r.infra_error = fmt::format("could not create a working directory from {}: {}", templ, strerror(errno));
      return r;
    }
    char buf[PATH_MAX];
    dir = realpath(templ.c_str(), buf) ? buf : templ;  // absolute: the mounts and chdir need it
  } else {
    char buf[PATH_MAX];
    if (!realpath(o.dir.c_str(), buf) || stat(buf, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) {
      r.infra_error = fmt::format("the working directory {} is not an existing directory", o.dir);
      return r;
    }
    dir = buf;
  }
  struct Cleanup {  // whatever happens below: the fresh directory goes, a given one is handed back
    const std::string& dir;
    bool fresh;
    const struct stat& owner;
    int64_t lent_to = -1;  // the uid the directory was given to
    ~Cleanup() {
      std::error_code ec;
      if (fresh) std::filesystem::remove_all(dir, ec);
      else if (lent_to >= 0) hand_back(dir, uid_t(lent_to), owner.st_uid, owner.st_gid);
    }
  } cleanup{dir, fresh, dir_st};

  // Memory and process count: a cgroup when this machine grants one, else rlimits.
  const int64_t mem_bytes = o.mem_mb << 20;
  // Only the command's processes join it (rl/sandbox_child.h kMemProcsFd): pids.max = procs.
  detail::SandboxCgroup cg(o.mem_via != MemVia::kRlimit ? mem_bytes : 0,
                           o.procs_via != ProcsVia::kRlimit ? int64_t(o.procs) : 0);
  if (o.mem_via == MemVia::kCgroup && !cg.has_mem()) {
    r.infra_error = "no writable memory cgroup here (need root and cgroup v1, or a delegated v2 subtree)";
    return r;
  }
  if (o.procs_via == ProcsVia::kCgroup && !cg.has_pids()) {
    r.infra_error = "no writable pids cgroup here (need root and cgroup v1, or a delegated v2 subtree)";
    return r;
  }
  r.mem_via = cg.has_mem() ? fmt::format("cgroup-v{}", cg.mem_version()) : "rlimit-as";
  r.procs_via = cg.has_pids() ? fmt::format("cgroup-v{}", cg.pids_version()) : "rlimit-nproc";

  // Network: a network namespace, else (or when asked) the seccomp filter.
  std::string seccomp_why;
  const sock_fprog* seccomp = o.net_via != NetVia::kNamespace ? detail::net_seccomp_program(&seccomp_why) : nullptr;
  if (o.net_via == NetVia::kSeccomp && !seccomp) {
    r.infra_error = seccomp_why;
    return r;
  }
  using namespace detail;
  // The namespace sets to try, strongest first (rl/sandbox_child.h).
  std::vector<int32_t> ns_sets = {kNsNet | kNsPid | kNsMount, kNsPid | kNsMount, kNsNet, 0, -1};
  if (o.net_via == NetVia::kNamespace) ns_sets = {kNsNet | kNsPid | kNsMount, kNsNet, -1};
  if (o.net_via == NetVia::kSeccomp) ns_sets = {kNsPid | kNsMount, 0, -1};

  // The plan.
  Strings args, cands, env;
  args.s = argv;
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  if (argv[0].find('/') != std::string::npos) {
    cands.s.push_back(argv[0]);
  } else {
    size_t a = 0;
    for (;;) {
      const size_t b = path.find(':', a);
      const std::string d = path.substr(a, b == std::string::npos ? std::string::npos : b - a);
      cands.s.push_back((d.empty() ? dir : d) + "/" + argv[0]);
      if (b == std::string::npos) break;
      a = b + 1;
    }
  }
  env.s = {"PATH=" + path, "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8"};
  env.s.insert(env.s.end(), o.env.begin(), o.env.end());
  ChildPlan plan;
  plan.argv = args.finish();
  plan.candidates = cands.finish();
  plan.envp = env.finish();
  plan.dir = dir.c_str();
  plan.ns_sets = ns_sets.data();
  plan.user_ns = !root;
  plan.outer_uid = geteuid();
  plan.outer_gid = getegid();
  plan.seccomp = seccomp;
  plan.drop_uid = root;
  plan.uid_base = kUidBase;
  plan.cpu_s = uint64_t(std::ceil(o.cpu_s));
  plan.fsize_bytes = uint64_t(o.file_mb) << 20;
  plan.as_bytes = cg.has_mem() ? 0 : uint64_t(mem_bytes);
  Fd mem_procs, pids_procs;  // opened here: the worker joins through them after the mounts turn read-only
  if (cg.has_mem()) mem_procs.fd = open(cg.mem_procs().c_str(), O_WRONLY | O_CLOEXEC);
  if (!cg.pids_procs().empty()) pids_procs.fd = open(cg.pids_procs().c_str(), O_WRONLY | O_CLOEXEC);
  if ((cg.has_mem() && mem_procs.fd < 0) || (!cg.pids_procs().empty() && pids_procs.fd < 0)) {
    r.infra_error = fmt::format("could not open the sandbox cgroup's cgroup.procs: {}", strerror(errno));
    return r;
  }
  plan.cg_mem = mem_procs.fd >= 0;
  plan.cg_pids = pids_procs.fd >= 0;
  // With pids.max the cgroup refuses first (and counts it); RLIMIT_NPROC one above is the backstop.
  // Not root: the count is the user namespace's, which holds the helper and init too.
  plan.nproc = uint64_t(o.procs) + (cg.has_pids() ? 1 : 0) + (root ? 0 : 2);

  // Channels: go (a socket pair: send() cannot raise SIGPIPE), status, stdout, stderr, kill.
  Fd go_p, go_c, st_r, st_w, out_r, out_w, err_r, err_w, kill_r, kill_w;
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 || !make_pipe(&st_r, &st_w) ||
      !make_pipe(&out_r, &out_w) || !make_pipe(&err_r, &err_w) || !make_pipe(&kill_r, &kill_w)) {
    r.infra_error = fmt::format("could not create the sandbox's pipes: {}", strerror(errno));
    return r;
  }
  go_p.fd = sp[0];
  go_c.fd = sp[1];
  const int64_t host_oom0 = host_oom_kills();
  const pid_t helper = fork();
  if (helper < 0) {
    r.infra_error = fmt::format("fork failed: {}", strerror(errno));
    return r;
  }
  if (helper == 0) {
    const int fds[kNumFds] = {go_c.fd, st_w.fd, out_w.fd, err_w.fd, kill_r.fd, mem_procs.fd, pids_procs.fd};
    helper_main(plan, fds);
  }
  go_c.reset();
  st_w.reset();
  out_w.reset();
  err_w.reset();
  kill_r.reset();
  mem_procs.reset();
  pids_procs.reset();
  const uid_t uid = root ? kUidBase + uid_t(helper) : geteuid();
  r.uid = uid;

  // Hand the directory to the sandbox uid, start the helper.
  std::string start_error;
  if (root && chown(dir.c_str(), uid, uid) != 0)
    start_error = fmt::format("could not give {} to the sandbox uid: {}", dir, strerror(errno));
  if (root) cleanup.lent_to = uid;
  if (start_error.empty() && send(go_p.fd, "g", 1, MSG_NOSIGNAL) != 1)
    start_error = fmt::format("could not start the sandbox's helper: {}", strerror(errno));
  go_p.reset();  // on failure, the helper reads EOF and exits

  // Watch until the helper is gone.
  const int64_t cap = o.out_kb << 10;
  const double deadline = t0 + o.wall_s;
  Limit reason = Limit::kNone;
  bool killing = !start_error.empty();
  if (killing) kill_w.reset();
  Fd pidfd(int(syscall(SYS_pidfd_open, helper, 0)));
  std::string status_bytes;
  std::vector<Msg> msgs;
  bool helper_done = false;
  double helper_end = 0, next_scan = 0, oom_at = 0;
  int32_t ns_flags = 0, mounts = 0;
  bool have_init = false;
  std::string ns_link;  // init's pid namespace, for count_ns_procs
  char buf[65536];
  auto start_kill = [&](Limit why) {
    if (killing) return;
    killing = true;
    reason = why;
    kill_w.reset();  // the helper kills init: the pid namespace (or the group and the uid) dies
  };
  for (;;) {
    const double now = now_s();
    if (!helper_done && now >= deadline) start_kill(Limit::kWall);
    // Counters: every 20 ms (cgroup files) / 100 ms (the /proc scan of the rlimit fallback).
    if (!killing && now >= next_scan) {
      // An OOM kill: 100 ms for the worker's own end to be reported (when it was the victim),
      // then the rest goes too.
      if (oom_at == 0 && cg.oom_kills() > 0) oom_at = now;
      if (oom_at > 0 && now > oom_at + 0.1) start_kill(Limit::kMem);
      else if (cg.pids_refused() > 0) start_kill(Limit::kProcs);
      else if (!cg.has_pids() && root && have_init && count_uid_procs(uid) >= o.procs) start_kill(Limit::kProcs);
      else if (!cg.has_pids() && !ns_link.empty() && count_ns_procs(ns_link) >= o.procs + 1) start_kill(Limit::kProcs);
      next_scan = now + (cg.has_pids() || !root ? 0.02 : 0.1);
    }
    // Done: the helper is gone and the pipes are drained (or, after 200 ms, held open by a process
    // that escaped every kill — only possible without a pid namespace and without the sandbox uid).
    if (helper_done && ((out_r.fd < 0 && err_r.fd < 0 && st_r.fd < 0) || now > helper_end + 0.2)) break;
    struct pollfd f[4] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}, {st_r.fd, POLLIN, 0},
                          {helper_done ? -1 : pidfd.fd, POLLIN, 0}};
    double wait = std::min(deadline - now, next_scan - now);
    if (killing || helper_done || pidfd.fd < 0) wait = std::min(wait, 0.01);
    const int n = poll(f, 4, std::max(0, int(std::ceil(wait * 1000))));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!f[i].revents) continue;
      Fd& fd = i == 0 ? out_r : err_r;
      std::string& dst = i == 0 ? r.out : r.err;
      const ssize_t k = read(fd.fd, buf, sizeof buf);
      if (k <= 0) {
        if (k == 0 || errno != EINTR) fd.reset();
        continue;
      }
      const int64_t room = cap - int64_t(dst.size());
      dst.append(buf, size_t(std::min<int64_t>(room, k)));
      if (k > room) start_kill(Limit::kOutput);
    }
    if (f[2].revents) {
      const ssize_t k = read(st_r.fd, buf, sizeof buf);
      if (k <= 0) {
        if (k == 0 || errno != EINTR) st_r.reset();
      } else {
        status_bytes.append(buf, size_t(k));
        while (status_bytes.size() >= sizeof(Msg)) {
          Msg m;
          std::memcpy(&m, status_bytes.data(), sizeof m);
          status_bytes.erase(0, sizeof m);
          msgs.push_back(m);
          if (m.kind == kMsgInit) {
            ns_flags = m.flags;
            have_init = true;
            char link[64];
            const ssize_t n = readlink(fmt::format("/proc/{}/ns/pid", m.pid).c_str(), link, sizeof link);
            if (!root && (ns_flags & kNsPid) && n > 0) ns_link.assign(link, size_t(n));
          }
          if (m.kind == kMsgMounts) mounts = m.flags;
        }
      }
    }
    if (!helper_done && (f[3].revents || pidfd.fd < 0 || killing)) {
      int st = 0;
      if (waitpid(helper, &st, WNOHANG) == helper) {
        helper_done = true;
        helper_end = now_s();
      }
    }
  }
  if (!helper_done)
    while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
    }
  r.wall_s = (helper_done ? helper_end : now_s()) - t0;

  // What happened.
  r.pid_ns = ns_flags & kNsPid;
  r.net_via = (ns_flags & kNsNet) ? "netns" : "seccomp";
  r.fs_via = (mounts & kRoMount) ? "ro-mount" : root ? "uid" : "none";
  if (!root && !(ns_flags & kNsUser) && !cg.has_pids()) r.procs_via = "none";
  const Msg* done = nullptr;
  const Msg* setup_fail = nullptr;
  for (const Msg& m : msgs) {
    if (m.kind == kMsgDone) done = &m;
    if (m.kind == kMsgSetupFail && !setup_fail) setup_fail = &m;
  }
  const int64_t oom = cg.oom_kills(), refused = cg.pids_refused(), host_oom1 = host_oom_kills();
  r.peak_kb = cg.peak_bytes() / 1024;
  if (!start_error.empty()) {
    r.infra_error = start_error;
  } else if (setup_fail) {
    const int e = setup_fail->err;
    r.infra_error = setup_fail->step == kStepExec
                        ? fmt::format("could not start {}: {}{}", quoted(argv[0]), strerror(e),
                                      e == ENOENT || e == EACCES ? " (not in PATH, or not executable by the sandbox uid)" : "")
                        : fmt::format("sandbox setup failed: {}: {}", step_name(setup_fail->step), strerror(setup_fail->err));
    if (setup_fail->step == kStepChdir && root)
      *r.infra_error += fmt::format(" (the sandbox uid needs search permission on every parent of {})", dir);
    if (setup_fail->step == kStepSeccomp && !seccomp_why.empty())
      *r.infra_error += fmt::format(" (no network namespace either: {})", seccomp_why);
  } else if (done) {
    if (WIFEXITED(done->status)) r.exit = WEXITSTATUS(done->status);
    if (WIFSIGNALED(done->status)) r.signal = WTERMSIG(done->status);
    r.cpu_s = double(done->utime_us + done->stime_us) * 1e-6;
    if (r.peak_kb == 0) r.peak_kb = done->maxrss_kb;
  } else if (killing) {
    r.signal = SIGKILL;  // the sandbox killed it before it ended
  } else {
    r.infra_error = "the sandbox's init ended without reporting (killed from outside the sandbox?)";
  }
  if (r.infra_error) return r;

  // The first limit hit: the one the sandbox killed for; else what the command died of; else the
  // cgroup's counters; else (rlimit fallback) an allocation failure in its output.
  const int sig = r.signal.value_or(0);
  if (reason != Limit::kNone) r.limit = reason;
  else if (sig == SIGXCPU || (sig == SIGKILL && r.cpu_s >= double(plan.cpu_s))) r.limit = Limit::kCpu;
  else if (oom > 0) r.limit = Limit::kMem;
  else if (refused > 0) r.limit = Limit::kProcs;
  else if (sig == SIGXFSZ || hit_file_limit(dir, plan.fsize_bytes, start_time, root ? int64_t(uid) : -1)) r.limit = Limit::kOutput;
  else if (!cg.has_mem() && (sig || r.exit.value_or(0) != 0) && (mentions_oom(r.err) || mentions_oom(r.out)))
    r.limit = Limit::kMem;
  r.timed_out = r.limit == Limit::kCpu || r.limit == Limit::kWall;
  if (sig == SIGKILL && r.limit == Limit::kNone && host_oom0 >= 0 && host_oom1 - host_oom0 > oom)
    r.infra_error = fmt::format("killed by SIGKILL from outside the sandbox: the host's OOM killer ran {} time(s) during the run",
                                host_oom1 - host_oom0 - oom);
  return r;
}

}  // namespace mmx::rl
