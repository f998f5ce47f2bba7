// rl_sandbox_test: the sandbox (src/rl/sandbox.h) contains what a reward command can do wrong —
// a fork bomb, a memory hog, an output flood, CPU and wall loops, writes outside its directory,
// a connect to a port on 127.0.0.1 — reports each as such, and leaves the host healthy; and it
// runs ordinary commands (exit codes, capture, Python unit tests) faithfully.
// The fallbacks (seccomp instead of the network namespace, rlimits instead of the cgroup, a user
// namespace when not root) are forced here too, so each is exercised on a machine that has the
// preferred one.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <chrono>

#include "rl/sandbox.h"

namespace mmx::rl {
namespace {

const char* kForkForever = "import os\nwhile True:\n  try: os.fork()\n  except OSError: pass\n";
// 256 MiB in 1 MiB pieces, then exit 0: bounded, so the test stays safe when a limit is broken.
const char* kHog = "a = []\nfor i in range(256): a.append(b'x' * (1 << 20))\nprint('allocated')\n";

SandboxOptions quick() {
  SandboxOptions o;
  o.cpu_s = 5;
  o.wall_s = 10;
  o.mem_mb = 256;
  o.procs = 16;
  o.out_kb = 64;
  return o;
}

std::string describe(const SandboxResult& r) {
  return to_json(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + " net=" + r.net_via +
         " mem=" + r.mem_via + " procs=" + r.procs_via + " fs=" + r.fs_via;
}

void expect_clean_exit(const SandboxResult& r, int code) {
  EXPECT_FALSE(r.infra_error) << describe(r);
  ASSERT_TRUE(r.exit) << describe(r);
  EXPECT_EQ(*r.exit, code) << describe(r);
  EXPECT_FALSE(r.signal);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.limit, Limit::kNone) << describe(r);
}

int procs_of_uid(int64_t uid) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name[0] < '0' || name[0] > '9') continue;
    std::ifstream f(e.path() / "status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("Uid:", 0) == 0) {
        n += std::strtoll(line.c_str() + 4, nullptr, 10) == uid;
        break;
      }
  }
  return n;
}

// The host is healthy: this process can still fork, and no process of the sandbox uid is left.
void expect_host_healthy(const SandboxResult& r) {
  const pid_t p = fork();
  ASSERT_GE(p, 0) << "the host cannot fork after the sandbox: " << strerror(errno);
  if (p == 0) _exit(7);
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 7);
  if (geteuid() == 0) {
    EXPECT_EQ(procs_of_uid(r.uid), 0) << "processes of the sandbox uid " << r.uid << " are left";
  }
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string t = "/tmp/mmx_sandbox_test_XXXXXX";
    path = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path + "/" + name) << text; }
};

// Runs the sandbox in a child process that dropped to an unprivileged uid (the user-namespace
// path); returns the result's JSON and the mechanisms, or skips when this test does not run as root.
struct Unprivileged {
  nlohmann::json json;
  std::string mechanisms;
};
Unprivileged run_unprivileged(const std::vector<std::string>& argv, const SandboxOptions& o) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  const pid_t c = fork();
  if (c == 0) {
    close(p[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(4242, 4242, 4242) != 0 || setresuid(4242, 4242, 4242) != 0) _exit(3);
    std::string s;
    try {
      const SandboxResult r = run_sandbox(argv, o);
      nlohmann::json j = nlohmann::json::parse(to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      j["_via"] = r.net_via + " " + r.procs_via + " " + r.fs_via;
      s = j.dump();
    } catch (const std::exception& e) {
      s = nlohmann::json{{"_error", e.what()}}.dump();
    }
    const ssize_t n = write(p[1], s.data(), s.size());
    _exit(n == ssize_t(s.size()) ? 0 : 4);
  }
  close(p[1]);
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) s.append(buf, size_t(n));
  close(p[0]);
  waitpid(c, nullptr, 0);
  Unprivileged u;
  u.json = nlohmann::json::parse(s.empty() ? "{}" : s);
  u.mechanisms = u.json.value("_via", "");
  return u;
}

TEST(Sandbox, ExitCodeAndCapture) {
  const SandboxResult r = run_sandbox({"sh", "-c", "echo out; echo err >&2; exit 3"}, quick());
  expect_clean_exit(r, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_GT(r.wall_s, 0);
  EXPECT_LT(r.wall_s, 5);
  expect_clean_exit(run_sandbox({"true"}, quick()), 0);
}

TEST(Sandbox, SignalIsTheTasks) {
  const SandboxResult r = run_sandbox({"sh", "-c", "kill -TERM $$"}, quick());
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_FALSE(r.exit);
  ASSERT_TRUE(r.signal) << describe(r);
  EXPECT_EQ(*r.signal, SIGTERM);
  EXPECT_EQ(r.limit, Limit::kNone);
}

TEST(Sandbox, CouldNotStartIsInfra) {
  const SandboxResult r = run_sandbox({"mmx-no-such-command-here"}, quick());
  ASSERT_TRUE(r.infra_error) << describe(r);
  EXPECT_NE(r.infra_error->find("could not start"), std::string::npos) << *r.infra_error;
  EXPECT_FALSE(r.exit);
  EXPECT_FALSE(r.signal);
  SandboxOptions o = quick();
  o.dir = "/nonexistent/mmx-sandbox-dir";
  EXPECT_TRUE(run_sandbox({"true"}, o).infra_error);
}

TEST(Sandbox, JsonContract) {
  const SandboxResult r = run_sandbox({"sh", "-c", "printf 'a\\377b'; exit 2"}, quick());
  const nlohmann::ordered_json j = to_json(r);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"exit", "signal", "timed_out", "limit", "stdout", "stderr", "infra_error",
                                            "wall_s"}));
  EXPECT_EQ(j["exit"], 2);
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_TRUE(j["limit"].is_null());
  EXPECT_TRUE(j["infra_error"].is_null());
  EXPECT_TRUE(j["wall_s"].is_number_float());
  // Invalid UTF-8 from the command: the printed object still parses (U+FFFD).
  const std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  EXPECT_EQ(nlohmann::json::parse(text)["stdout"], "a\xef\xbf\xbd" "b");
  SandboxResult w;
  w.limit = Limit::kWall;
  w.timed_out = true;
  w.signal = 9;
  EXPECT_EQ(to_json(w)["limit"], "wall");
  EXPECT_TRUE(to_json(w)["exit"].is_null());
}

TEST(Sandbox, CleanEnvironment) {
  setenv("MMX_SANDBOX_TEST_SECRET", "hunter2", 1);
  SandboxOptions o = quick();
  o.env = {"GIVEN=yes"};
  const SandboxResult r =
      run_sandbox({"sh", "-c", "echo \"[$MMX_SANDBOX_TEST_SECRET][$GIVEN]\"; [ \"$HOME\" = \"$(pwd)\" ] && echo home"}, o);
  expect_clean_exit(r, 0);
  EXPECT_EQ(r.out, "[][yes]\nhome\n");
}

TEST(Sandbox, ForkBombIsContained) {
  SandboxOptions o = quick();
  const SandboxResult r = run_sandbox({"python3", "-c", kForkForever}, o);
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_EQ(r.limit, Limit::kProcs) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.wall_s, 5) << "the fork bomb ran until the wall limit";
  expect_host_healthy(r);
  // The classic shell bomb, whose shell lives on (sleep) while the bomb grows in the background.
  const SandboxResult b = run_sandbox({"bash", "-c", ":(){ :|:& };:; sleep 5"}, o);
  EXPECT_EQ(b.limit, Limit::kProcs) << describe(b);
  EXPECT_LT(b.wall_s, 5);
  expect_host_healthy(b);
}

TEST(Sandbox, ForkBombIsContainedByRlimitFallback) {
  if (geteuid() != 0) GTEST_SKIP() << "the rlimit fallback's uid needs root";
  SandboxOptions o = quick();
  o.procs_via = ProcsVia::kRlimit;
  const SandboxResult r = run_sandbox({"python3", "-c", kForkForever}, o);
  EXPECT_EQ(r.procs_via, "rlimit-nproc");
  EXPECT_EQ(r.limit, Limit::kProcs) << describe(r);
  EXPECT_LT(r.wall_s, 5);
  expect_host_healthy(r);
}

TEST(Sandbox, MemoryHogIsContained) {
  SandboxOptions o = quick();
  o.mem_mb = 64;
  for (MemVia via : {MemVia::kAuto, MemVia::kRlimit}) {
    o.mem_via = via;
    const SandboxResult r = run_sandbox({"python3", "-c", kHog}, o);
    EXPECT_FALSE(r.infra_error) << describe(r);
    EXPECT_EQ(r.limit, Limit::kMem) << describe(r);
    EXPECT_EQ(r.out.find("allocated"), std::string::npos) << describe(r);
    EXPECT_FALSE(r.timed_out);
    if (via == MemVia::kRlimit) {
      EXPECT_EQ(r.mem_via, "rlimit-as");
    }
    expect_host_healthy(r);
  }
}

TEST(Sandbox, OomKillsTheHogNotTheSandboxsInit) {
  // A caller holding much memory (a trainer with a model loaded): its forked helper and init look
  // as big to the OOM killer. It must still pick the hog (init then reports how the hog ended).
  std::vector<char> ballast(size_t(300) << 20, 1);
  SandboxOptions o = quick();
  o.mem_mb = 64;
  const SandboxResult r = run_sandbox({"python3", "-c", kHog}, o);
  if (r.mem_via.rfind("cgroup", 0) != 0) GTEST_SKIP() << "no memory cgroup here: " << r.mem_via;
  EXPECT_EQ(r.limit, Limit::kMem) << describe(r);
  ASSERT_TRUE(r.signal);
  EXPECT_EQ(*r.signal, SIGKILL);
  EXPECT_GT(r.cpu_s, 0) << "no report from init: the OOM killer chose it, not the hog";
  EXPECT_EQ(ballast[12345], 1);
}

TEST(Sandbox, ConcurrentRuns) {
  std::vector<SandboxResult> rs(4);
  std::vector<std::thread> ts;
  const double t0 = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&rs, i] { rs[size_t(i)] = run_sandbox({"sh", "-c", "echo run" + std::to_string(i) + "; sleep 0.5"}, quick()); });
  for (std::thread& t : ts) t.join();
  const double t1 = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  for (int i = 0; i < 4; ++i) {
    expect_clean_exit(rs[size_t(i)], 0);
    EXPECT_EQ(rs[size_t(i)].out, "run" + std::to_string(i) + "\n");
    EXPECT_LT(rs[size_t(i)].wall_s, 1.5) << "a run waited for another's pipes";
  }
  EXPECT_LT(t1 - t0, 2.0);
  if (geteuid() == 0) {
    EXPECT_NE(rs[0].uid, rs[1].uid) << "concurrent runs share a sandbox uid";
  }
}

TEST(Sandbox, OutputFloodIsCut) {
  SandboxOptions o = quick();
  o.out_kb = 64;
  const SandboxResult r = run_sandbox({"yes"}, o);
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_EQ(r.limit, Limit::kOutput) << describe(r);
  EXPECT_EQ(r.out.size(), size_t(64 << 10));
  EXPECT_EQ(r.out.substr(0, 4), "y\ny\n");
  EXPECT_LT(r.wall_s, 5);
  const SandboxResult e = run_sandbox({"sh", "-c", "yes >&2"}, o);
  EXPECT_EQ(e.limit, Limit::kOutput) << describe(e);
  EXPECT_EQ(e.err.size(), size_t(64 << 10));
  expect_host_healthy(r);
}

TEST(Sandbox, FileSizeLimit) {
  TempDir d;
  SandboxOptions o = quick();
  o.file_mb = 1;
  o.dir = d.path;
  const SandboxResult r = run_sandbox({"sh", "-c", "head -c 5000000 /dev/zero > big; echo after"}, o);
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_EQ(r.limit, Limit::kOutput) << describe(r);
  EXPECT_EQ(std::filesystem::file_size(d.path + "/big"), uintmax_t(1) << 20) << "the write went past the limit";
  expect_clean_exit(run_sandbox({"sh", "-c", "head -c 500000 /dev/zero > small"}, o), 0);
}

TEST(Sandbox, CpuLoopIsStopped) {
  SandboxOptions o = quick();
  o.cpu_s = 1;
  o.wall_s = 20;
  const SandboxResult r = run_sandbox({"python3", "-c", "while True: pass"}, o);
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_EQ(r.limit, Limit::kCpu) << describe(r);
  EXPECT_TRUE(r.timed_out);
  ASSERT_TRUE(r.signal);
  EXPECT_EQ(*r.signal, SIGXCPU);
  EXPECT_GE(r.cpu_s, 0.5);  // rusage is tick-sampled; the limit itself is exact
  // One that ignores SIGXCPU dies of SIGKILL at the hard limit, one second later.
  const SandboxResult k = run_sandbox({"python3", "-c", "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"}, o);
  EXPECT_EQ(k.limit, Limit::kCpu) << describe(k);
  ASSERT_TRUE(k.signal);
  EXPECT_EQ(*k.signal, SIGKILL);
}

TEST(Sandbox, WallLoopIsStopped) {
  SandboxOptions o = quick();
  o.wall_s = 1;
  const SandboxResult r = run_sandbox({"sleep", "30"}, o);
  EXPECT_FALSE(r.infra_error) << describe(r);
  EXPECT_EQ(r.limit, Limit::kWall) << describe(r);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.exit);
  ASSERT_TRUE(r.signal);
  EXPECT_EQ(*r.signal, SIGKILL);
  EXPECT_GE(r.wall_s, 1.0);
  EXPECT_LT(r.wall_s, 3.0);
  // A background process that outlives the command is killed with it, not left running.
  const SandboxResult b = run_sandbox({"sh", "-c", "sleep 30 & echo started"}, o);
  expect_clean_exit(b, 0);
  EXPECT_LT(b.wall_s, 1.0);
  expect_host_healthy(b);
}

TEST(Sandbox, WritesOutsideItsDirectoryAreRefused) {
  // A world-writable directory (the sandbox uid alone would not stop this), /tmp, the build dir.
  TempDir open_dir;
  chmod(open_dir.path.c_str(), 0777);
  const std::string targets[] = {open_dir.path + "/escaped", "/tmp/mmx_sandbox_escape_" + std::to_string(getpid()),
                                 std::filesystem::current_path().string() + "/mmx_sandbox_escape"};
  TempDir work;
  SandboxOptions o = quick();
  o.dir = work.path;
  for (const std::string& t : targets) {
    const SandboxResult r = run_sandbox({"sh", "-c", "echo inside > mine && echo x > '" + t + "'"}, o);
    EXPECT_FALSE(r.infra_error) << describe(r);
    ASSERT_TRUE(r.exit) << describe(r);
    EXPECT_NE(*r.exit, 0) << "the write to " << t << " succeeded: " << describe(r);
    EXPECT_FALSE(std::filesystem::exists(t)) << t;
    std::filesystem::remove(t);
  }
  // Inside is fine, and what it wrote is handed back to the directory's owner.
  struct stat st;
  ASSERT_EQ(stat((work.path + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_EQ(stat(work.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
}

// A listening socket on a free port of 127.0.0.1; connecting from the sandbox must fail.
struct Listener {
  int fd = -1, port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 8);
    socklen_t n = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
  bool got_connection() const {
    const int c = accept(fd, nullptr, nullptr);
    if (c >= 0) close(c);
    return c >= 0;
  }
  std::string connect_snippet() const {
    return "import socket\ns = socket.create_connection(('127.0.0.1', " + std::to_string(port) +
           "), timeout=2)\nprint('connected')\n";
  }
};

TEST(Sandbox, NoNetwork) {
  Listener l;
  ASSERT_GT(l.port, 0);
  // The check itself works: outside the sandbox the connect succeeds.
  ASSERT_EQ(std::system(("python3 -c \"" + l.connect_snippet() + "\" > /dev/null").c_str()), 0);
  ASSERT_TRUE(l.got_connection());
  for (NetVia via : {NetVia::kAuto, NetVia::kSeccomp}) {
    SandboxOptions o = quick();
    o.net_via = via;
    const SandboxResult r = run_sandbox({"python3", "-c", l.connect_snippet()}, o);
    EXPECT_FALSE(r.infra_error) << describe(r);
    ASSERT_TRUE(r.exit) << describe(r);
    EXPECT_NE(*r.exit, 0) << describe(r);
    EXPECT_EQ(r.out.find("connected"), std::string::npos);
    EXPECT_FALSE(l.got_connection()) << "the sandbox reached 127.0.0.1:" << l.port << " via " << r.net_via;
    if (via == NetVia::kSeccomp) {
      EXPECT_EQ(r.net_via, "seccomp");
      EXPECT_NE(r.err.find("Address family not supported"), std::string::npos) << r.err;
    }
  }
  // AF_UNIX stays usable under the seccomp filter (pipes between a test and its workers).
  SandboxOptions o = quick();
  o.net_via = NetVia::kSeccomp;
  expect_clean_exit(run_sandbox({"python3", "-c", "import socket\na, b = socket.socketpair()\na.send(b'x')\nassert b.recv(1) == b'x'"}, o), 0);
}

TEST(Sandbox, PythonUnitTestsAsAReward) {
  TempDir d;
  d.write("test_solution.py",
          "import unittest\nfrom solution import reverse_words\n"
          "class T(unittest.TestCase):\n"
          "    def test_two(self): self.assertEqual(reverse_words('a b'), 'b a')\n"
          "    def test_one(self): self.assertEqual(reverse_words('x'), 'x')\n");
  SandboxOptions o = quick();
  o.dir = d.path;
  d.write("solution.py", "def reverse_words(s): return ' '.join(reversed(s.split()))\n");
  const SandboxResult pass = run_sandbox({"python3", "-m", "unittest", "-q"}, o);
  expect_clean_exit(pass, 0);
  EXPECT_NE(pass.err.find("Ran 2 tests"), std::string::npos) << pass.err;
  d.write("solution.py", "def reverse_words(s): return s\n");
  const SandboxResult fail = run_sandbox({"python3", "-m", "unittest", "-q"}, o);
  expect_clean_exit(fail, 1);
  EXPECT_NE(fail.err.find("FAILED (failures=1)"), std::string::npos) << fail.err;
}

TEST(Sandbox, UnprivilegedCallerUsesAUserNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become the unprivileged caller";
  Listener l;
  SandboxOptions o = quick();
  const Unprivileged net = run_unprivileged({"python3", "-c", l.connect_snippet()}, o);
  ASSERT_FALSE(net.json.contains("_error")) << net.json.dump();
  if (!net.json["infra_error"].is_null()) GTEST_SKIP() << "no user namespaces here: " << net.json.dump();
  EXPECT_NE(net.json["exit"], 0) << net.json.dump();
  EXPECT_FALSE(l.got_connection());
  const Unprivileged w = run_unprivileged({"sh", "-c", "echo x > /tmp/mmx_sandbox_userns_escape"}, o);
  EXPECT_NE(w.json["exit"], 0) << w.json.dump();
  EXPECT_FALSE(std::filesystem::exists("/tmp/mmx_sandbox_userns_escape"));
  std::filesystem::remove("/tmp/mmx_sandbox_userns_escape");
  const Unprivileged b = run_unprivileged({"python3", "-c", kForkForever}, o);
  EXPECT_EQ(b.json["limit"], "procs") << b.json.dump() << " " << b.mechanisms;
  EXPECT_LT(b.json["wall_s"].get<double>(), 5.0);
  EXPECT_EQ(procs_of_uid(4242), 0);
}

}  // namespace
}  // namespace mmx::rl
