#include "server/front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "server/api_error.h"
#include "server/http_wire.h"
#include "server/web_assets.h"

namespace mmx::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// kBusy: a worker runs the handler and fills the outbox. kReply: our own answer (an error before
// the request was complete) goes out, then the connection closes. kLinger: our side is shut; the
// client's remaining upload is read and dropped for a moment, so it sees the reply instead of a
// reset (nginx's lingering close).
enum class Stage { kHead, kBody, kBusy, kReply, kLinger };
constexpr int kLingerMs = 2000;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The method and path of a request line at the front of `bytes`, as far as it has come ("" before).
std::string line_part(const std::string& bytes, int which) {
  const size_t eol = std::min(bytes.find("\r\n"), bytes.size()), sp = bytes.find(' ');
  if (sp == std::string::npos || sp > eol) return "";
  if (which == 0) return bytes.substr(0, sp);
  const size_t end = std::min(bytes.find(' ', sp + 1), eol);
  const std::string target = bytes.substr(sp + 1, end - sp - 1);
  return target.substr(0, target.find('?'));
}

}  // namespace

int check_api_key(const std::vector<std::string>& keys, const std::string& method, const std::string& target,
                  const std::string& authorization, const std::string& x_api_key) {
  if (keys.empty()) return -1;
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/health" || method == "OPTIONS") return -1;  // probes; CORS preflights carry no key
  if ((method == "GET" || method == "HEAD") && find_web_asset(path)) return -1;  // the chat page, which asks for the key
  // Constant time in the keys' bytes: every byte of every key is compared whatever the first
  // mismatch (their lengths are not secret: the same for every request).
  auto differs = [](const std::string& want, const std::string& got) {
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(want[i]) ^ uint8_t(i < got.size() ? got[i] : 0));
    return diff != 0;
  };
  int match = -1;
  for (size_t k = 0; k < keys.size(); ++k) {
    const bool bearer_bad = differs("Bearer " + keys[k], authorization);
    const bool x_api_key_bad = differs(keys[k], x_api_key);  // both compared, whichever was sent
    if (!(bearer_bad && x_api_key_bad) && match < 0) match = int(k);
  }
  if (match < 0)
    throw ApiError(401, "Incorrect or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')", "",
                   "invalid_api_key");
  return match;
}

struct Front::Conn {
  // The loop thread's:
  int fd = -1;
  std::string addr;
  Stage stage = Stage::kHead;
  std::string in;            // bytes read and not yet handed over: the request so far, then what follows it
  size_t head_end = 0;       // one past the head's blank line
  HttpRequest head;          // the parsed head of the request being read
  int64_t content_length = 0;
  bool chunked = false;
  size_t counted = 0;        // bytes of `in` counted in the loop's buffered total
  int n_served = 0;          // requests handed to a handler on this connection
  bool read_closed = false;  // the client half-closed: answer it, then close
  Clock::time_point deadline;
  // Shared with the worker answering it (under mu):
  std::mutex mu;
  std::condition_variable cv;  // the outbox drained below its bound, or the connection is gone
  std::string out;           // the outbox: response bytes not yet sent
  size_t out_off = 0;
  Clock::time_point last_progress;  // the last time the client took a byte (or output became pending)
  bool gone = false;         // closed: the worker's writes fail
  bool done = false, done_keep = false;  // the response is all in the outbox; keep the connection
};

// A route's stream, written as chunks into the connection's outbox.
class Front::Sink : public StreamSink {
 public:
  Sink(Front& f, ConnPtr c) : f_(f), c_(std::move(c)) {}
  bool write(const char* data, size_t n) override {
    if (n == 0) return !failed_;  // a zero-size chunk would end the stream
    const std::string ch = chunk(data, n);
    failed_ = failed_ || !f_.push(c_, ch.data(), ch.size());
    return !failed_;
  }
  void done() override {
    if (ended_) return;
    ended_ = true;
    failed_ = failed_ || !f_.push(c_, kLastChunk.data(), kLastChunk.size());
  }
  bool ended() const { return ended_; }
  bool failed() const { return failed_; }

 private:
  Front& f_;
  ConnPtr c_;
  bool ended_ = false, failed_ = false;
};

Front::Front(FrontOptions opts, Handler handler) : opts_(std::move(opts)), handler_(std::move(handler)) {}

Front::~Front() { stop(); }

FrontStats Front::stats() const {
  return {n_accepted_.load(), n_requests_.load(), n_reused_.load(), n_cut_.load()};
}

int Front::start(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    fail("cannot resolve the listen address {}", host);
  listen_fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = listen_fd_ >= 0 && ::bind(listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                  ::listen(listen_fd_, SOMAXCONN) == 0;
  freeaddrinfo(res);
  if (!ok) {
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    fail("cannot listen on {}:{} (address in use or not available)", host, port);
  }
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  const int bound = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  watch(listen_fd_, EPOLLIN, true);
  watch(wake_fd_, EPOLLIN, true);
  pool_ = std::make_unique<WorkerPool>(opts_.max_handlers);
  thread_ = std::thread([this] { loop(); });
  return bound;
}

void Front::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }
  thread_.join();  // every connection is closed: the handlers' writes fail from here on
  pool_.reset();   // waits for them (they may still wake(): the eventfd stays open until now)
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) close(fd);
  listen_fd_ = epoll_fd_ = wake_fd_ = -1;
  ready_.clear();
}

void Front::loop() {
  std::vector<epoll_event> events(256);
  while (!stop_) {
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), 200);
    for (int i = 0; i < n; ++i) {
      const int fd = events[size_t(i)].data.fd;
      if (fd == wake_fd_) on_wake();
      else if (fd == listen_fd_) accept_all();
      else if (auto it = by_fd_.find(fd); it != by_fd_.end()) on_client(ConnPtr(it->second), events[size_t(i)].events);
    }
    expire_deadlines();
  }
  close_all();
}

void Front::accept_all() {
  for (;;) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE events go out as they come
    if (opts_.send_buffer_bytes > 0)
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts_.send_buffer_bytes, sizeof opts_.send_buffer_bytes);
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, host, sizeof host);
    else inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, host, sizeof host);
    c->addr = host;
    c->deadline = Clock::now() + milliseconds(opts_.head_timeout_ms);
    ++n_conns_;
    ++n_accepted_;
    ++per_client_[c->addr];
    by_fd_[fd] = c;
    watch(fd, EPOLLIN, true);
    if (n_conns_ > opts_.max_connections || per_client_[c->addr] > opts_.max_per_client)
      answer(c, 503, "Too many open connections; retry later");
  }
}

void Front::on_client(const ConnPtr& c, uint32_t ev) {
  if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (c->stage == Stage::kLinger) {
      const ssize_t r = recv(c->fd, buf_.data(), buf_.size(), 0);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) close_conn(c);
      return;
    }
    if (c->stage != Stage::kReply) read_client(c);
  }
  if (c->fd >= 0 && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))) flush(c);
  if (c->fd >= 0) update_interest(c);
}

void Front::on_wake() {
  uint64_t n = 0;
  if (read(wake_fd_, &n, sizeof n) < 0) {
  }
  std::vector<ConnPtr> ready;
  {
    std::lock_guard<std::mutex> l(ready_mu_);
    ready.swap(ready_);
  }
  for (const ConnPtr& c : ready)
    if (c->fd >= 0) {
      flush(c);
      if (c->fd >= 0) update_interest(c);
    }
}

void Front::read_client(const ConnPtr& c) {
  const ssize_t r = recv(c->fd, buf_.data(), buf_.size(), 0);
  if (r > 0) {
    if (buffered_ + size_t(r) > opts_.max_buffered_bytes) {
      if (c->stage == Stage::kBusy) return close_conn(c);  // its answer is under way: no room to reply
      c->in.append(buf_.data(), size_t(r));  // uncounted: only its request line is read (the shape), then dropped
      return answer(c, 503, "The server is holding too many request bytes; retry later");
    }
    if (c->in.empty() && c->stage == Stage::kHead && c->n_served > 0)
      c->deadline = Clock::now() + milliseconds(opts_.head_timeout_ms);  // the next request's head begins
    c->in.append(buf_.data(), size_t(r));
    c->counted += size_t(r);
    buffered_ += size_t(r);
    if (c->stage == Stage::kHead || c->stage == Stage::kBody) progress(c);
  } else if (r == 0) {
    if (c->stage != Stage::kBusy) return close_conn(c);  // gone between or before its requests
    c->read_closed = true;  // half-closed: it still reads its answer
  } else if (errno != EAGAIN && errno != EINTR) {
    close_conn(c);  // reset: its handler's next write fails, which cancels the generation
  }
}

// Writes what the client takes; at the end of a response, keeps the connection or closes it.
void Front::flush(const ConnPtr& c) {
  bool broken = false, drained = false, end = false, keep = false;
  {
    std::lock_guard<std::mutex> l(c->mu);
    if (c->out_off < c->out.size()) {
      const ssize_t w = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
      if (w > 0) {
        c->out_off += size_t(w);
        c->last_progress = Clock::now();
        c->cv.notify_all();
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        broken = true;
      }
    }
    drained = c->out_off == c->out.size();
    if (drained && !c->out.empty()) {
      if (c->out.capacity() > (size_t(256) << 10)) std::string().swap(c->out);  // a large answer's memory returns
      else c->out.clear();
      c->out_off = 0;
    }
    if (drained && c->done) {
      end = true;
      keep = c->done_keep;
      c->done = false;
    }
  }
  if (broken) return close_conn(c);
  if (end) return end_response(c, keep);
  if (drained && c->stage == Stage::kReply) {  // our own answer is out: linger, then close
    shutdown(c->fd, SHUT_WR);
    c->stage = Stage::kLinger;
    c->deadline = Clock::now() + milliseconds(kLingerMs);
  }
}

void Front::end_response(const ConnPtr& c, bool keep_alive) {
  if (!keep_alive || c->read_closed || stop_) {
    if (c->read_closed) return close_conn(c);
    shutdown(c->fd, SHUT_WR);
    c->stage = Stage::kLinger;
    c->deadline = Clock::now() + milliseconds(kLingerMs);
    return;
  }
  c->stage = Stage::kHead;
  c->deadline = Clock::now() + milliseconds(c->in.empty() ? opts_.keep_alive_ms : opts_.head_timeout_ms);
  if (!c->in.empty()) progress(c);  // a pipelined request
}

// Deadlines: a head or body that has not arrived in time; an idle kept-alive connection; a
// lingering close that is over; a client that has taken no byte of its pending output in time.
void Front::expire_deadlines() {
  const auto now = Clock::now();
  std::vector<ConnPtr> late;
  for (const auto& [fd, c] : by_fd_) {
    if (c->stage == Stage::kBusy || c->stage == Stage::kReply) {
      std::lock_guard<std::mutex> l(c->mu);
      if (c->out_off < c->out.size() && now - c->last_progress > milliseconds(opts_.write_timeout_ms))
        late.push_back(c);
    } else if (now > c->deadline) {
      late.push_back(c);
    }
  }
  for (const auto& c : late) {
    if (c->stage == Stage::kBusy || c->stage == Stage::kReply) {
      ++n_cut_;
      close_conn(c);  // a slow reader: its handler's writes fail, its generation is cancelled
    } else if (c->stage == Stage::kLinger || (c->stage == Stage::kHead && c->in.empty() && c->n_served > 0)) {
      close_conn(c);  // over, or idle between requests
    } else {
      answer(c, 408, c->stage == Stage::kHead ? "The request head did not arrive in time"
                                              : "The request body did not arrive in time");
    }
  }
}

void Front::close_all() {
  std::vector<ConnPtr> all;
  for (const auto& [fd, c] : by_fd_) all.push_back(c);
  for (const auto& c : all) close_conn(c);
}

// ---- the request as it comes in ----

void Front::progress(const ConnPtr& c) {
  if (c->stage == Stage::kHead) read_head(c);
  if (c->stage == Stage::kBody) read_body(c);
}

void Front::read_head(const ConnPtr& c) {
  const size_t blank = c->in.find("\r\n\r\n");
  const std::string too_large = "Request header fields too large (this server takes at most " +
                                std::to_string(opts_.max_head_bytes) + " bytes of request head)";
  if (blank == std::string::npos) {
    if (c->in.size() > opts_.max_head_bytes) answer(c, 431, too_large);
    return;
  }
  c->head_end = blank + 4;
  if (c->head_end > opts_.max_head_bytes) return answer(c, 431, too_large);
  WireError err;
  if (!parse_head(std::string_view(c->in).substr(0, c->head_end), {opts_.max_headers, opts_.max_header_bytes},
                  &c->head, &err))
    return answer(c, err.status, err.message);
  if (!read_framing(c)) return;
  try {
    const int key = check_api_key(opts_.api_keys, c->head.method, c->head.target, c->head.header("authorization"),
                                  c->head.header("x-api-key"));
    // Fair admission counts sequences per client: by key when there are several, else by address.
    c->head.client = key >= 0 && opts_.api_keys.size() > 1 ? "key:" + std::to_string(key) : "addr:" + c->addr;
  } catch (const ApiError& e) {
    return answer(c, e.status, e.what(), e.code.c_str());
  }
  c->stage = Stage::kBody;
  c->deadline = Clock::now() + milliseconds(opts_.body_timeout_ms);
}

bool Front::read_framing(const ConnPtr& c) {
  const HttpHeaders& h = c->head.headers;
  if (lower(c->head.header("expect")) == "100-continue") {
    std::lock_guard<std::mutex> l(c->mu);
    c->out += "HTTP/1.1 100 Continue\r\n\r\n";
    c->last_progress = Clock::now();
  }
  c->content_length = 0;
  c->chunked = false;
  bool has_cl = false;
  for (const auto& [k, v] : h) {
    if (lower(k) == "content-length") {
      char* endp = nullptr;
      const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      const int64_t n = digits && v.size() <= 18 ? int64_t(std::strtoll(v.c_str(), &endp, 10)) : -1;
      if (n < 0 || (has_cl && n != c->content_length)) {
        answer(c, 400, "The Content-Length header is not a number (or two disagree)");
        return false;
      }
      has_cl = true;
      c->content_length = n;
    } else if (lower(k) == "transfer-encoding") {
      if (lower(v) != "chunked" || c->chunked) {
        answer(c, 501, "Transfer-Encoding '" + v + "' is not supported (only chunked, once)");
        return false;
      }
      c->chunked = true;
    }
  }
  if (c->chunked && has_cl) {
    answer(c, 400, "The request has both Transfer-Encoding and Content-Length; send one "
                   "(the two framings disagree behind a proxy: request smuggling)");
    return false;
  }
  if (c->content_length > int64_t(opts_.max_body_bytes)) {
    answer(c, 413, "The request body is too large");
    return false;
  }
  return true;  // neither: no body (RFC 9112 §6.3)
}

void Front::read_body(const ConnPtr& c) {
  const size_t have = c->in.size() - c->head_end;
  if (c->chunked) {
    size_t end = 0, decoded = 0;
    const int st = chunked_extent(c->in, c->head_end, &end, &decoded);
    if (st < 0) return answer(c, 400, "Malformed chunked request body");
    if (decoded > opts_.max_body_bytes || have > opts_.max_body_bytes + (opts_.max_body_bytes >> 3) + 4096)
      return answer(c, 413, "The request body is too large");
    if (st == 1) hand_over(c, end);
  } else if (int64_t(have) >= c->content_length) {
    hand_over(c, c->head_end + size_t(c->content_length));
  }
}

// The request is complete: a worker answers it; bytes after it stay for the next request.
void Front::hand_over(const ConnPtr& c, size_t body_end) {
  HttpRequest req = std::move(c->head);
  c->head = HttpRequest();
  const std::string_view raw = std::string_view(c->in).substr(c->head_end, body_end - c->head_end);
  req.body = c->chunked ? dechunk(raw) : std::string(raw);
  c->in.erase(0, body_end);
  release(*c, body_end);
  if (c->in.empty()) std::string().swap(c->in);
  const std::string conn = lower(req.header("connection"));
  const bool wants = req.minor_version >= 1 ? conn.find("close") == std::string::npos
                                            : conn.find("keep-alive") != std::string::npos;
  const bool keep = wants && !c->read_closed && c->n_served + 1 < opts_.max_requests_per_connection;
  if (c->n_served++ > 0) ++n_reused_;
  ++n_requests_;
  c->stage = Stage::kBusy;
  pool_->submit([this, c, r = std::make_shared<HttpRequest>(std::move(req)), keep] { serve(c, std::move(*r), keep); });
}

// ---- the worker side ----

void Front::serve(const ConnPtr& c, HttpRequest req, bool keep) {
  HttpResponse res;
  try {
    req.body = decode_content(std::move(req.body), req.header("content-encoding"), opts_.max_body_bytes);
    handler_(req, res);
  } catch (const ApiError& e) {
    res = HttpResponse();
    res.status = e.status;
    res.set_content(error_body(e, error_shape_for(req.path)), "application/json");
  } catch (const std::exception&) {
    res = HttpResponse();
    res.status = 500;
    res.set_content(error_body(ApiError(500, "internal server error"), error_shape_for(req.path)), "application/json");
  }
  const bool head_only = req.method == "HEAD";
  if (!res.stream) {
    const std::string h = response_head(res, keep, false, res.body.size(), opts_.keep_alive_ms / 1000);
    const bool ok = push(c, h.data(), h.size()) && (head_only || push(c, res.body.data(), res.body.size()));
    return finish(c, keep && ok);
  }
  Sink sink(*this, c);
  const std::string h = response_head(res, keep, true, 0, opts_.keep_alive_ms / 1000);
  bool ok = push(c, h.data(), h.size());
  while (ok && !sink.ended()) ok = res.stream(sink) && !sink.failed();
  if (res.on_end) res.on_end(ok && sink.ended());
  finish(c, keep && ok && sink.ended());
}

bool Front::push(const ConnPtr& c, const char* data, size_t n) {
  {
    std::unique_lock<std::mutex> l(c->mu);
    c->cv.wait(l, [&] { return c->gone || c->out.size() - c->out_off < opts_.max_out_bytes; });
    if (c->gone) return false;
    if (c->out_off == c->out.size()) c->last_progress = Clock::now();  // the write deadline starts now
    c->out.append(data, n);
  }
  wake(c);
  return true;
}

void Front::finish(const ConnPtr& c, bool keep_alive) {
  {
    std::lock_guard<std::mutex> l(c->mu);
    c->done = true;
    c->done_keep = keep_alive;
  }
  wake(c);
}

void Front::wake(const ConnPtr& c) {
  {
    std::lock_guard<std::mutex> l(ready_mu_);
    ready_.push_back(c);
  }
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }
}

// ---- bookkeeping ----

void Front::watch(int fd, uint32_t events, bool add) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

// Reading while a request comes in (and, while it is answered, to notice a reset — up to one
// head's worth of pipelined bytes); writing while output is pending.
void Front::update_interest(const ConnPtr& c) {
  uint32_t ev = 0;
  switch (c->stage) {
    case Stage::kHead:
    case Stage::kBody:
    case Stage::kLinger: ev = EPOLLIN; break;
    case Stage::kBusy:
      if (!c->read_closed && c->in.size() < opts_.max_head_bytes) ev = EPOLLIN;
      break;
    case Stage::kReply: break;
  }
  {
    std::lock_guard<std::mutex> l(c->mu);
    if (c->out_off < c->out.size()) ev |= EPOLLOUT;
  }
  watch(c->fd, ev, false);
}

// Our own answer to a request that never reaches a handler: its API's error shape, then close.
// To a HEAD, the same head without the body (RFC 9110 §9.3.2).
void Front::answer(const ConnPtr& c, int status, const std::string& msg, const char* code) {
  c->stage = Stage::kReply;
  const std::string path = c->head.method.empty() ? line_part(c->in, 1) : c->head.path;
  const std::string method = c->head.method.empty() ? line_part(c->in, 0) : c->head.method;
  const std::string body = error_body(ApiError(status, msg, "", code), error_shape_for(path));
  HttpResponse res;
  res.status = status;
  res.content_type = "application/json";
  std::string reply = response_head(res, false, false, body.size());
  if (method != "HEAD") reply += body;
  {
    std::lock_guard<std::mutex> l(c->mu);
    c->out = std::move(reply);  // (replaces a pending 100 Continue)
    c->out_off = 0;
    c->last_progress = Clock::now();
  }
  release(*c, c->counted);
  update_interest(c);
}

void Front::release(Conn& c, size_t n) {
  n = std::min(n, c.counted);
  buffered_ -= n;
  c.counted -= n;
}

void Front::close_conn(const ConnPtr& c) {
  if (c->fd < 0) return;
  {
    std::lock_guard<std::mutex> l(c->mu);
    c->gone = true;
  }
  c->cv.notify_all();
  release(*c, c->counted);
  std::string().swap(c->in);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  by_fd_.erase(c->fd);
  close(c->fd);
  c->fd = -1;
  if (--per_client_[c->addr] <= 0) per_client_.erase(c->addr);
  --n_conns_;
}

}  // namespace mmx::server
