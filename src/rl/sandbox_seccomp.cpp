// The AF_UNIX-only seccomp program (sandbox_seccomp.h), exported by libseccomp as raw BPF.
#include "rl/sandbox_seccomp.h"

#include <fmt/format.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace mmx::rl::detail {

namespace {

struct Program {
  std::vector<sock_filter> code;
  sock_fprog prog = {};
  std::string why;  // empty = built
};

Program build() {
  Program p;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) {
    p.why = "seccomp_init failed";
    return p;
  }
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                            SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(io_uring_setup), 0);
  const int fd = rc == 0 ? memfd_create("mmx-sandbox-seccomp", MFD_CLOEXEC) : -1;
  if (rc == 0 && fd < 0) rc = -errno;
  if (rc == 0) rc = seccomp_export_bpf(ctx, fd);
  seccomp_release(ctx);
  if (rc != 0) {
    p.why = fmt::format("building the seccomp filter failed: {}", strerror(-rc));
    if (fd >= 0) close(fd);
    return p;
  }
  const off_t n = lseek(fd, 0, SEEK_END);
  p.code.resize(size_t(n) / sizeof(sock_filter));
  if (n <= 0 || pread(fd, p.code.data(), size_t(n), 0) != n) p.why = "reading the exported seccomp filter failed";
  close(fd);
  p.prog.len = (unsigned short)p.code.size();
  p.prog.filter = p.code.data();
  return p;
}

}  // namespace

const sock_fprog* net_seccomp_program(std::string* why) {
  static const Program p = build();  // thread-safe once
  if (!p.why.empty()) {
    *why = p.why;
    return nullptr;
  }
  return &p.prog;
}

}  // namespace mmx::rl::detail
