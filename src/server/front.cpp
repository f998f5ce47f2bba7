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
#include <cstdint>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "base/error.h"
#include "server/api_error.h"
#include "server/web_assets.h"

namespace mmx::server {

namespace {

using Clock = std::chrono::steady_clock;

// kLinger: our own reply is out and our side shut; the client's remaining upload is read and
// dropped for a moment, so it sees the reply instead of a reset (nginx's lingering close).
enum class Stage { kHead, kBody, kRelay, kReply, kLinger };
constexpr int kLingerMs = 2000;

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first header line named `name` (lower case) in head [0, end), from `from` on: its byte
// span [line, next line) and the colon; line == npos when there is none.
struct HeaderLine {
  size_t line = std::string::npos, colon = 0, next = 0;
};
HeaderLine find_header(const std::string& head, size_t end, const std::string& name) {
  for (size_t pos = head.find("\r\n"); pos != std::string::npos && pos + 2 < end;) {
    const size_t line = pos + 2, eol = head.find("\r\n", line);
    if (eol == std::string::npos || eol > end) break;
    const size_t colon = head.find(':', line);
    if (colon != std::string::npos && colon < eol && lower(head.substr(line, colon - line)) == name)
      return {line, colon, eol + 2};
    pos = eol;
  }
  return {};
}

// The value of header `name` (lower case, first occurrence) into *value; false when absent.
bool header(const std::string& head, size_t end, const std::string& name, std::string* value) {
  const HeaderLine h = find_header(head, end, name);
  if (h.line == std::string::npos) return false;
  size_t b = h.colon + 1, e = h.next - 2;
  while (b < e && (head[b] == ' ' || head[b] == '\t')) ++b;
  while (e > b && (head[e - 1] == ' ' || head[e - 1] == '\t')) --e;
  *value = head.substr(b, e - b);
  return true;
}

// Removes every header line named `name` (lower case) from the head [0, end); returns the new end.
size_t drop_header(std::string& req, size_t end, const std::string& name) {
  for (HeaderLine h; (h = find_header(req, end, name)).line != std::string::npos;) {
    req.erase(h.line, h.next - h.line);
    end -= h.next - h.line;
  }
  return end;
}

// The path of the request line at the front of `req` ("" while that line is incomplete).
std::string request_path(const std::string& req) {
  const size_t eol = req.find("\r\n"), sp = req.find(' ');
  if (eol == std::string::npos || sp == std::string::npos || sp > eol) return "";
  const size_t end = std::min(req.find(' ', sp + 1), eol);
  return req.substr(sp + 1, end - sp - 1);
}

// The method of the request line at the front of `req` ("" before its first space).
std::string request_method(const std::string& req) {
  const size_t eol = req.find("\r\n"), sp = req.find(' ');
  return sp == std::string::npos || sp > eol ? "" : req.substr(0, sp);
}

// Our own answer to the request in `req` (complete or not), in its API's error shape. To a HEAD,
// the same head without the body (RFC 9110 §9.3.2: Content-Length still says what GET would get).
std::string reply(const ApiError& e, const char* reason, const std::string& req) {
  const std::string body = error_body(e, error_shape_for(request_path(req)));
  return "HTTP/1.1 " + std::to_string(e.status) + " " + reason + "\r\nContent-Type: application/json\r\n"
         "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         (request_method(req) == "HEAD" ? std::string() : body);
}

// A chunked body starting at `from`: returns 1 when complete (ends with the last chunk and the
// trailers' blank line), 0 when more is needed, -1 when malformed; *decoded = the data bytes.
int chunked_complete(const std::string& s, size_t from, size_t* decoded) {
  size_t pos = from;
  *decoded = 0;
  for (;;) {
    const size_t eol = s.find("\r\n", pos);
    if (eol == std::string::npos) return eol - pos > 32 ? -1 : 0;
    size_t n = 0, k = pos;
    for (; k < eol && std::isxdigit(static_cast<unsigned char>(s[k])); ++k) {
      if (n > (size_t(1) << 40)) return -1;
      n = n * 16 + size_t(std::isdigit(static_cast<unsigned char>(s[k])) ? s[k] - '0' : std::tolower(s[k]) - 'a' + 10);
    }
    if (k == pos) return -1;
    if (n == 0) {  // the last chunk: trailers, then a blank line
      size_t t = eol + 2;
      for (;;) {
        const size_t te = s.find("\r\n", t);
        if (te == std::string::npos) return 0;
        if (te == t) return 1;
        t = te + 2;
      }
    }
    *decoded += n;
    if (s.size() < eol + 2 + n + 2) return 0;
    if (s.compare(eol + 2 + n, 2, "\r\n") != 0) return -1;
    pos = eol + 2 + n + 2;
  }
}

}  // namespace

void check_api_key(const std::string& key, const std::string& method, const std::string& target,
                   const std::string& authorization, const std::string& x_api_key) {
  if (key.empty()) return;
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/health" || method == "OPTIONS") return;  // probes; CORS preflights carry no key
  if ((method == "GET" || method == "HEAD") && find_web_asset(path)) return;  // the chat page, which asks for the key
  // Constant time in the key's bytes: every byte of the expected value is compared whatever
  // the first mismatch (the length is not secret: it is the same for every request).
  auto differs = [](const std::string& want, const std::string& got) {
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(want[i]) ^ uint8_t(i < got.size() ? got[i] : 0));
    return diff != 0;
  };
  const bool bearer_bad = differs("Bearer " + key, authorization);
  const bool x_api_key_bad = differs(key, x_api_key);  // both compared, whichever was sent
  if (bearer_bad && x_api_key_bad)
    throw ApiError(401, "Incorrect or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')", "",
                   "invalid_api_key");
}

struct Front::Conn {
  int cfd = -1, ufd = -1;
  std::string client_addr;
  Stage stage = Stage::kHead;
  std::string req;           // the request bytes so far (head, then body)
  size_t head_end = 0;       // one past the head's blank line
  int64_t content_length = -1;
  bool chunked = false;
  size_t to_upstream = 0;    // bytes of req already written upstream
  std::string out;           // bytes for the client (relayed response or our own reply)
  size_t out_off = 0;
  bool upstream_eof = false;
  bool client_read_closed = false;
  size_t counted = 0;        // bytes of req counted in the loop's global buffered total
  Clock::time_point deadline;
};

Front::Front(FrontOptions opts, int upstream_port) : opts_(opts), upstream_port_(upstream_port) {}

Front::~Front() { stop(); }

int Front::start(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    fail("cannot resolve the listen address {}", host);
  listen_fd_ = socket(res->ai_family, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = listen_fd_ >= 0 && ::bind(listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                  ::listen(listen_fd_, SOMAXCONN) == 0;
  freeaddrinfo(res);
  if (!ok) fail("cannot listen on {}:{} (address in use or not available)", host, port);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  const int bound = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  set_nonblocking(listen_fd_);
  epoll_fd_ = epoll_create1(0);
  wake_fd_ = eventfd(0, EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { loop(); });
  return bound;
}

void Front::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }
  thread_.join();
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) close(fd);
  listen_fd_ = epoll_fd_ = wake_fd_ = -1;
}

void Front::loop() {
  std::vector<epoll_event> events(256);
  while (!stop_) {
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), 200);
    for (int i = 0; i < n; ++i) dispatch(events[size_t(i)].data.fd, events[size_t(i)].events);
    expire_deadlines();
  }
  close_all();
}

void Front::dispatch(int fd, uint32_t ev) {
  if (fd == wake_fd_) return;
  if (fd == listen_fd_) return accept_all();
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  const ConnPtr c = it->second;
  if (fd == c->cfd) on_client(c, ev);
  else if (fd == c->ufd) on_upstream(c, ev);
}

void Front::accept_all() {
  for (;;) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int cfd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK);
    if (cfd < 0) break;
    auto c = std::make_shared<Conn>();
    c->cfd = cfd;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, host, sizeof host);
    else inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, host, sizeof host);
    c->client_addr = host;
    c->deadline = Clock::now() + std::chrono::milliseconds(opts_.head_timeout_ms);
    ++n_conns_;
    ++per_client_[c->client_addr];
    by_fd_[cfd] = c;
    watch(cfd, EPOLLIN, true);
    if (n_conns_ > opts_.max_connections || per_client_[c->client_addr] > opts_.max_per_client)
      answer(c, 503, "Service Unavailable", "Too many open connections; retry later");
  }
}

void Front::on_client(const ConnPtr& c, uint32_t ev) {
  const bool readable = ev & (EPOLLIN | EPOLLHUP | EPOLLERR);
  if (readable && c->stage == Stage::kLinger) return drain_linger(c);
  if (readable && (c->stage == Stage::kHead || c->stage == Stage::kBody || c->stage == Stage::kRelay) &&
      !read_client(c))
    return;
  if ((ev & EPOLLOUT) && c->out_off < c->out.size() && !write_client(c)) return;
  if (c->out_off == c->out.size() && !after_output(c)) return;
  if (c->cfd >= 0) update_client(c);
  if (c->ufd >= 0) update_upstream(c);
}

void Front::drain_linger(const ConnPtr& c) {
  const ssize_t r = recv(c->cfd, buf_.data(), buf_.size(), 0);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) close_conn(c);
}

bool Front::read_client(const ConnPtr& c) {
  const ssize_t r = recv(c->cfd, buf_.data(), buf_.size(), 0);
  if (r > 0 && c->stage != Stage::kRelay) {
    if (buffered_ + size_t(r) > opts_.max_buffered_bytes) {
      c->req.append(buf_.data(), size_t(r));  // uncounted: only its request line is read (the shape), then dropped
      answer(c, 503, "Service Unavailable", "The server is holding too many request bytes; retry later");
      release(*c);
      return false;
    }
    c->req.append(buf_.data(), size_t(r));
    c->counted += size_t(r);
    buffered_ += size_t(r);
    progress(c);
  } else if (r == 0) {
    if (c->stage != Stage::kRelay) {  // gone before its request was complete
      close_conn(c);
      return false;
    }
    c->client_read_closed = true;  // half-closed: it still reads its answer
    update_client(c);
  } else if (r < 0 && errno != EAGAIN && errno != EINTR) {
    close_conn(c);  // reset: the upstream closes too, which cancels the generation
    return false;
  }
  // bytes sent after a complete request (pipelining) are ignored: one request per connection
  return true;
}

bool Front::write_client(const ConnPtr& c) {
  const ssize_t w = send(c->cfd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
  if (w > 0) c->out_off += size_t(w);
  else if (errno != EAGAIN && errno != EINTR) {
    close_conn(c);
    return false;
  }
  return true;
}

bool Front::after_output(const ConnPtr& c) {
  c->out.clear();
  c->out_off = 0;
  if (c->stage == Stage::kReply) {
    shutdown(c->cfd, SHUT_WR);
    c->stage = Stage::kLinger;
    c->deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
    watch(c->cfd, EPOLLIN, false);
    return false;
  }
  if (c->stage == Stage::kRelay && c->upstream_eof) {
    close_conn(c);
    return false;
  }
  return true;
}

void Front::on_upstream(const ConnPtr& c, uint32_t ev) {
  if ((ev & EPOLLOUT) && c->to_upstream < c->req.size()) {
    const ssize_t w = send(c->ufd, c->req.data() + c->to_upstream, c->req.size() - c->to_upstream, MSG_NOSIGNAL);
    if (w > 0) c->to_upstream += size_t(w);
    else if (errno != EAGAIN && errno != EINTR) c->upstream_eof = true;
    if (c->to_upstream == c->req.size()) {
      release(*c);
      c->to_upstream = 0;
    }
  }
  if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    const ssize_t r = recv(c->ufd, buf_.data(), buf_.size(), 0);
    if (r > 0) c->out.append(buf_.data(), size_t(r));
    else if (r == 0 || (errno != EAGAIN && errno != EINTR)) c->upstream_eof = true;
  }
  if (c->upstream_eof && c->out_off == c->out.size()) return close_conn(c);
  update_upstream(c);
  update_client(c);
}

// Deadlines: a head or body that has not arrived in time; a lingering close that is over.
void Front::expire_deadlines() {
  const auto now = Clock::now();
  std::vector<ConnPtr> late;
  for (const auto& [fd, c] : by_fd_)
    if (fd == c->cfd && (c->stage == Stage::kHead || c->stage == Stage::kBody || c->stage == Stage::kLinger) &&
        now > c->deadline)
      late.push_back(c);
  for (const auto& c : late) {
    if (c->stage == Stage::kLinger) close_conn(c);
    else
      answer(c, 408, "Request Timeout",
             c->stage == Stage::kHead ? "The request head did not arrive in time" : "The request body did not arrive in time");
  }
}

void Front::close_all() {
  std::vector<ConnPtr> all;
  for (const auto& [fd, c] : by_fd_)
    if (fd == c->cfd) all.push_back(c);
  for (const auto& c : all) close_conn(c);
}

// ---- the request as it comes in ----

// Examines the buffered request after new bytes; advances its stage (a failure leaves it kReply,
// an incomplete head kHead, so the body is looked at only once the head was accepted).
void Front::progress(const ConnPtr& c) {
  if (c->stage == Stage::kHead) read_head(c);
  if (c->stage == Stage::kBody) read_body(c);
}

void Front::read_head(const ConnPtr& c) {
  const size_t blank = c->req.find("\r\n\r\n");
  if (blank == std::string::npos) {
    if (c->req.size() > opts_.max_head_bytes)
      answer(c, 431, "Request Header Fields Too Large",
             "Request header fields too large (this server takes at most " + std::to_string(opts_.max_head_bytes) +
                 " bytes of request head)");
    return;
  }
  c->head_end = blank + 4;
  if (c->head_end > opts_.max_head_bytes)
    return answer(c, 431, "Request Header Fields Too Large",
                  "Request header fields too large (this server takes at most " +
                      std::to_string(opts_.max_head_bytes) + " bytes of request head)");
  if (!read_framing(c)) return;
  try {
    const size_t sp = c->req.find(' '), sp2 = c->req.find(' ', sp + 1);
    std::string auth, x_api_key;
    header(c->req, c->head_end, "authorization", &auth);
    header(c->req, c->head_end, "x-api-key", &x_api_key);
    check_api_key(opts_.api_key, sp == std::string::npos ? "" : c->req.substr(0, sp),
                  sp == std::string::npos ? "" : c->req.substr(sp + 1, sp2 - sp - 1), auth, x_api_key);
  } catch (const ApiError& e) {
    c->stage = Stage::kReply;
    c->out = reply(e, "Unauthorized", c->req);
    return watch(c->cfd, EPOLLOUT, false);
  }
  c->stage = Stage::kBody;
  c->deadline = Clock::now() + std::chrono::milliseconds(opts_.body_timeout_ms);
}

bool Front::read_framing(const ConnPtr& c) {
  std::string v;
  if (header(c->req, c->head_end, "expect", &v) && lower(v) == "100-continue") {
    c->head_end = drop_header(c->req, c->head_end, "expect");  // we answer it; the server never sees it
    c->out += "HTTP/1.1 100 Continue\r\n\r\n";
  }
  const bool has_cl = header(c->req, c->head_end, "content-length", &v);
  if (has_cl) {
    char* endp = nullptr;
    c->content_length = int64_t(std::strtoll(v.c_str(), &endp, 10));
    if (v.empty() || *endp != '\0' || c->content_length < 0) {
      answer(c, 400, "Bad Request", "The Content-Length header is not a number");
      return false;
    }
  }
  c->chunked = header(c->req, c->head_end, "transfer-encoding", &v);
  if (c->chunked && has_cl) {
    answer(c, 400, "Bad Request", "The request has both Transfer-Encoding and Content-Length; send one "
                                  "(the two framings disagree behind a proxy: request smuggling)");
    return false;
  }
  if (c->chunked && lower(v) != "chunked") {
    answer(c, 501, "Not Implemented", "Transfer-Encoding '" + v + "' is not supported (only chunked)");
    return false;
  }
  if (!has_cl && !c->chunked) {  // no body (RFC 9112 §6.3); said explicitly, or the server reads to EOF
    c->req.insert(c->head_end - 2, "Content-Length: 0\r\n");
    c->head_end += 19;
  }
  if (c->content_length > int64_t(opts_.max_body_bytes)) {
    answer(c, 413, "Payload Too Large", "The request body is too large");
    return false;
  }
  return true;
}

void Front::read_body(const ConnPtr& c) {
  const size_t have = c->req.size() - c->head_end;
  if (c->chunked) {
    size_t decoded = 0;
    const int st = chunked_complete(c->req, c->head_end, &decoded);
    if (st < 0) return answer(c, 400, "Bad Request", "Malformed chunked request body");
    if (decoded > opts_.max_body_bytes || have > opts_.max_body_bytes + (opts_.max_body_bytes >> 3) + 4096)
      return answer(c, 413, "Payload Too Large", "The request body is too large");
    if (st == 1) hand_over(c);
  } else if (int64_t(have) >= std::max<int64_t>(c->content_length, 0)) {
    c->req.resize(c->head_end + size_t(std::max<int64_t>(c->content_length, 0)));  // no pipelining
    hand_over(c);
  }
}

// The request is complete: open the upstream connection and start relaying.
void Front::hand_over(const ConnPtr& c) {
  const int u = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(upstream_port_));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (u < 0 || connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (u >= 0) close(u);
    return answer(c, 503, "Service Unavailable", "the server is not accepting requests now");
  }
  const int one = 1;
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(u);
  c->ufd = u;
  c->stage = Stage::kRelay;
  by_fd_[u] = c;
  watch(u, EPOLLOUT | EPOLLIN, true);
  update_client(c);
}

// ---- bookkeeping ----

void Front::watch(int fd, uint32_t events, bool add) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

// The client side wants: reading while its request comes in, writing while output is pending.
void Front::update_client(const ConnPtr& c) {
  uint32_t ev = 0;
  if (c->stage == Stage::kHead || c->stage == Stage::kBody) ev |= EPOLLIN;
  if (c->out_off < c->out.size()) ev |= EPOLLOUT;
  if (c->stage == Stage::kRelay && !c->client_read_closed) ev |= EPOLLIN;  // to notice a reset
  watch(c->cfd, ev, false);
}

void Front::update_upstream(const ConnPtr& c) {
  uint32_t ev = 0;
  if (c->to_upstream < c->req.size()) ev |= EPOLLOUT;
  if (!c->upstream_eof && c->out.size() - c->out_off < (size_t(1) << 20)) ev |= EPOLLIN;  // backpressure
  watch(c->ufd, ev, false);
}

// Our own answer (an error before the request reached the server): send it, then close.
void Front::answer(const ConnPtr& c, int status, const char* reason, const std::string& msg, const char* code) {
  c->stage = Stage::kReply;
  c->out = reply(ApiError(status, msg, "", code), reason, c->req);  // (replaces a pending 100 Continue)
  c->out_off = 0;
  watch(c->cfd, EPOLLOUT, false);
}

void Front::release(Conn& c) {
  buffered_ -= c.counted;
  c.counted = 0;
  std::string().swap(c.req);
}

void Front::close_conn(const ConnPtr& c) {
  release(*c);
  for (int* fd : {&c->cfd, &c->ufd})
    if (*fd >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, *fd, nullptr);
      by_fd_.erase(*fd);
      close(*fd);
      *fd = -1;
    }
  if (--per_client_[c->client_addr] <= 0) per_client_.erase(c->client_addr);
  --n_conns_;
}

}  // namespace mmx::server
