// Raw HTTP for the server tests that need bytes no client library would send (hostile_test.cpp,
// anthropic_errors_test.cpp): one exchange on a fresh loopback connection, the status of a reply,
// a gzip body. Link ZLIB::ZLIB to use gzip().
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "server_fixture.h"
#include "server/http_wire.h"

namespace mmx::server {

// Where the first HTTP response in `s` ends (Content-Length or chunked framing; none: the end of
// the head; an answer to HEAD: the head alone), or npos while it is incomplete.
inline size_t response_end(const std::string& s, bool head_only = false) {
  size_t head_end = s.find("\r\n\r\n");
  if (head_end == std::string::npos) return std::string::npos;
  head_end += 4;
  const std::string head = s.substr(0, head_end);
  if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
    size_t end = 0, decoded = 0;
    return chunked_extent(s, head_end, &end, &decoded) == 1 ? end : std::string::npos;
  }
  if (head_only) return head_end;
  const size_t at = head.find("Content-Length: ");
  const size_t n = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
  return s.size() >= head_end + n ? head_end + n : std::string::npos;
}

// Sends `bytes` (stopping early if the server closes), then reads until the server closes,
// `timeout_ms` passes, or — a kept-alive connection — 300 ms after the last complete response
// with nothing more (so a response the server should not have sent is still seen). Returns what
// came back ("" for nothing).
inline std::string raw_exchange(int port, const std::string& bytes, int timeout_ms = 5000) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (size_t off = 0; off < bytes.size();) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) break;  // the server answered (or closed) before taking everything
    const ssize_t n = send(fd, bytes.data() + off, std::min<size_t>(bytes.size() - off, 8192), MSG_NOSIGNAL);
    if (n <= 0) break;
    off += size_t(n);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto quiet_since = t0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(timeout_ms)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) {
      bool complete = false;  // every response so far is whole
      for (size_t at = 0, end; at < out.size() && (end = response_end(out.substr(at), bytes.rfind("HEAD ", 0) == 0)) != std::string::npos;) {
        at += end;
        complete = at == out.size();
      }
      if (complete && std::chrono::steady_clock::now() - quiet_since > std::chrono::milliseconds(300)) break;
      continue;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
    quiet_since = std::chrono::steady_clock::now();
  }
  close(fd);
  return out;
}

inline int status_of(const std::string& reply) {
  return reply.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(reply.c_str() + 9) : -1;
}

inline std::string gzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);  // +16: gzip wrapper
  std::string out(deflateBound(&z, uLong(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace mmx::server
