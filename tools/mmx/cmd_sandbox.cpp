// mmx sandbox — the command-line face of src/rl/sandbox.h: runs one command contained (no network,
// CPU / memory / process / file-size / output / wall limits, its own directory) and prints one
// JSON object on stdout:
//   mmx sandbox [--cpu-s S] [--mem-mb M] [--procs N] [--wall-s S] [--out-kb K] [--dir D] -- CMD ARGS…
//   {"exit": int|null, "signal": int|null, "timed_out": bool,
//    "limit": null|"cpu"|"mem"|"procs"|"wall"|"output", "stdout": str, "stderr": str,
//    "infra_error": null|str, "wall_s": float}
// This output contract is used by acceptance checks: keep it stable. mmx exits 0 whenever it
// printed the object (the task's outcome is in it); 1 on a usage error (no object).
// --verbose adds one line on mmx's stderr saying which mechanisms contained the run.
// Not here: the sandbox itself (src/rl/sandbox.cpp), the mechanisms (docs/rl.md "Sandbox").
#include <cstdio>
#include <memory>

#include "common.h"
#include "rl/sandbox.h"

namespace mmx::cli {

namespace {
struct SandboxCli {
  rl::SandboxOptions o;
  std::vector<std::string> command;
  std::string net = "auto", mem = "auto", procs = "auto";
  bool verbose = false;
};

void run(const SandboxCli& c) {
  rl::SandboxOptions o = c.o;
  o.net_via = c.net == "netns" ? rl::NetVia::kNamespace : c.net == "seccomp" ? rl::NetVia::kSeccomp : rl::NetVia::kAuto;
  o.mem_via = c.mem == "cgroup" ? rl::MemVia::kCgroup : c.mem == "rlimit" ? rl::MemVia::kRlimit : rl::MemVia::kAuto;
  o.procs_via = c.procs == "cgroup" ? rl::ProcsVia::kCgroup : c.procs == "rlimit" ? rl::ProcsVia::kRlimit : rl::ProcsVia::kAuto;
  const rl::SandboxResult r = rl::run_sandbox(c.command, o);
  // Invalid UTF-8 in the command's output becomes U+FFFD: the object always parses.
  const std::string json = rl::to_json(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  if (c.verbose)
    std::fprintf(stderr, "sandbox: net=%s mem=%s procs=%s fs=%s pid_ns=%s uid=%lld cpu=%.3fs peak=%lldKB\n",
                 r.net_via.c_str(), r.mem_via.c_str(), r.procs_via.c_str(), r.fs_via.c_str(),
                 r.pid_ns ? "yes" : "no", (long long)r.uid, r.cpu_s, (long long)r.peak_kb);
}
}  // namespace

void add_sandbox(CLI::App& app, Action& action) {
  auto c = std::make_shared<SandboxCli>();
  CLI::App* s = app.add_subcommand("sandbox", "Run a command contained: no network, CPU/memory/process/output/wall "
                                              "limits, its own directory; print the outcome as JSON");
  s->add_option("--cpu-s", c->o.cpu_s, "CPU seconds per process (RLIMIT_CPU)")->capture_default_str()->check(CLI::PositiveNumber);
  s->add_option("--mem-mb", c->o.mem_mb, "Memory limit in MiB (the whole sandbox with a cgroup; else per process)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--procs", c->o.procs, "Processes + threads at once")->capture_default_str()->check(CLI::PositiveNumber);
  s->add_option("--wall-s", c->o.wall_s, "Wall-clock seconds")->capture_default_str()->check(CLI::PositiveNumber);
  s->add_option("--out-kb", c->o.out_kb, "KiB kept of stdout and of stderr, each; more ends the run")->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--file-mb", c->o.file_mb, "Largest file the command may write, MiB (RLIMIT_FSIZE)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--dir", c->o.dir, "Working directory (existing; default: a fresh one, removed after)");
  s->add_option("--env", c->o.env, "NAME=VALUE added to the command's clean environment (repeatable)");
  s->add_option("--net", c->net, "Network isolation: auto, netns or seccomp")->capture_default_str()
      ->check(CLI::IsMember({"auto", "netns", "seccomp"}));
  s->add_option("--mem-via", c->mem, "Memory limit: auto, cgroup or rlimit")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cgroup", "rlimit"}));
  s->add_option("--procs-via", c->procs, "Process limit: auto, cgroup or rlimit")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cgroup", "rlimit"}));
  s->add_flag("--verbose", c->verbose, "Say on stderr which mechanisms contained the run");
  s->add_option("command", c->command, "The command and its arguments (after --)")->required();
  s->callback([c, &action] { action = [c] { run(*c); }; });
}

}  // namespace mmx::cli
