// load_bench: a load generator for `mmx serve` (issue 6 "Serving").
//
//   load_bench --mmx build/tools/mmx -m models/tiny-m2      # starts `mmx serve --port 0` itself
//   load_bench --url http://127.0.0.1:8080                  # or drives a running server
//
// Phase 1 (load): --clients concurrent streaming clients run --requests chat completions
// (varied prompt lengths, max_tokens, temperature 0, stream_options.include_usage) and record
// per request: time to the 200 headers (the server awaits the first token before sending them),
// TTFT (first content / reasoning / tool-call delta), inter-token latencies (gaps between those
// deltas), total. Overall: requests/s, generated tokens/s (usage.completion_tokens), errors,
// percentiles. Then GET /metrics: KV pages used and running / waiting requests must be back to 0.
// Phase 2 (prefix): TTFT of a request with a fresh ~2K-token system prompt (cold) vs the same
// system prompt with a different user turn (warm), --pairs pairs, median ratio.
//
// Loopback only; the whole run is bounded by --timeout-s (the server is killed, exit 3).
// Exit status: 0 ok; 1 request errors or the /metrics leak check failed; 2 usage / startup;
// 3 timeout. Speed is reported, never asserted.
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
  std::string url, mmx, model;
  int clients = 64, requests = 256, max_tokens = 32, pairs = 5, prefix_tokens = 2000;
  int http_threads = 0;  // 0: clients + 8 (a stream holds one server thread)
  int timeout_s = 300;
  std::string serve_args;  // extra args for mmx serve (space-separated)
};

[[noreturn]] void usage_exit(const char* msg) {
  std::fprintf(stderr,
               "load_bench: %s\n"
               "usage: load_bench (--url http://127.0.0.1:PORT | --mmx PATH -m MODEL_DIR)\n"
               "  [--clients 64] [--requests 256] [--max-tokens 32] [--pairs 5] [--prefix-tokens 2000]\n"
               "  [--http-threads N (default clients+8)] [--serve-args '...'] [--timeout-s 300]\n",
               msg);
  std::exit(2);
}

Opts parse(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage_exit(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto num = [&]() {
      std::string v = val();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < 0 || n > 1000000) usage_exit(("bad number for " + a).c_str());
      return int(n);
    };
    if (a == "--url") o.url = val();
    else if (a == "--mmx") o.mmx = val();
    else if (a == "-m" || a == "--model") o.model = val();
    else if (a == "--clients") o.clients = num();
    else if (a == "--requests") o.requests = num();
    else if (a == "--max-tokens") o.max_tokens = num();
    else if (a == "--pairs") o.pairs = num();
    else if (a == "--prefix-tokens") o.prefix_tokens = num();
    else if (a == "--http-threads") o.http_threads = num();
    else if (a == "--timeout-s") o.timeout_s = num();
    else if (a == "--serve-args") o.serve_args = val();
    else if (a == "-h" || a == "--help") usage_exit("help");
    else usage_exit(("unknown option " + a).c_str());
  }
  if (o.url.empty() && (o.mmx.empty() || o.model.empty())) usage_exit("give --url, or --mmx and -m");
  if (o.clients < 1 || o.requests < 1 || o.max_tokens < 1) usage_exit("clients, requests, max-tokens must be >= 1");
  if (o.http_threads == 0) o.http_threads = o.clients + 8;
  return o;
}

// ---- the server child (when started here) ----
pid_t g_server = -1;

void kill_server() {
  if (g_server > 0) {
    kill(g_server, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      if (waitpid(g_server, nullptr, WNOHANG) == g_server) { g_server = -1; return; }
      usleep(100 * 1000);
    }
    kill(g_server, SIGKILL);
    waitpid(g_server, nullptr, 0);
    g_server = -1;
  }
}

// Starts `mmx serve -m MODEL --port 0`, returns the port from its "listening on" line. The
// server's stderr keeps being forwarded (prefixed) by a detached thread.
int start_server(const Opts& o) {
  int fds[2];
  if (pipe(fds) != 0) usage_exit("pipe failed");
  std::vector<std::string> args = {o.mmx, "serve", "-m", o.model, "--host", "127.0.0.1", "--port", "0",
                                   "--http-threads", std::to_string(o.http_threads)};
  for (size_t p = 0; p < o.serve_args.size();) {
    size_t q = o.serve_args.find(' ', p);
    if (q == std::string::npos) q = o.serve_args.size();
    if (q > p) args.push_back(o.serve_args.substr(p, q - p));
    p = q + 1;
  }
  std::fprintf(stderr, "load_bench: starting");
  for (auto& a : args) std::fprintf(stderr, " %s", a.c_str());
  std::fprintf(stderr, "\n");
  g_server = fork();
  if (g_server < 0) usage_exit("fork failed");
  if (g_server == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    av.push_back(nullptr);
    execv(av[0], av.data());
    std::perror("execv");
    _exit(127);
  }
  close(fds[1]);
  FILE* err = fdopen(fds[0], "r");
  char line[4096];
  int port = -1;
  while (std::fgets(line, sizeof line, err)) {
    std::fprintf(stderr, "  [server] %s", line);
    const char* p = std::strstr(line, "listening on http://");
    if (p) {
      const char* colon = std::strrchr(p, ':');
      if (colon) port = std::atoi(colon + 1);
      break;
    }
  }
  if (port <= 0) {
    kill_server();
    usage_exit("the server did not report a port");
  }
  std::thread([err] {
    char l[4096];
    while (std::fgets(l, sizeof l, err)) std::fprintf(stderr, "  [server] %s", l);
    std::fclose(err);
  }).detach();
  return port;
}

// ---- statistics ----
double pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double r = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(r)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (r - double(lo));
}

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// ---- deterministic prompt text ----
const char* kWords[] = {"the",    "model",  "serves", "many",   "requests", "while",  "tokens", "stream",
                        "from",   "each",   "batch",  "memory", "pages",    "cache",  "prefix", "latency",
                        "river",  "stone",  "green",  "window", "quiet",    "number", "signal", "paper",
                        "engine", "garden", "yellow", "market", "winter",   "silver", "letter", "bridge"};

struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  }
};

std::string words(int n, uint64_t seed) {
  Lcg g(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i) out += (i % 12 == 11) ? ". " : " ";
    out += kWords[g.next() % (sizeof kWords / sizeof *kWords)];
  }
  return out;
}

// ---- one streaming chat request ----
struct Result {
  int status = 0;
  std::string error;  // transport error or error body (HTTP or in-band)
  double headers_s = NAN, ttft_s = NAN, total_s = NAN;
  std::vector<double> itl_s;
  int prompt_tokens = -1, completion_tokens = -1, n_deltas = 0;
  std::string finish_reason;
};

bool has_delta_text(const json& d) {
  for (const char* k : {"content", "reasoning_content"})
    if (d.contains(k) && d[k].is_string() && !d[k].get_ref<const std::string&>().empty()) return true;
  return d.contains("tool_calls");
}

Result stream_chat(const std::string& host, int port, const json& body, int timeout_s) {
  Result r;
  httplib::Client cli(host, port);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(timeout_s, 0);
  cli.set_write_timeout(30, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Accept", "text/event-stream"}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string buf, errbody;
  Clock::time_point t0 = Clock::now(), last{};
  bool first = true;
  req.response_handler = [&](const httplib::Response& res) {
    r.status = res.status;
    r.headers_s = secs(t0, Clock::now());
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const auto now = Clock::now();
    if (r.status != 200) {
      errbody.append(data, n);
      return true;
    }
    buf.append(data, n);
    size_t e;
    while ((e = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, e);
      buf.erase(0, e + 2);
      if (ev.rfind("data: ", 0) != 0) continue;  // ": ping" comments
      std::string payload = ev.substr(6);
      if (payload == "[DONE]") continue;
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) {
        r.error = "unparsable SSE event: " + payload;
        continue;
      }
      if (j.contains("error")) {
        r.error = "in-band error: " + payload;
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        r.prompt_tokens = j["usage"].value("prompt_tokens", -1);
        r.completion_tokens = j["usage"].value("completion_tokens", -1);
      }
      if (!j.contains("choices")) continue;
      for (const auto& c : j["choices"]) {
        if (c.contains("finish_reason") && c["finish_reason"].is_string()) r.finish_reason = c["finish_reason"];
        if (!c.contains("delta") || !has_delta_text(c["delta"])) continue;
        ++r.n_deltas;
        if (first) {
          r.ttft_s = secs(t0, now);
          first = false;
        } else {
          r.itl_s.push_back(secs(last, now));
        }
        last = now;
      }
    }
    return true;
  };
  auto res = cli.send(req);
  r.total_s = secs(t0, Clock::now());
  if (!res) {
    r.error = "transport error: " + httplib::to_string(res.error());
  } else if (r.status != 200) {
    r.error = "HTTP " + std::to_string(r.status) + ": " + (errbody.empty() ? res->body : errbody);
  } else if (r.error.empty() && r.completion_tokens < 0) {
    r.error = "no usage chunk in the stream";
  }
  return r;
}

json chat_body(const std::string& model, const std::string& system, const std::string& user, int max_tokens) {
  json msgs = json::array();
  if (!system.empty()) msgs.push_back({{"role", "system"}, {"content", system}});
  msgs.push_back({{"role", "user"}, {"content", user}});
  return {{"model", model},          {"messages", msgs},
          {"max_tokens", max_tokens}, {"temperature", 0},
          {"stream", true},           {"stream_options", {{"include_usage", true}}}};
}

// ---- /metrics ----
std::map<std::string, double> get_metrics(const std::string& host, int port) {
  std::map<std::string, double> m;
  httplib::Client cli(host, port);
  cli.set_read_timeout(10, 0);
  auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return m;
  size_t p = 0;
  const std::string& b = res->body;
  while (p < b.size()) {
    size_t e = b.find('\n', p);
    if (e == std::string::npos) e = b.size();
    std::string line = b.substr(p, e - p);
    p = e + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    m[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return m;
}

void print_row(const char* name, const std::vector<double>& v, double scale, const char* unit) {
  std::printf("  %-26s n=%-6zu p50 %9.2f  p90 %9.2f  p99 %9.2f  max %9.2f %s\n", name, v.size(),
              pct(v, 50) * scale, pct(v, 90) * scale, pct(v, 99) * scale, pct(v, 100) * scale, unit);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const auto t_start = Clock::now();

  std::string host = "127.0.0.1";
  int port = 0;
  if (!o.url.empty()) {
    std::string u = o.url;
    if (u.rfind("http://", 0) == 0) u = u.substr(7);
    while (!u.empty() && u.back() == '/') u.pop_back();
    const size_t c = u.rfind(':');
    if (c == std::string::npos) usage_exit("--url needs a port");
    host = u.substr(0, c);
    port = std::atoi(u.c_str() + c + 1);
    if (host != "127.0.0.1" && host != "localhost" && host != "[::1]") usage_exit("loopback only");
  } else {
    port = start_server(o);
  }

  // Watchdog: the run is bounded; past the deadline the server is killed and we exit 3.
  std::atomic<bool> finished{false};
  std::thread([&] {
    const auto deadline = t_start + std::chrono::seconds(o.timeout_s);
    while (!finished && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished) {
      std::fprintf(stderr, "load_bench: timeout after %d s\n", o.timeout_s);
      std::fflush(stdout);
      kill_server();
      _exit(3);
    }
  }).detach();

  // The served model name (requests must name it), from /v1/models.
  std::string model;
  {
    httplib::Client cli(host, port);
    cli.set_read_timeout(10, 0);
    auto res = cli.Get("/v1/models");
    if (!res || res->status != 200) {
      kill_server();
      usage_exit("GET /v1/models failed");
    }
    model = json::parse(res->body)["data"][0]["id"];
  }
  std::printf("load_bench: server 127.0.0.1:%d, model '%s'\n", port, model.c_str());

  // ---- phase 1: load ----
  // Prompt lengths cycle through 4..~600 words (a few to ~1K tokens), user turn only.
  auto prompt_words = [](int i) { return 4 + int((uint64_t(i) * 2654435761u) % 600); };
  std::vector<Result> results(size_t(o.requests));
  std::atomic<int> next{0};
  const auto t_load0 = Clock::now();
  {
    std::vector<std::thread> th;
    for (int c = 0; c < o.clients; ++c)
      th.emplace_back([&] {
        for (int i; (i = next.fetch_add(1)) < o.requests;)
          results[size_t(i)] = stream_chat(
              host, port, chat_body(model, "", "Request " + std::to_string(i) + ": " + words(prompt_words(i), uint64_t(i)),
                                    o.max_tokens),
              o.timeout_s);
      });
    for (auto& t : th) t.join();
  }
  const double wall = secs(t_load0, Clock::now());

  std::vector<double> hdr, ttft, itl, total;
  int64_t gen_tokens = 0, prompt_tokens = 0, no_delta = 0;
  int errors = 0;
  std::map<std::string, int> finish;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (!r.error.empty()) {
      ++errors;
      if (errors <= 10) std::printf("  error in request %zu after %.2f s: %s\n", i, r.total_s, r.error.c_str());
      continue;
    }
    hdr.push_back(r.headers_s);
    total.push_back(r.total_s);
    if (std::isnan(r.ttft_s)) ++no_delta;
    else ttft.push_back(r.ttft_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    gen_tokens += r.completion_tokens;
    prompt_tokens += r.prompt_tokens;
    ++finish[r.finish_reason.empty() ? "(none)" : r.finish_reason];
  }
  const int ok = o.requests - errors;
  std::printf("\n== load: %d streaming clients, %d chat requests, max_tokens %d, temperature 0\n", o.clients,
              o.requests, o.max_tokens);
  std::printf("  wall %.2f s   requests/s %.2f   generated tok/s %.1f   prompt tok/s %.1f   errors %d\n", wall,
              ok / wall, double(gen_tokens) / wall, double(prompt_tokens) / wall, errors);
  std::printf("  prompt tokens/request mean %.0f   generated tokens/request mean %.1f   finish:", ok ? double(prompt_tokens) / ok : 0.0,
              ok ? double(gen_tokens) / ok : 0.0);
  for (auto& [k, v] : finish) std::printf(" %s=%d", k.c_str(), v);
  std::printf("   requests with no text delta: %lld\n", (long long)no_delta);
  print_row("time to 200 headers", hdr, 1e3, "ms");
  print_row("TTFT (first delta)", ttft, 1e3, "ms");
  print_row("inter-token latency", itl, 1e3, "ms");
  print_row("total", total, 1e3, "ms");

  // ---- /metrics: no leaked KV pages or requests ----
  bool leak_ok = false;
  {
    auto m = get_metrics(host, port);
    auto show = [&](const char* when, const std::map<std::string, double>& mm) {
      auto g = [&](const char* k) { auto it = mm.find(k); return it == mm.end() ? NAN : it->second; };
      std::printf("  /metrics %s: kv_pages_used %.0f / %.0f, running %.0f, waiting %.0f\n", when, g("mmx_kv_pages_used"),
                  g("mmx_kv_pages_total"), g("mmx_requests_running"), g("mmx_requests_waiting"));
      return g("mmx_kv_pages_used") == 0 && g("mmx_requests_running") == 0 && g("mmx_requests_waiting") == 0;
    };
    leak_ok = show("right after the load", m);
    // The engine frees a finished request inside its step; give it a moment before calling it a leak.
    for (int k = 0; k < 20 && !leak_ok; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      m = get_metrics(host, port);
      if ((leak_ok = show("after a pause", m))) break;
    }
    // The server counts a request when its handler returns, which can trail the client's last
    // byte: re-read once after a short pause if the count is behind.
    if (m["mmx_requests_total{endpoint=\"chat_completions\",status=\"200\"}"] < double(o.requests - errors)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      m = get_metrics(host, port);
    }
    const double n200 = m.count("mmx_requests_total{endpoint=\"chat_completions\",status=\"200\"}")
                            ? m["mmx_requests_total{endpoint=\"chat_completions\",status=\"200\"}"]
                            : NAN;
    std::printf("  /metrics chat_completions 200 count %.0f (client saw %d x 200 of %d sent)\n", n200, o.requests - errors,
                o.requests);
    std::printf("  leak check: %s\n", leak_ok ? "ok (KV pages, running and waiting all 0)" : "FAILED");
  }

  // ---- phase 2: prefix-cache benefit (cold vs warm system prompt) ----
  std::vector<double> cold, warm, ratio;
  int prefix_errors = 0, sys_tokens = -1;
  if (o.pairs > 0) {
    // Calibrate words -> tokens with one throwaway system prompt (its own nonce).
    int n_words = o.prefix_tokens;
    Result cal = stream_chat(host, port, chat_body(model, "calibration " + words(400, 999999), "hi", 1), o.timeout_s);
    if (cal.error.empty() && cal.prompt_tokens > 0)
      n_words = std::max(16, int(std::lround(double(o.prefix_tokens) * 400.0 / double(cal.prompt_tokens))));
    for (int p = 0; p < o.pairs; ++p) {
      const std::string sys = "Session " + std::to_string(p) + ". " + words(n_words, uint64_t(1000 + p));
      Result c = stream_chat(host, port, chat_body(model, sys, "First question: what is the river?", 4), o.timeout_s);
      Result w = stream_chat(host, port, chat_body(model, sys, "Second question: why is the stone green?", 4), o.timeout_s);
      if (!c.error.empty() || !w.error.empty()) {
        ++prefix_errors;
        std::printf("  prefix pair %d error: %s %s\n", p, c.error.c_str(), w.error.c_str());
        continue;
      }
      sys_tokens = c.prompt_tokens;
      // Time to the 200 headers = the first token sampled (always present, unlike a text delta).
      cold.push_back(c.headers_s);
      warm.push_back(w.headers_s);
      ratio.push_back(c.headers_s / w.headers_s);
    }
    auto m = get_metrics(host, port);
    std::printf("\n== prefix cache: %d pairs, system prompt ~%d tokens (prompt_tokens of the cold request)\n", o.pairs,
                sys_tokens);
    std::printf("  TTFT cold median %.1f ms   warm median %.1f ms   cold/warm median %.2fx   (errors %d)\n",
                pct(cold, 50) * 1e3, pct(warm, 50) * 1e3, pct(ratio, 50), prefix_errors);
    std::printf("  /metrics prefix_cache_hit_rate %.3f (hit tokens %.0f)%s\n", m["mmx_prefix_cache_hit_rate"],
                m["mmx_prefix_cache_hit_tokens_total"],
                m["mmx_prefix_cache_hit_tokens_total"] == 0 ? "   -- no prefix-cache hits" : "");
  }

  finished = true;
  kill_server();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  std::printf("\nload_bench: total run %.1f s; this client used %.1f CPU s (its own cost, not the server's)\n",
              secs(t_start, Clock::now()), cpu);
  return (errors == 0 && prefix_errors == 0 && leak_ok) ? 0 : 1;
}
