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
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

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
// chat page (GET or HEAD of a web_assets.h path) and CORS preflights (OPTIONS) needs "Authorization:
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
  struct Conn;  // one client connection and, once its request is complete, its upstream one (front.cpp)
  using ConnPtr = std::shared_ptr<Conn>;

  // The loop: wait for events, dispatch each, expire deadlines; at stop, close everything.
  void loop();
  void dispatch(int fd, uint32_t events);
  void accept_all();                            // the listening socket is readable
  void on_client(const ConnPtr& c, uint32_t events);
  void on_upstream(const ConnPtr& c, uint32_t events);
  void expire_deadlines();                      // heads, bodies and lingering closes past their time
  void close_all();

  // The client side, one step each (false: the connection was closed or answered; stop there).
  void drain_linger(const ConnPtr& c);          // kLinger: read and drop until EOF
  bool read_client(const ConnPtr& c);           // request bytes, a half-close, or a reset
  bool write_client(const ConnPtr& c);          // pending output
  bool after_output(const ConnPtr& c);          // all output sent: linger after our reply, or close
  // The request so far, after new bytes: the head (limits, framing, API key), then the body.
  void progress(const ConnPtr& c);
  void read_head(const ConnPtr& c);
  bool read_framing(const ConnPtr& c);          // Expect, Content-Length, Transfer-Encoding
  void read_body(const ConnPtr& c);
  void hand_over(const ConnPtr& c);             // complete: open the upstream connection, relay

  // Bookkeeping.
  void watch(int fd, uint32_t events, bool add);
  void update_client(const ConnPtr& c);
  void update_upstream(const ConnPtr& c);
  void answer(const ConnPtr& c, int status, const char* reason, const std::string& msg, const char* code = "");
  void release(Conn& c);                        // the request is upstream (or dropped): forget its bytes
  void close_conn(const ConnPtr& c);

  FrontOptions opts_;
  int upstream_port_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  // The loop thread's own state.
  std::unordered_map<int, ConnPtr> by_fd_;      // client and upstream fds -> their conn
  std::map<std::string, int> per_client_;
  int n_conns_ = 0;
  size_t buffered_ = 0;                         // request bytes held over all connections
  std::vector<char> buf_ = std::vector<char>(65536);
};

}  // namespace mmx::server
