// ServerMetrics: the server's own counters and latency histograms, rendered with the engine's
// gauges as Prometheus text for GET /metrics. Thread-safe (one mutex; updates are rare and cheap).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "server/front.h"

namespace mmx::server {

// A cumulative Prometheus histogram with fixed upper bounds (seconds).
struct Histogram {
  std::vector<double> bounds;    // ascending upper bounds; +Inf implied
  std::vector<int64_t> counts;   // [bounds.size() + 1], non-cumulative
  double sum = 0;
  int64_t n = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& help) const;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void count_request(const std::string& endpoint, int status);   // every answered request
  void count_tokens(int64_t n_prompt, int64_t n_generated);
  void observe_ttft(double seconds);                             // request arrival -> first token
  void observe_itl(double seconds);                              // between consecutive tokens
  void count_dropped_reasoning(int64_t n_turns);
  // Prometheus text exposition (version 0.0.4) of everything above plus `engine` and `http`.
  std::string render(const EngineMetrics& engine, const FrontStats& http = {}) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (endpoint, status) -> count
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, dropped_reasoning_ = 0;
  Histogram ttft_, itl_;
};

}  // namespace mmx::server
