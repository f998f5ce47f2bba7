#include "server/metrics.h"

#include <cstdio>

namespace mmx::server {

namespace {
std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
void line(std::string& out, const std::string& name, double v) { out += name + " " + num(v) + "\n"; }
void head(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++n;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  head(out, name, "histogram", help);
  int64_t cum = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cum += counts[i];
    line(out, name + "_bucket{le=\"" + num(bounds[i]) + "\"}", double(cum));
  }
  line(out, name + "_bucket{le=\"+Inf\"}", double(n));
  line(out, name + "_sum", sum);
  line(out, name + "_count", double(n));
}

ServerMetrics::ServerMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{endpoint, status}];
}
void ServerMetrics::count_tokens(int64_t n_prompt, int64_t n_generated) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += n_prompt;
  generated_tokens_ += n_generated;
}
void ServerMetrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.observe(s);
}
void ServerMetrics::observe_itl(double s) {
  std::lock_guard<std::mutex> l(mu_);
  itl_.observe(s);
}
void ServerMetrics::count_dropped_reasoning(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  dropped_reasoning_ += n;
}

std::string ServerMetrics::render(const EngineMetrics& e, const FrontStats& http) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  head(out, "mmx_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [k, v] : requests_)
    line(out, "mmx_requests_total{endpoint=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"}",
         double(v));
  head(out, "mmx_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  line(out, "mmx_prompt_tokens_total", double(prompt_tokens_));
  head(out, "mmx_generation_tokens_total", "counter", "Generated tokens of finished requests.");
  line(out, "mmx_generation_tokens_total", double(generated_tokens_));
  head(out, "mmx_dropped_reasoning_turns_total", "counter",
       "Assistant turns whose reasoning was dropped to fit --drop-reasoning-over.");
  line(out, "mmx_dropped_reasoning_turns_total", double(dropped_reasoning_));
  ttft_.render(out, "mmx_time_to_first_token_seconds", "Request arrival to first generated token.");
  itl_.render(out, "mmx_inter_token_latency_seconds", "Time between consecutive generated tokens.");
  head(out, "mmx_prefix_cache_hit_rate", "gauge", "Prompt tokens served from the prefix cache / looked up.");
  line(out, "mmx_prefix_cache_hit_rate",
       e.prefix_lookup_tokens > 0 ? double(e.prefix_hits_tokens) / double(e.prefix_lookup_tokens) : 0.0);
  head(out, "mmx_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.");
  line(out, "mmx_prefix_cache_hit_tokens_total", double(e.prefix_hits_tokens));
  head(out, "mmx_prefix_cache_lookup_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.");
  line(out, "mmx_prefix_cache_lookup_tokens_total", double(e.prefix_lookup_tokens));
  head(out, "mmx_kv_pages_used", "gauge", "KV cache pages in use.");
  line(out, "mmx_kv_pages_used", double(e.kv_pages_used));
  head(out, "mmx_kv_pages_total", "gauge", "KV cache pages in the pool.");
  line(out, "mmx_kv_pages_total", double(e.kv_pages_total));
  head(out, "mmx_preemptions_total", "counter", "Sequences preempted (pages ran out) and recomputed later.");
  line(out, "mmx_preemptions_total", double(e.preemptions));
  head(out, "mmx_requests_running", "gauge", "Requests being decoded.");
  line(out, "mmx_requests_running", double(e.requests_running));
  head(out, "mmx_requests_waiting", "gauge", "Requests queued for admission.");
  line(out, "mmx_requests_waiting", double(e.requests_waiting));
  head(out, "mmx_last_batch_tokens", "gauge", "Tokens in the last engine step.");
  line(out, "mmx_last_batch_tokens", double(e.last_batch_tokens));
  head(out, "mmx_last_batch_seqs", "gauge", "Sequences in the last engine step.");
  line(out, "mmx_last_batch_seqs", double(e.last_batch_seqs));
  head(out, "mmx_spec_decode_num_drafts_total", "counter", "Sequence steps that verified drafted tokens (vLLM's spec_decode_num_drafts).");
  line(out, "mmx_spec_decode_num_drafts_total", double(e.spec_drafts));
  head(out, "mmx_spec_decode_num_draft_tokens_total", "counter", "Drafted tokens verified.");
  line(out, "mmx_spec_decode_num_draft_tokens_total", double(e.spec_draft_tokens));
  head(out, "mmx_spec_decode_num_accepted_tokens_total", "counter", "Drafted tokens accepted.");
  line(out, "mmx_spec_decode_num_accepted_tokens_total", double(e.spec_accepted));
  head(out, "mmx_spec_decode_num_accepted_tokens_per_pos_total", "counter", "Drafted tokens accepted, by draft position.");
  for (size_t j = 0; j < e.spec_accepted_per_pos.size(); ++j)
    line(out, "mmx_spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(j) + "\"}",
         double(e.spec_accepted_per_pos[j]));
  head(out, "mmx_engine_steps_total", "counter", "Engine steps that ran a batch.");
  line(out, "mmx_engine_steps_total", double(e.steps));
  head(out, "mmx_http_connections_total", "counter", "Client connections accepted.");
  line(out, "mmx_http_connections_total", double(http.connections));
  head(out, "mmx_http_requests_total", "counter", "Complete requests handed to a route.");
  line(out, "mmx_http_requests_total", double(http.requests));
  head(out, "mmx_http_keep_alive_requests_total", "counter",
       "Requests on a connection that had served one before (keep-alive reuse).");
  line(out, "mmx_http_keep_alive_requests_total", double(http.reused));
  head(out, "mmx_http_slow_readers_cut_total", "counter",
       "Connections cut because the client took none of its pending output within the write timeout.");
  line(out, "mmx_http_slow_readers_cut_total", double(http.cut_slow_readers));
  return out;
}

}  // namespace mmx::server
