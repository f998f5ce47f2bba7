// Crash-safe checkpoints (checkpoint.h has the protocol).
#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"
#include "base/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace mmx::train {

namespace {

using json = nlohmann::json;

// MMX_TRAIN_KILL_AT="STEP:POINT": the checkpoint of STEP is to die at POINT.
bool fault_armed(int64_t step, const char* point) {
  const char* env = std::getenv("MMX_TRAIN_KILL_AT");
  return env && std::string(env) == fmt::format("{}:{}", step, point);
}
void fault_point(int64_t step, const char* point) {
  if (!fault_armed(step, point)) return;
  std::fflush(nullptr);
  std::raise(SIGKILL);
}

// FNV-1a over 8-byte words, then the tail bytes (an integrity check of our own writes, not a
// defence against an adversary). Hex, 16 digits.
std::string file_hash(const fs::path& p) {
  const MappedFile f(p.string(), "checkpoint file");
  const uint8_t* b = f.bytes();
  const uint64_t n = f.size();
  uint64_t h = 1469598103934665603ull;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

json file_entry(const fs::path& p) { return {{"bytes", uint64_t(fs::file_size(p))}, {"hash", file_hash(p)}}; }

// "" when `p` is the file `want` ({"bytes", "hash"}) describes, else what differs.
std::string mismatch(const fs::path& p, const json& want) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return "it is missing";
  const uint64_t size = fs::file_size(p, ec);
  if (ec) return "it cannot be read (" + ec.message() + ")";
  if (size != want.at("bytes").get<uint64_t>())
    return fmt::format("it has {} bytes, the checkpoint wrote {}", size, want.at("bytes").get<uint64_t>());
  if (file_hash(p) != want.at("hash").get<std::string>()) return "its bytes differ from those the checkpoint wrote";
  return "";
}

std::string state_name(int64_t step) { return fmt::format("train_state-{:08}.safetensors", step); }

bool is_state_file(const std::string& name) {
  return name.rfind("train_state-", 0) == 0 && name.size() > 12 + 12 &&
         name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

void save_params_to(const fs::path& dir, const ParamSet<float>& P, DType dtype) { save_params(dir.string(), P, dtype); }

}  // namespace

TrainLog TrainLog::start(const fs::path& path) {
  write_file_atomic(path.string(), std::string(kHeader) + "\n");
  TrainLog l;
  l.path_ = path;
  return l;
}

TrainLog TrainLog::resume(const fs::path& path, int64_t step, bool quiet) {
  TrainLog l;
  l.path_ = path;
  if (!fs::exists(path)) {
    if (!quiet) std::fprintf(stderr, "note: %s is missing; the resumed log starts at step %lld\n", path.c_str(), (long long)step + 1);
    write_file_atomic(path.string(), std::string(kHeader) + "\n");
    return l;
  }
  const std::string text = read_file(path.string(), "training log");
  // Walk the lines; keep the prefix up to the last complete row of a step <= `step`.
  size_t keep = 0, pos = 0;
  int64_t kept = 0, dropped = 0, last = 0, missing = 0;
  bool header = true, cut = false;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {  // a row the kill cut short
      cut = true;
      break;
    }
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (header) {
      header = false;
      if (line.rfind("step,", 0) != 0) fail("{}: the first line is not the log's header (expected '{}')", path.string(), kHeader);
      keep = pos;
      continue;
    }
    if (line.empty()) continue;
    int64_t s = 0;
    try {
      s = std::stoll(line);
    } catch (const std::exception&) {
      fail("{}: a row does not start with its step: '{}'", path.string(), line.substr(0, 60));
    }
    if (s > step) {
      ++dropped;
      continue;
    }
    if (s != last + 1) missing += std::max<int64_t>(0, s - last - 1);
    last = s;
    ++kept;
    keep = pos;
  }
  if (header) fail("{}: empty (no header line); delete it to start the log afresh at step {}", path.string(), step + 1);
  missing += std::max<int64_t>(0, step - last);
  if (keep < text.size()) {
    if (::truncate(path.c_str(), off_t(keep)) != 0)
      fail("cannot cut {} back to step {}: {}", path.string(), step, std::strerror(errno));
    fsync_path(path.string());
  }
  if (!quiet && (dropped > 0 || cut))
    std::fprintf(stderr, "resume: %s cut back to step %lld (%lld row(s) of steps after the checkpoint%s; they run again)\n",
                 path.c_str(), (long long)step, (long long)dropped, cut ? " and a row cut short by the kill" : "");
  if (missing > 0)
    std::fprintf(stderr, "warning: %s lacks %lld of the rows of steps 1..%lld (kept %lld); the log has a gap there\n",
                 path.c_str(), (long long)missing, (long long)step, (long long)kept);
  return l;
}

void TrainLog::append(const std::string& row) {
  std::FILE* f = std::fopen(path_.c_str(), "ab");
  if (!f) fail("cannot append to {}: {}", path_.string(), std::strerror(errno));
  const std::string line = row + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size();
  if (std::fclose(f) != 0 || !ok) fail("error appending to {}", path_.string());
}

void TrainLog::sync() const { fsync_path(path_.string()); }

void commit_checkpoint(const fs::path& dir, const ParamSet<float>& P, const AdamW& opt, int64_t step,
                       int64_t tokens, const json& run, DType model_dtype, const TrainLog& log) {
  const std::string state = state_name(step);
  SafetensorsWriter w;
  w.set_metadata("format", "mmx-train-state");
  w.add("master", DType::kF32, {P.total()}, P.value.data(), size_t(P.total()) * 4);
  w.add("adam_m", DType::kF32, {P.total()}, opt.m.data(), opt.m.size() * 4);
  w.add("adam_v", DType::kF32, {P.total()}, opt.v.data(), opt.v.size() * 4);
  w.write((dir / state).string());
  fault_point(step, "state-written");
  save_params_to(dir, P, model_dtype);
  fault_point(step, "model-written");
  log.sync();
  fault_point(step, "log-synced");
  json files = json::object();
  files[state] = file_entry(dir / state);
  files["model.safetensors"] = file_entry(dir / "model.safetensors");
  const json st = {{"step", step}, {"adam_t", opt.t}, {"tokens", tokens}, {"state_file", state},
                   {"files", files}, {"run", run}};
  const std::string manifest = (dir / "train_state.json").string(), body = st.dump(2) + "\n";
  if (fault_armed(step, "manifest-tmp-written")) {  // a kill between write_file_atomic's temp file and its rename
    write_file(manifest + ".tmp", body);
    fault_point(step, "manifest-tmp-written");
  }
  write_file_atomic(manifest, body);
  fault_point(step, "committed");
  // The commit names `state` only: every other state file (and the legacy name) is history.
  std::error_code ec;
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((is_state_file(name) && name != state) || name == "train_state.safetensors") old.push_back(e.path());
  }
  for (const fs::path& p : old) fs::remove(p, ec);
  fault_point(step, "cleaned");
}

CheckpointInfo open_checkpoint(const fs::path& dir, bool quiet) {
  const fs::path mf = dir / "train_state.json";
  if (!fs::exists(mf)) fail("--resume {}: no train_state.json there (was it written by `mmx train`?)", dir.string());
  const std::string text = read_file(mf.string(), "train state");
  json st;
  try {
    st = json::parse(text);
    if (!st.is_object()) throw std::runtime_error("not an object");
  } catch (const std::exception& e) {
    fail("{}: {} ({} bytes): the checkpoint's commit record is damaged; restore it from a copy, or start the run "
         "again", mf.string(), text.empty() ? "empty" : "not valid JSON", text.size());
  }
  CheckpointInfo c;
  try {
    c.step = st.at("step");
    c.adam_t = st.at("adam_t");
    c.tokens = st.at("tokens");
    c.run = st.at("run");
    c.files = st.value("files", json());
    c.state_file = dir / st.value("state_file", std::string("train_state.safetensors"));
  } catch (const json::exception& e) {
    fail("{}: a field is missing or of the wrong type ({})", mf.string(), e.what());
  }
  if (c.files.is_object() && c.files.contains(c.state_file.filename().string())) {
    const std::string why = mismatch(c.state_file, c.files.at(c.state_file.filename().string()));
    if (!why.empty())
      fail("{}: the step-{} training state is damaged: {}; the run cannot resume from it", c.state_file.string(), c.step, why);
  } else if (!fs::exists(c.state_file)) {
    fail("--resume {}: {} is missing", dir.string(), c.state_file.string());
  }
  // What killed writes leave: temporaries, and state files the commit does not name.
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    if (tmp || (is_state_file(name) && e.path() != c.state_file)) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) {
    if (!quiet) std::fprintf(stderr, "resume: removing %s (left by an interrupted checkpoint)\n", p.c_str());
    fs::remove(p, ec);
  }
  return c;
}

void load_checkpoint_state(const CheckpointInfo& c, ParamSet<float>& P, AdamW& opt) {
  const TensorStore st = TensorStore::open(c.state_file.string());
  for (auto [name, dst] : {std::pair{"master", &P.value}, {"adam_m", &opt.m}, {"adam_v", &opt.v}}) {
    const Tensor t = st.tensor(name);
    if (t.dtype != DType::kF32 || t.numel() != int64_t(dst->size()))
      fail("{}: '{}' does not match this model ({} values, expected {})", c.state_file.string(), name, t.numel(),
           dst->size());
    std::memcpy(dst->data(), t.data, dst->size() * 4);
  }
  opt.t = c.adam_t;
}

void repair_model_export(const CheckpointInfo& c, const fs::path& dir, const ParamSet<float>& P, DType model_dtype) {
  if (!c.files.is_object() || !c.files.contains("model.safetensors")) return;  // an old run: unchecked
  const std::string why = mismatch(dir / "model.safetensors", c.files.at("model.safetensors"));
  if (why.empty()) return;
  std::fprintf(stderr, "resume: %s/model.safetensors is not the step-%lld export (%s); writing it again from the "
                       "master weights\n", dir.c_str(), (long long)c.step, why.c_str());
  save_params_to(dir, P, model_dtype);  // the same bytes the commit hashed: P is that step's master
  const std::string again = mismatch(dir / "model.safetensors", c.files.at("model.safetensors"));
  if (!again.empty()) fail("{}/model.safetensors: rewritten from the step-{} master weights, {}", dir.string(), c.step, again);
}

}  // namespace mmx::train
