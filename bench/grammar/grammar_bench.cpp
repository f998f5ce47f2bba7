// Constraint-mask cost per token (src/grammar) on a real-size vocabulary: simulated constrained
// replies with random LLM-like logits, timing the whole per-token constraint path
// (GrammarConstraint::restrict: mask lookup or trie walk, stop ids, applying -inf to the logits)
// next to the unconstrained sampler's pick() over the same logits. Reports medians, p90 and max
// in microseconds, the mask-cache hit rate, and — given the model's decode step (--decode-ms,
// bench/grammar/run.sh measures it) — the cost as a fraction of that step.
//   grammar_bench --tokenizer DIR|tokenizer.json [--replies 8] [--max-tokens 256] [--decode-ms X]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "grammar/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/tool_grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

const char* kTripSchema = R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":40},"days":{"type":"integer","minimum":1,"maximum":30},
  "season":{"enum":["spring","summer","autumn","winter"]},
  "stops":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"nights":{"type":"integer","minimum":0,"maximum":9}},"required":["name","nights"],"additionalProperties":false},"maxItems":4},
  "notes":{"type":"string"}},"required":["city","days","season","stops","notes"],"additionalProperties":false})";

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
  "city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"type":"string","enum":["c","f"]}},"required":["city","days"]}}},
  {"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}}}])";

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path;
  int replies = 8;
  int64_t max_tokens = 256;
  double decode_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || i + 1 >= argc) {
      std::fprintf(stderr, "usage: grammar_bench --tokenizer DIR|tokenizer.json [--replies N] [--max-tokens N] [--decode-ms X]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
    if (a == "--tokenizer") tok_path = argv[++i];
    else if (a == "--replies") replies = std::atoi(argv[++i]);
    else if (a == "--max-tokens") max_tokens = std::atoll(argv[++i]);
    else if (a == "--decode-ms") decode_ms = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "unknown flag %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (tok_path.empty()) {
    std::fprintf(stderr, "grammar_bench: give --tokenizer DIR|tokenizer.json\n");
    return 2;
  }
  try {
    const mmx::tok::Tokenizer tok = mmx::tok::Tokenizer::from_path(tok_path);
    auto t0 = Clock::now();
    auto trie = std::make_shared<const mmx::grammar::VocabTrie>(tok);
    std::printf("vocabulary %d ids, trie %zu nodes, built in %.1f ms\n", trie->n_vocab(), trie->nodes().size(), us_since(t0) / 1e3);
    const int32_t eos = tok.token_to_id("[e~[") >= 0 ? tok.token_to_id("[e~[") : trie->n_vocab() - 1;
    const std::vector<int32_t> stops{eos};
    struct Case {
      const char* name;
      std::string gbnf;
      bool special;
    };
    const std::vector<Case> cases = {
        {"json_object", mmx::grammar::json_object_gbnf(), false},
        {"json_schema (trip)", mmx::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kTripSchema)), false},
        {"tool call (M2 XML, 2 tools)", mmx::grammar::m2_tool_call_gbnf(nlohmann::ordered_json::parse(kTools), ""), true},
    };
    std::printf("%-28s %9s %8s %8s %8s %8s %7s %6s %10s\n", "grammar", "compile", "mean us", "p50 us", "p90 us", "max us",
                "hits", "walks", decode_ms > 0 ? "mean/step" : "");
    std::vector<float> logits(size_t(trie->n_vocab()));
    std::vector<double> plain;
    for (const Case& c : cases) {
      t0 = Clock::now();
      auto masker = std::make_shared<mmx::grammar::TokenMasker>(trie, mmx::grammar::parse_gbnf(c.gbnf), c.special);
      const double compile_ms = us_since(t0) / 1e3;
      std::vector<double> per_token;
      std::mt19937 rng(42);
      std::normal_distribution<float> z(0.f, 2.f);
      for (int r = 0; r < replies; ++r) {
        mmx::grammar::GrammarConstraint con(masker);
        mmx::SamplingParams p;
        p.temperature = 1.0f;
        p.seed = uint64_t(r);
        mmx::Sampler sampler(p, {}, stops);
        for (int64_t t = 0; t < max_tokens; ++t) {
          for (size_t i = 0; i < logits.size(); i += 7) logits[i] = z(rng);  // refresh a part: cheap, still varied
          std::vector<float> raw = logits;
          auto t1 = Clock::now();
          sampler.pick(raw.data(), int64_t(raw.size()), 0.5);
          plain.push_back(us_since(t1));
          t1 = Clock::now();
          con.restrict(logits.data(), int64_t(logits.size()), max_tokens - t, stops);
          per_token.push_back(us_since(t1));
          const int32_t id = sampler.sample(logits.data(), int64_t(logits.size()));
          con.accept(id);
          logits = raw;
          if (id == eos) break;
        }
      }
      const auto st = masker->stats();
      double mean = 0;
      for (double x : per_token) mean += x / double(per_token.size());
      std::printf("%-28s %7.1fms %8.0f %8.0f %8.0f %8.0f %6.0f%% %6lld", c.name, compile_ms, mean, pct(per_token, 0.5),
                  pct(per_token, 0.9), pct(per_token, 1.0), 100.0 * double(st.cache_hits) / double(std::max<int64_t>(1, st.asks)),
                  (long long)st.walks);
      if (decode_ms > 0) std::printf(" %9.2f%%", 100.0 * mean / 1e3 / decode_ms);
      std::printf("\n");
    }
    std::printf("unconstrained sampler pick(): p50 %.0f us (temperature 1, no top-k/top-p)\n", pct(plain, 0.5));
    if (decode_ms > 0) std::printf("decode step given: %.1f ms\n", decode_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
