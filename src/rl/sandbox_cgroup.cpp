// The per-run cgroup (sandbox_cgroup.h): found from /proc/self/cgroup + /proc/self/mountinfo.
#include "rl/sandbox_cgroup.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

namespace mmx::rl::detail {

namespace {

struct Mount {
  std::string root, point;  // the mounted subtree of the hierarchy, where it is mounted
};

// The cgroup v1 mount of `controller` ("" = the v2 mount), if any.
bool find_mount(const std::string& controller, Mount* m) {
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    // id parent maj:min root point opts [optional...] - fstype source superopts
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream a(line.substr(0, dash)), b(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, super;
    a >> id >> parent >> dev >> root >> point;
    b >> fstype >> source >> super;
    bool match = false;
    if (controller.empty()) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      std::istringstream o(super);
      for (std::string opt; std::getline(o, opt, ',');) match = match || opt == controller;
    }
    if (match) {
      *m = {root, point};
      return true;
    }
  }
  return false;
}

// This process's cgroup path in the v1 hierarchy holding `controller` ("" = v2).
bool own_path(const std::string& controller, std::string* path) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctl = line.substr(a + 1, b - a - 1);
    bool match = controller.empty() ? (line.compare(0, a, "0") == 0 && ctl.empty()) : false;
    std::istringstream o(ctl);
    for (std::string c; !controller.empty() && std::getline(o, c, ',');) match = match || c == controller;
    if (match) {
      *path = line.substr(b + 1);
      return true;
    }
  }
  return false;
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return bool(f);
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// "key value" lines (memory.events, pids.events, memory.oom_control): value of key, or 0.
int64_t read_key(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  int64_t v = 0;
  while (f >> k >> v)
    if (k == key) return v;
  return 0;
}

int64_t read_number(const std::string& path) {
  std::ifstream f(path);
  int64_t v = 0;
  f >> v;
  return v;
}

std::string unique_name() {
  static std::atomic<int64_t> counter{0};
  return fmt::format("mmx-sandbox-{}-{}", getpid(), counter++);
}

// A new cgroup directory below this process's own in the hierarchy of `controller` (v1), or in
// the unified hierarchy (controller "" after v1 failed; `file` must then appear in it: the
// controller is enabled for our children). Returns "" when the kernel or the permissions refuse.
std::string make_dir(const std::string& controller, const std::string& file, const std::string& name, int* version) {
  for (int v : {1, 2}) {
    const std::string ctl = v == 1 ? controller : "";
    Mount m;
    std::string path;
    if (!find_mount(ctl, &m) || !own_path(ctl, &path)) continue;
    if (m.root != "/" && path.compare(0, m.root.size(), m.root) == 0) path = path.substr(m.root.size());
    const std::string parent = m.point + (path == "/" ? "" : path);
    const std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) continue;
    if (v == 2 && !exists(dir + "/" + file)) {
      // Try to enable the controller for our children (refused when our cgroup holds processes
      // and is not the root: cgroup v2's "no internal processes" rule).
      write_text(parent + "/cgroup.subtree_control", "+" + controller);
      if (!exists(dir + "/" + file)) {
        rmdir(dir.c_str());
        continue;
      }
    }
    *version = v;
    return dir;
  }
  return "";
}

}  // namespace

SandboxCgroup::SandboxCgroup(int64_t mem_bytes, int64_t pids_max) {
  const std::string name = unique_name();
  if (mem_bytes > 0) {
    mem_dir_ = make_dir("memory", "memory.max", name, &mem_v_);
    if (!mem_dir_.empty()) {
      const std::string limit = std::to_string(mem_bytes);
      const bool ok = mem_v_ == 1 ? write_text(mem_dir_ + "/memory.limit_in_bytes", limit)
                                  : write_text(mem_dir_ + "/memory.max", limit);
      // No swapping past the limit either (absent when swap accounting is off: fine).
      if (mem_v_ == 1 && exists(mem_dir_ + "/memory.memsw.limit_in_bytes"))
        write_text(mem_dir_ + "/memory.memsw.limit_in_bytes", limit);
      if (mem_v_ == 2 && exists(mem_dir_ + "/memory.swap.max")) write_text(mem_dir_ + "/memory.swap.max", "0");
      if (!ok) {
        rmdir(mem_dir_.c_str());
        mem_dir_.clear();
      }
    }
  }
  if (pids_max > 0) {
    // v2 with both controllers: the same directory.
    if (mem_v_ == 2 && exists(mem_dir_ + "/pids.max")) {
      pids_dir_ = mem_dir_;
      pids_v_ = 2;
    } else {
      pids_dir_ = make_dir("pids", "pids.max", name, &pids_v_);
    }
    if (!pids_dir_.empty() && !write_text(pids_dir_ + "/pids.max", std::to_string(pids_max))) {
      if (pids_dir_ != mem_dir_) rmdir(pids_dir_.c_str());
      pids_dir_.clear();
    }
  }
}

SandboxCgroup::~SandboxCgroup() {
  std::vector<std::string> dirs;
  if (!mem_dir_.empty()) dirs.push_back(mem_dir_);
  if (!pids_dir_.empty() && pids_dir_ != mem_dir_) dirs.push_back(pids_dir_);
  for (const std::string& d : dirs)
    for (int i = 0; i < 200 && rmdir(d.c_str()) != 0 && errno == EBUSY; ++i) usleep(5000);
}

int64_t SandboxCgroup::oom_kills() const {
  if (!has_mem()) return 0;
  return mem_v_ == 1 ? read_key(mem_dir_ + "/memory.oom_control", "oom_kill")
                     : read_key(mem_dir_ + "/memory.events", "oom_kill");
}

int64_t SandboxCgroup::pids_refused() const {
  return has_pids() ? read_key(pids_dir_ + "/pids.events", "max") : 0;
}

int64_t SandboxCgroup::peak_bytes() const {
  if (!has_mem()) return 0;
  return read_number(mem_dir_ + (mem_v_ == 1 ? "/memory.max_usage_in_bytes" : "/memory.peak"));
}

int64_t host_oom_kills() {
  std::ifstream f("/proc/vmstat");
  std::string k;
  int64_t v = 0;
  while (f >> k >> v)
    if (k == "oom_kill") return v;
  return -1;
}

}  // namespace mmx::rl::detail
