// The one HTTP stack (hostile-clients issue, round 2): the front reads, routes and answers in
// process. Keep-alive with limits, pipelining, one listening socket, a client that stops reading
// cut by the write deadline (its generation cancelled), and the wire functions (http_wire.h)
// against hand-made bytes.
#include <dirent.h>
#include <poll.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "raw_http.h"
#include "server/api_error.h"
#include "server/http_wire.h"

namespace mmx::server {
namespace {

using Clock = std::chrono::steady_clock;

// Reads one HTTP response off fd (Content-Length or chunked framing); "" on EOF or timeout.
std::string read_response(int fd, std::string& carry, int timeout_ms = 5000) {
  const auto t0 = Clock::now();
  auto more = [&]() {
    char buf[4096];
    while (Clock::now() - t0 < std::chrono::milliseconds(timeout_ms)) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      carry.append(buf, size_t(n));
      return true;
    }
    return false;
  };
  size_t head_end;
  while ((head_end = carry.find("\r\n\r\n")) == std::string::npos)
    if (!more()) return "";
  head_end += 4;
  const std::string head = carry.substr(0, head_end);
  size_t end = 0;
  if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
    size_t decoded = 0;
    int st;
    while ((st = chunked_extent(carry, head_end, &end, &decoded)) == 0)
      if (!more()) return "";
    if (st < 0) return "";
  } else {
    const size_t cl_at = head.find("Content-Length: ");
    const size_t cl = cl_at == std::string::npos ? 0 : std::stoul(head.substr(cl_at + 16));
    while (carry.size() < head_end + cl)
      if (!more()) return "";
    end = head_end + cl;
  }
  std::string r = carry.substr(0, end);
  carry.erase(0, end);
  return r;
}

bool send_all(int fd, const std::string& s) { return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }

std::string post_req(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// One counter of GET /metrics.
double metric(int port, const std::string& name) {
  const std::string m = raw_exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::istringstream in(m.substr(m.find("\r\n\r\n") + 4));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  ADD_FAILURE() << name << " not in /metrics";
  return -1;
}

// The listening TCP sockets this process holds: ports, from /proc/net/tcp{,6} matched by inode.
std::set<int> listening_ports() {
  std::set<std::string> inodes;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (const dirent* e = readdir(d)) {
      char target[256] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? size_t(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    closedir(d);
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, q, tr, rt, uid, to, inode;
      in >> sl >> local >> remote >> st >> q >> tr >> rt >> uid >> to >> inode;
      if (st == "0A" && inodes.count(inode)) ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

class FrontTest : public ServerTest {};

TEST_F(FrontTest, OnlyThePublicPortListens) {
  const std::set<int> before = listening_ports();
  start();
  std::set<int> now = listening_ports();
  for (int p : before) now.erase(p);
  EXPECT_EQ(now, std::set<int>{port}) << "one HTTP stack: no internal port";
}

// Several requests on one connection, one after another and pipelined, answered in order; the
// connection counter says one connection carried them.
TEST_F(FrontTest, KeepAliveAndPipelining) {
  start();
  const double conns0 = metric(port, "mmx_http_connections_total");
  const int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  std::string carry;
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string r = read_response(fd, carry);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Connection: keep-alive"), std::string::npos) << r;
  ASSERT_TRUE(send_all(fd, post_req("/v1/chat/completions", chat_body().dump())));
  r = read_response(fd, carry);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Hello there, friend!"), std::string::npos) << r;
  ASSERT_TRUE(send_all(fd, post_req("/v1/chat/completions", chat_body({{"stream", true}}).dump())));
  r = read_response(fd, carry);
  EXPECT_NE(r.find("[DONE]"), std::string::npos) << r;
  // Three pipelined in one write: a 404, a bad JSON 400 and a /health, in that order.
  ASSERT_TRUE(send_all(fd, std::string("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n") + post_req("/v1/chat/completions", "{bad") +
                               "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(status_of(read_response(fd, carry)), 404);
  EXPECT_EQ(status_of(read_response(fd, carry)), 400);
  r = read_response(fd, carry);
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.find("Connection: close"), std::string::npos);
  char b;
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 3000), 1);
  EXPECT_EQ(recv(fd, &b, 1, 0), 0) << "closed after the request that asked for it";
  close(fd);
  EXPECT_EQ(metric(port, "mmx_http_connections_total") - conns0, 2) << "six requests, one connection (+ this probe)";
  EXPECT_GE(metric(port, "mmx_http_keep_alive_requests_total"), 5);
}

TEST_F(FrontTest, KeepAliveLimits) {
  opts.front.keep_alive_ms = 300;
  opts.front.max_requests_per_connection = 2;
  start();
  // HTTP/1.0 without keep-alive, and "Connection: close": closed after the answer.
  for (const std::string req : {"GET /health HTTP/1.0\r\n\r\n", "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"}) {
    const std::string r = raw_exchange(port, req, 3000);
    EXPECT_EQ(status_of(r), 200);
    EXPECT_NE(r.find("Connection: close"), std::string::npos);
  }
  // The second request on a connection is its last (max 2).
  int fd = connect_loopback(port);
  std::string carry;
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n"));
  EXPECT_NE(read_response(fd, carry).find("keep-alive"), std::string::npos);
  EXPECT_NE(read_response(fd, carry).find("Connection: close"), std::string::npos);
  close(fd);
  // An idle connection is closed after keep_alive_ms, silently (no 408: it sent nothing).
  fd = connect_loopback(port);
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(status_of(read_response(fd, carry)), 200);
  const auto t0 = Clock::now();
  char buf[64];
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_EQ(recv(fd, buf, sizeof buf, 0), 0);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
  close(fd);
}

// A streaming client that never reads: once its outbox is full and nothing has been taken for
// write_timeout_ms, it is cut, its generation cancelled; everyone else is served meanwhile.
TEST_F(FrontTest, ClientThatStopsReadingIsCut) {
  opts.front.write_timeout_ms = 500;
  opts.front.max_out_bytes = 4096;
  opts.front.send_buffer_bytes = 16384;  // the kernel would otherwise hold MiBs for it first
  std::vector<int32_t> longer;
  for (int i = 0; i < 4000; ++i) longer.push_back(TinyAssets::get().tok->encode(" la", false)[0]);
  engine.script = longer;
  engine.token_delay_ms = 2;  // still generating when it is cut (a finished one has nothing to cancel)
  start();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);  // before connect: a small window
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_TRUE(send_all(fd, post_req("/v1/chat/completions", chat_body({{"stream", true}, {"max_tokens", 4000}}).dump())));
  const auto t0 = Clock::now();
  while (engine.n_cancelled() == 0 && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  char peek[200] = {};
  recv(fd, peek, sizeof peek - 1, MSG_DONTWAIT);
  EXPECT_EQ(engine.n_cancelled(), 1) << "the generation of a client that does not read is cancelled; it got: " << peek;
  EXPECT_EQ(engine.n_in_flight(), 0);
  EXPECT_EQ(metric(port, "mmx_http_slow_readers_cut_total"), 1);
  close(fd);
}

TEST(HttpWire, ParseHead) {
  HttpRequest r;
  WireError e;
  ASSERT_TRUE(parse_head("POST /v1/models/a%2Fb?x=1 HTTP/1.1\r\nHost: h\r\nX-Y:  v w \r\n\r\n", {}, &r, &e));
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/models/a%2Fb?x=1");
  EXPECT_EQ(r.path, "/v1/models/a/b");
  EXPECT_EQ(r.minor_version, 1);
  EXPECT_EQ(r.header("x-y"), "v w");
  EXPECT_EQ(r.header("HOST"), "h");
  EXPECT_TRUE(parse_head("GET / HTTP/1.0\r\n\r\n", {}, &r, &e));
  EXPECT_EQ(r.minor_version, 0);
  const std::pair<const char*, int> bad[] = {
      {"GET  / HTTP/1.1\r\n\r\n", 400},          {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.1 x\r\n\r\n", 400},         {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n folded\r\n\r\n", 400}, {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad name: v\r\n\r\n", 400}, {"GET /\x01 HTTP/1.1\r\n\r\n", 400}};
  for (const auto& [head, status] : bad) {
    EXPECT_FALSE(parse_head(head, {}, &r, &e)) << head;
    EXPECT_EQ(e.status, status) << head;
  }
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_FALSE(parse_head(many + "\r\n", {}, &r, &e));
  EXPECT_EQ(e.status, 431);
  EXPECT_NE(e.message.find("101 fields"), std::string::npos) << e.message;
  EXPECT_FALSE(parse_head("GET / HTTP/1.1\r\nBig: " + std::string(40000, 'v') + "\r\n\r\n", {}, &r, &e));
  EXPECT_EQ(e.status, 431);
}

TEST(HttpWire, Chunked) {
  const std::string body = "4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  size_t end = 0, decoded = 0;
  ASSERT_EQ(chunked_extent(body, 0, &end, &decoded), 1);
  EXPECT_EQ(body.substr(end), "NEXT");
  EXPECT_EQ(decoded, 9u);
  EXPECT_EQ(dechunk(std::string_view(body).substr(0, end)), "Wikipedia");
  for (size_t cut = 0; cut < end; ++cut)  // every prefix: more needed, never complete, never malformed
    EXPECT_EQ(chunked_extent(body.substr(0, cut), 0, &end, &decoded), 0) << cut;
  EXPECT_EQ(chunked_extent("zz\r\n", 0, &end, &decoded), -1);
  EXPECT_EQ(chunked_extent("4\r\nWikiXX", 0, &end, &decoded), -1);
  EXPECT_EQ(chunked_extent("4x\r\nWiki\r\n", 0, &end, &decoded), -1);
}

TEST(HttpWire, DecodeContent) {
  const std::string text(100000, 'a');
  EXPECT_EQ(decode_content(gzip(text), "gzip", 1 << 20), text);
  EXPECT_EQ(decode_content(text, "", 1 << 20), text);
  auto status = [](auto f) {
    try {
      f();
    } catch (const ApiError& e) {
      return e.status;
    }
    return 0;
  };
  EXPECT_EQ(status([&] { decode_content(gzip(text), "gzip", 99999); }), 413);
  EXPECT_EQ(status([&] { decode_content(text, "identity", 99999); }), 413);
  EXPECT_EQ(status([&] { decode_content(gzip(text).substr(0, 50), "gzip", 1 << 20); }), 400);
  EXPECT_EQ(status([&] { decode_content("not gzip at all", "gzip", 1 << 20); }), 400);
  EXPECT_EQ(status([&] { decode_content(text, "br", 1 << 20); }), 415);
}

}  // namespace
}  // namespace mmx::server
