// The sample file reader and the objective batch of samples.h.
#include "rl/samples.h"

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace mmx::rl {

namespace {

std::vector<int32_t> ids_field(const nlohmann::json& j, const char* key, int64_t vocab, const std::string& where) {
  if (!j.contains(key) || !j[key].is_array()) fail("{}: \"{}\" must be an array of token ids", where, key);
  std::vector<int32_t> v;
  for (const auto& x : j[key]) {
    if (!x.is_number_integer()) fail("{}: \"{}\" holds {}, not a token id", where, key, x.dump());
    const int64_t id = x.get<int64_t>();
    if (id < 0 || id >= vocab) fail("{}: \"{}\" holds id {} outside the vocabulary [0, {})", where, key, id, vocab);
    v.push_back(int32_t(id));
  }
  if (v.empty()) fail("{}: \"{}\" is empty", where, key);
  return v;
}

std::vector<double> floats_field(const nlohmann::json& j, const char* key, size_t n, const std::string& where) {
  if (!j[key].is_array()) fail("{}: \"{}\" must be an array of numbers", where, key);
  std::vector<double> v;
  for (const auto& x : j[key]) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) fail("{}: \"{}\" holds {}, not a finite number", where, key, x.dump());
    v.push_back(x.get<double>());
  }
  if (v.size() != n) fail("{}: \"{}\" has {} values for {} completion ids (one each)", where, key, v.size(), n);
  return v;
}

}  // namespace

std::vector<ScoredSample> read_samples_jsonl(const std::string& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open the samples file", path);
  std::vector<ScoredSample> out;
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not JSON ({})", where, e.what());
    }
    if (!j.is_object()) fail("{}: each line must be a JSON object", where);
    for (const auto& [k, v] : j.items())
      if (k != "prompt" && k != "completion" && k != "advantage" && k != "old_logprobs" && k != "ref_logprobs")
        fail("{}: unknown field \"{}\" (expected prompt, completion, advantage, old_logprobs, ref_logprobs)", where, k);
    ScoredSample s;
    s.ids.prompt = ids_field(j, "prompt", vocab, where);
    s.ids.completion = ids_field(j, "completion", vocab, where);
    if (!j.contains("advantage") || !j["advantage"].is_number() || !std::isfinite(j["advantage"].get<double>()))
      fail("{}: \"advantage\" must be a finite number", where);
    s.advantage = j["advantage"].get<double>();
    if (!j.contains("old_logprobs")) fail("{}: \"old_logprobs\" is missing (one per completion id)", where);
    s.old_logp = floats_field(j, "old_logprobs", s.ids.completion.size(), where);
    if (j.contains("ref_logprobs")) s.ref_logp = floats_field(j, "ref_logprobs", s.ids.completion.size(), where);
    out.push_back(std::move(s));
  }
  if (out.empty()) fail("{}: no samples", path);
  const bool ref = !out[0].ref_logp.empty();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].ref_logp.empty() == ref)
      fail("{}: sample {} {} \"ref_logprobs\" while sample 1 {}: give it for every sample or none", path, i + 1,
           ref ? "lacks" : "has", ref ? "has it" : "does not");
  return out;
}

ObjectiveBatch objective_batch(const std::vector<ScoredSample>& samples) {
  ObjectiveBatch b;
  for (size_t i = 0; i < samples.size(); ++i) {
    const ScoredSample& s = samples[i];
    const size_t n = s.ids.completion.size();
    for (size_t k = 0; k < n; ++k) {
      b.sample.push_back(int32_t(i));
      b.old_logp.push_back(s.old_logp[k]);
      b.advantage.push_back(s.advantage);
      if (!s.ref_logp.empty()) b.ref_logp.push_back(s.ref_logp[k]);
    }
    b.sample_len.push_back(int64_t(n));
    b.max_len = std::max<int64_t>(b.max_len, int64_t(n));
  }
  return b;
}

std::vector<Sample> sample_ids(const std::vector<ScoredSample>& samples) {
  std::vector<Sample> v;
  for (const ScoredSample& s : samples) v.push_back(s.ids);
  return v;
}

}  // namespace mmx::rl
