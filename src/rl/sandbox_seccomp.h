// The sandbox's network fallback (rl/sandbox.h): a seccomp program, built once with libseccomp in
// the parent and loaded by the worker with prctl, that refuses socket() for every address family
// but AF_UNIX (EAFNOSUPPORT) and io_uring_setup (EPERM: io_uring can open sockets without
// socket()). Other architectures' system calls (the 32-bit ABIs) kill the process.
//
// Not here: the network namespace, which is preferred (sandbox_child.cpp).
#pragma once

#include <linux/filter.h>

#include <string>

namespace mmx::rl::detail {

// The program (lives as long as the process), or nullptr with *why set when it cannot be built.
const sock_fprog* net_seccomp_program(std::string* why);

}  // namespace mmx::rl::detail
