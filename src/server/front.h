// The public side of `mmx serve`: one epoll thread owns the listening socket and reads every
// request — head and body — itself, under byte limits and overall deadlines, holding no thread
// per connection. Only a complete request is handed to the HTTP server (httplib, listening on an
// internal loopback port), whose response is relayed back as it comes (SSE included).
//
// Why (hardening issue, findings 5, 6, 8): httplib runs a thread per connection with per-read
// timeouts, so 300 sockets trickling one header byte every few seconds held every thread and
// starved everyone; it reads any number of header fields into memory before a handler can refuse
// them; and it takes a peer's half-close (read EOF) for a dead socket. Here a slow client costs a
// buffer, a head or body past its deadline gets 408, a head past its byte limit 431, and a client
// that half-closes still receives its whole answer (only a failed write means it is gone, and then
// the upstream connection is closed, which cancels the generation as before).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

namespace mmx::server {

struct FrontOptions {
  size_t max_head_bytes = size_t(40) << 10;  // request line + header fields; more gets 431
  size_t max_body_bytes = size_t(8) << 20;   // on the wire; more gets 413 (decoded: the server's cap)
  int head_timeout_ms = 10000;               // the whole head must arrive within this; else 408
  int body_timeout_ms = 60000;               // the whole body within this after the head; else 408
  int max_connections = 4096;                // open client connections; more are answered 503
  int max_per_client = 1024;                 // per client address; more are answered 503
  size_t max_buffered_bytes = size_t(1) << 30;  // request bytes held over all connections; the
                                             // connection that would pass it is answered 503
  std::string api_key;                       // check_api_key(), from the head, before the body is awaited
};

// The one API-key rule, used by the front and, for requests that reach the internal port
// directly, by the HTTP server: nothing required (key ""), or every request but GET /health, the
// chat page (GET of a web_assets.h path) and CORS preflights (OPTIONS) needs "Authorization:
// Bearer KEY" (/metrics and /tokenize included),
// compared in constant time. target: the request target (a query string is ignored).
// x_api_key: the "x-api-key" header, which Anthropic clients send instead (either one will do).
// Throws the 401 ApiError when refused.
void check_api_key(const std::string& key, const std::string& method, const std::string& target,
                   const std::string& authorization, const std::string& x_api_key = "");

class Front {
 public:
  // Relays complete requests to 127.0.0.1:upstream_port.
  Front(FrontOptions opts, int upstream_port);
  ~Front();  // stops
  // Binds host:port (0 = any free port) and starts the loop; returns the bound port. Throws mmx::Error.
  int start(const std::string& host, int port);
  void stop();

 private:
  void loop();
  FrontOptions opts_;
  int upstream_port_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mmx::server
