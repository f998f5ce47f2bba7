// The helper, init and worker processes of the sandbox (sandbox_child.h). Runs only in forked
// children of a possibly multi-threaded parent: plain system calls, no allocation, no exceptions,
// no stdio. Every failure is one Msg on kStatusFd and _exit.
#include "rl/sandbox_child.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>

namespace mmx::rl::detail {

const char* step_name(int32_t step) {
  switch (step) {
    case kStepUnshare: return "unshare (new namespaces)";
    case kStepIdMap: return "writing the user namespace's uid/gid map";
    case kStepForkInit: return "fork (the sandbox's init)";
    case kStepForkWorker: return "fork (the command's process)";
    case kStepFds: return "setting up stdin/stdout/stderr";
    case kStepRlimit: return "setrlimit";
    case kStepSetgroups: return "setgroups";
    case kStepSetgid: return "setgid (the sandbox uid)";
    case kStepSetuid: return "setuid (the sandbox uid)";
    case kStepNoNewPrivs: return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kStepSeccomp: return "loading the seccomp filter";
    case kStepChdir: return "chdir into the working directory";
    case kStepExec: return "exec";
    case kStepCgroup: return "joining the sandbox cgroup";
  }
  return "setup";
}

namespace {

void send(const Msg& m) {
  // One record < PIPE_BUF: atomic, never interleaved with another process's record.
  while (write(kStatusFd, &m, sizeof m) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void fail_step(int32_t step, int err) {
  Msg m;
  m.kind = kMsgSetupFail;
  m.step = step;
  m.err = err;
  send(m);
  _exit(127);
}

int write_file(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == ssize_t(strlen(text)) ? 0 : -1;
}

// "<u> <u> 1\n" without snprintf (not async-signal-safe).
void id_map_line(char* buf, unsigned id) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = char('0' + id % 10);
    id /= 10;
  } while (id);
  char* p = buf;
  for (int rep = 0; rep < 2; ++rep) {
    for (int i = n - 1; i >= 0; --i) *p++ = digits[i];
    *p++ = ' ';
  }
  *p++ = '1';
  *p++ = '\n';
  *p = 0;
}

void set_rlimit(int which, uint64_t soft, uint64_t hard) {
  const struct rlimit r = {rlim_t(soft), rlim_t(hard)};
  if (setrlimit(which, &r) != 0) fail_step(kStepRlimit, errno);
}

// Everything read-only except the working directory; a fresh /proc for the new pid namespace.
// Returns false (and leaves the mounts as they were or partly done) when the kernel refuses.
bool make_mounts(const char* dir, bool pid_ns) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (mount(dir, dir, nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  struct mount_attr ro = {};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0) return false;
  struct mount_attr rw = {};
  rw.attr_clr = MOUNT_ATTR_RDONLY;
  if (syscall(SYS_mount_setattr, AT_FDCWD, dir, 0, &rw, sizeof rw) != 0) return false;
  if (pid_ns) mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  // /run holds the host's world-connectable Unix sockets (the system D-Bus, ...): an empty
  // read-only tmpfs in its place, unless the working directory is under it.
  if (strncmp(dir, "/run/", 5) != 0) mount("tmpfs", "/run", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755");
  return true;
}

[[noreturn]] void worker_main(const ChildPlan& p, int32_t ns, uid_t uid) {
  // Into the sandbox's cgroups (the first thing: everything the command does is counted).
  for (int fd : {p.cg_mem ? kMemProcsFd : -1, p.cg_pids ? kPidsProcsFd : -1})
    if (fd >= 0 && write(fd, "0", 1) != 1) fail_step(kStepCgroup, errno);
  // fds: 0 = /dev/null, 1 = stdout pipe, 2 = stderr pipe, kStatusFd (close-on-exec), nothing else.
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(kOutFd, 1) < 0 || dup2(kErrFd, 2) < 0)
    fail_step(kStepFds, errno);
  if (fcntl(kStatusFd, F_SETFD, FD_CLOEXEC) != 0) fail_step(kStepFds, errno);
  if (null_fd > 2) close(null_fd);  // 3 (kGoFd, closed by the helper) or above kStatusFd
  if (syscall(SYS_close_range, kStatusFd + 1, ~0U, 0) != 0)
    for (int fd = kStatusFd + 1; fd < 1024; ++fd) close(fd);

  if (p.cpu_s) set_rlimit(RLIMIT_CPU, p.cpu_s, p.cpu_s + 1);
  if (p.fsize_bytes) set_rlimit(RLIMIT_FSIZE, p.fsize_bytes, p.fsize_bytes);
  if (p.as_bytes) set_rlimit(RLIMIT_AS, p.as_bytes, p.as_bytes);
  set_rlimit(RLIMIT_CORE, 0, 0);
  if (p.drop_uid) {
    // Raw system calls: glibc's setuid family would try to signal the parent's other threads.
    if (syscall(SYS_setgroups, 0, nullptr) != 0) fail_step(kStepSetgroups, errno);
    if (syscall(SYS_setresgid, uid, uid, uid) != 0) fail_step(kStepSetgid, errno);
    // RLIMIT_NPROC counts the processes of the real uid: set for the fresh uid, before the switch.
    if (p.nproc) set_rlimit(RLIMIT_NPROC, p.nproc, p.nproc);
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) fail_step(kStepSetuid, errno);
  } else if (p.nproc && (ns & kNsUser)) {
    set_rlimit(RLIMIT_NPROC, p.nproc, p.nproc);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // after the uid change, which clears it
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail_step(kStepNoNewPrivs, errno);
  if (!(ns & kNsNet)) {  // no network namespace: the seccomp filter, or no run at all
    if (!p.seccomp) fail_step(kStepSeccomp, ENOSYS);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p.seccomp) != 0) fail_step(kStepSeccomp, errno);
  }
  if (chdir(p.dir) != 0) fail_step(kStepChdir, errno);
  int err = ENOENT;
  for (char* const* c = p.candidates; *c; ++c) {
    execve(*c, p.argv, p.envp);
    if (errno == EACCES) err = EACCES;
    else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  fail_step(kStepExec, err);
}

[[noreturn]] void init_main(const ChildPlan& p, int32_t ns, uid_t uid) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_NAME, "mmx-sandbox-init");
  close(kKillFd);
  setsid();  // a session and process group of its own: kill(-pgid) reaches every descendant
  if (ns & kNsMount) {
    Msg m;
    m.kind = kMsgMounts;
    m.flags = make_mounts(p.dir, ns & kNsPid) ? kRoMount : 0;
    send(m);
  }
  if (!(ns & kNsPid)) prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t worker = fork();
  if (worker < 0) fail_step(kStepForkWorker, errno);
  if (worker == 0) worker_main(p, ns, uid);
  close(kOutFd);
  close(kErrFd);
  // Reap everything (orphans reparent to pid 1); report the worker; exiting then kills the rest
  // of the pid namespace.
  for (;;) {
    int st = 0;
    struct rusage ru = {};
    const pid_t r = wait4(-1, &st, 0, &ru);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) _exit(126);  // no worker to wait for: cannot happen
    if (r != worker) continue;
    Msg m;
    m.kind = kMsgDone;
    m.status = st;
    m.utime_us = int64_t(ru.ru_utime.tv_sec) * 1000000 + ru.ru_utime.tv_usec;
    m.stime_us = int64_t(ru.ru_stime.tv_sec) * 1000000 + ru.ru_stime.tv_usec;
    m.maxrss_kb = ru.ru_maxrss;
    send(m);
    _exit(0);
  }
}

// Kills every process of the sandbox uid (no pid namespace to do it): kill(-1) from that uid
// reaches exactly the processes whose real or saved uid it is.
void sweep_uid(uid_t uid) {
  const pid_t s = fork();
  if (s == 0) {
    if (syscall(SYS_setresgid, uid, uid, uid) != 0 || syscall(SYS_setresuid, uid, uid, uid) != 0) _exit(1);
    for (int pass = 0; pass < 3; ++pass) {
      kill(-1, SIGKILL);
      usleep(2000);
    }
    _exit(0);
  }
  if (s > 0)
    while (waitpid(s, nullptr, 0) < 0 && errno == EINTR) {
    }
}

}  // namespace

[[noreturn]] void helper_main(const ChildPlan& p, const int fds[kNumFds]) {
  // Our fds to kGoFd..kPidsProcsFd (via numbers >= 64, so no move overwrites another), then
  // nothing else open but 0-2.
  int high[kNumFds];
  for (int i = 0; i < kNumFds; ++i)
    if ((high[i] = fds[i] < 0 ? -1 : fcntl(fds[i], F_DUPFD, 64)) < 0 && fds[i] >= 0) _exit(124);
  for (int i = 0; i < kNumFds; ++i)
    if (high[i] >= 0 && dup2(high[i], kGoFd + i) < 0) _exit(124);
  if (syscall(SYS_close_range, kPidsProcsFd + 1, ~0U, 0) != 0)
    for (int fd = kPidsProcsFd + 1; fd < 1024; ++fd) close(fd);
  for (int i = 0; i < kNumFds; ++i)
    if (high[i] < 0) close(kGoFd + i);  // not given: that number holds nothing of ours
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char go = 0;
  if (read(kGoFd, &go, 1) != 1) _exit(125);  // the parent gave up before starting us
  close(kGoFd);
  // The strongest namespace set the kernel grants.
  int32_t ns = -1;
  int err = 0;
  for (const int32_t* s = p.ns_sets; *s >= 0; ++s) {
    int flags = 0;
    if (*s & kNsNet) flags |= CLONE_NEWNET;
    if (*s & kNsPid) flags |= CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
    if (*s & kNsMount) flags |= CLONE_NEWNS;
    if (flags && p.user_ns) flags |= CLONE_NEWUSER;
    if (unshare(flags) == 0) {
      ns = *s | ((flags & CLONE_NEWUSER) ? kNsUser : 0);
      break;
    }
    err = errno;
  }
  if (ns < 0) fail_step(kStepUnshare, err);
  if (ns & kNsUser) {
    // /proc/self/*_map belong to root while we are not dumpable (a caller that changed its uid
    // without exec); the command cannot reach us from its pid namespace anyway.
    prctl(PR_SET_DUMPABLE, 1);
    char line[48];
    id_map_line(line, p.outer_uid);
    if (write_file("/proc/self/uid_map", line) != 0) fail_step(kStepIdMap, errno);
    if (write_file("/proc/self/setgroups", "deny") != 0) fail_step(kStepIdMap, errno);
    id_map_line(line, p.outer_gid);
    if (write_file("/proc/self/gid_map", line) != 0) fail_step(kStepIdMap, errno);
  }
  const uid_t uid = p.drop_uid ? uid_t(p.uid_base + uid_t(getpid())) : p.outer_uid;
  if (!(ns & kNsPid)) prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t init = fork();
  if (init < 0) fail_step(kStepForkInit, errno);
  if (init == 0) init_main(p, ns, uid);
  close(kOutFd);
  close(kErrFd);
  {
    Msg m;
    m.kind = kMsgInit;
    m.flags = ns;
    m.pid = init;
    send(m);
  }
  // Wait for init to end, or for the parent to say "kill" (or to die: the pipe closes).
  const int pidfd = int(syscall(SYS_pidfd_open, init, 0));
  int kill_fd = kKillFd;
  for (;;) {
    // No pidfd (kernel < 5.3): look for init's end every 10 ms.
    struct pollfd f[2] = {{kill_fd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int n = poll(f, 2, pidfd >= 0 ? -1 : 10);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && kill_fd >= 0 && f[0].revents) {
      kill(init, SIGKILL);  // init is our child, not yet reaped: its pid cannot have been reused
      close(kill_fd);
      kill_fd = -1;
    }
    int st = 0;
    if (waitpid(init, &st, WNOHANG) == init) break;
  }
  // The pid namespace died with init. Without one: its process group, then the uid's processes.
  if (!(ns & kNsPid)) {
    kill(-init, SIGKILL);
    if (p.drop_uid) sweep_uid(uid);
    for (int i = 0; i < 100; ++i) {  // orphans reparented to us (subreaper): reap, briefly
      const pid_t r = waitpid(-1, nullptr, WNOHANG);
      if (r < 0) break;
      if (r == 0) usleep(2000);
    }
  }
  _exit(0);
}

}  // namespace mmx::rl::detail
