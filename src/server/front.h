// The HTTP side of `mmx serve`, whole: one epoll thread owns the listening socket and every client
// connection; it reads each request — head and body — under byte limits and deadlines, holding
// no thread per connection, and hands the complete request to a route handler on a WorkerPool
// thread, in this process. The handler's answer goes back through the connection's outbox, which
// the loop writes as the client takes it. There is no second HTTP parser and no internal port.
//
//   accept -> kHead (head deadline, byte and field limits, API key) -> kBody (body deadline, cap)
//          -> kBusy (a worker runs the handler; writes go to the outbox, bounded) -> response done:
//             keep-alive -> kHead again (idle deadline; pipelined bytes are the next request)
//             or close   -> kLinger (our reply is out; the rest of the upload read and dropped)
//
// Why (hostile-clients issues, rounds 1 and 2): a thread per connection with per-read timeouts let
// 300 trickling sockets starve everyone; a relay to an internal HTTP server left that port with no
// deadlines and no header limit (140 trickling sockets froze the server through it). Here a slow
// client costs a buffer; a head or body past its deadline gets 408, a head past its limits 431; a
// client that half-closes still gets its whole answer; a client that stops reading is cut after
// write_timeout_ms with its outbox full (its route's write fails and its generation is cancelled).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http.h"
#include "server/worker_pool.h"

namespace mmx::server {

struct FrontOptions {
  size_t max_head_bytes = size_t(48) << 10;  // request line + header fields on the wire; more gets 431
  int max_headers = 100;                     // header fields; more get 431
  size_t max_header_bytes = size_t(32) << 10;  // their names + values; more get 431
  size_t max_body_bytes = size_t(8) << 20;   // decoded (chunked, gzip undone); more gets 413
  int head_timeout_ms = 10000;               // a head must arrive within this of its first byte; else 408
  int body_timeout_ms = 60000;               // the whole body within this after the head; else 408
  int keep_alive_ms = 15000;                 // an idle kept-alive connection is closed after this
  int max_requests_per_connection = 1000;    // then "Connection: close"
  int write_timeout_ms = 30000;              // a client that takes no byte of pending output for this long is cut
  size_t max_out_bytes = size_t(1) << 20;    // response bytes held per connection; a route's write waits past it
  int send_buffer_bytes = 0;                 // SO_SNDBUF of client sockets (0: the kernel's, autotuned up to
                                             // net.ipv4.tcp_wmem's max — MiBs a non-reader can hold before the deadline)
  int max_connections = 4096;                // open client connections; more are answered 503
  int max_per_client = 1024;                 // per client address; more are answered 503
  size_t max_buffered_bytes = size_t(1) << 30;  // request bytes held over all connections; the
                                             // connection that would pass it is answered 503
  int max_handlers = 1024;                   // requests handled at once (worker threads); more wait
  std::vector<std::string> api_keys;         // check_api_key(), from the head, before the body is awaited
};

// Counters for /metrics (monotonic).
struct FrontStats {
  int64_t connections = 0;       // accepted
  int64_t requests = 0;          // handed to a handler
  int64_t reused = 0;            // of those, on a connection that had served one before (keep-alive)
  int64_t cut_slow_readers = 0;  // connections cut by the write deadline
};

// The one API-key rule: nothing required (no keys), or every request but GET /health, the chat
// page (GET or HEAD of a web_assets.h path) and CORS preflights (OPTIONS) needs
// "Authorization: Bearer KEY" or "x-api-key: KEY" (Anthropic clients send that) with one of the
// keys (/metrics and /tokenize included), compared in constant time. target: the request target (a
// query string is ignored). Returns the index of the key that matched (-1 when none was needed);
// throws the 401 ApiError when refused.
int check_api_key(const std::vector<std::string>& keys, const std::string& method, const std::string& target,
                  const std::string& authorization, const std::string& x_api_key = "");

class Front {
 public:
  using Handler = std::function<void(HttpRequest&, HttpResponse&)>;
  // `handler` answers every complete request (on a worker thread; it must not throw).
  Front(FrontOptions opts, Handler handler);
  ~Front();  // stops
  // Binds host:port (0 = any free port) and starts the loop; returns the bound port. Throws mmx::Error.
  int start(const std::string& host, int port);
  void stop();  // closes every connection (their routes' writes fail), then waits for the handlers
  FrontStats stats() const;

 private:
  struct Conn;  // one client connection (front.cpp)
  using ConnPtr = std::shared_ptr<Conn>;
  class Sink;   // a StreamSink over a connection's outbox

  // The loop: wait for events, dispatch each, expire deadlines; at stop, close everything.
  void loop();
  void accept_all();                     // the listening socket is readable
  void on_client(const ConnPtr& c, uint32_t events);
  void on_wake();                        // workers queued output or finished a response
  void expire_deadlines();               // heads, bodies, idle connections, lingering closes, slow readers
  void close_all();

  // The client side (loop thread).
  void read_client(const ConnPtr& c);    // request bytes, a half-close, or a reset
  void flush(const ConnPtr& c);          // pending output; then the end of a response, if it came
  void end_response(const ConnPtr& c, bool keep_alive);
  void progress(const ConnPtr& c);       // the request so far, after new bytes: head, then body
  void read_head(const ConnPtr& c);
  bool read_framing(const ConnPtr& c);   // Expect, Content-Length, Transfer-Encoding
  void read_body(const ConnPtr& c);
  void hand_over(const ConnPtr& c, size_t body_end);  // complete: a worker runs the handler

  // The worker side.
  void serve(const ConnPtr& c, HttpRequest req, bool keep_alive);
  bool push(const ConnPtr& c, const char* data, size_t n);  // into the outbox; false: client gone
  void finish(const ConnPtr& c, bool keep_alive);           // the response is all in the outbox
  void wake(const ConnPtr& c);

  // Bookkeeping.
  void watch(int fd, uint32_t events, bool add);
  void update_interest(const ConnPtr& c);
  void answer(const ConnPtr& c, int status, const std::string& msg, const char* code = "");
  void release(Conn& c, size_t n);       // forget n counted request bytes
  void close_conn(const ConnPtr& c);

  FrontOptions opts_;
  Handler handler_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::unique_ptr<WorkerPool> pool_;
  // Shared with the workers (under ready_mu_): connections with news for the loop.
  std::mutex ready_mu_;
  std::vector<ConnPtr> ready_;
  std::atomic<int64_t> n_accepted_{0}, n_requests_{0}, n_reused_{0}, n_cut_{0};
  // The loop thread's own state.
  std::unordered_map<int, ConnPtr> by_fd_;
  std::map<std::string, int> per_client_;
  int n_conns_ = 0;
  size_t buffered_ = 0;                  // request bytes held over all connections
  std::vector<char> buf_ = std::vector<char>(65536);
};

}  // namespace mmx::server
