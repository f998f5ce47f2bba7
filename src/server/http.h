// One HTTP request and its response as the routes see them: what the front (front.h) read off the
// wire, already framed, limited and decoded; and what a route answers — a whole body, or a stream
// (SSE) written piece by piece through a StreamSink that the front backs with a bounded outbox.
//
// Our own types rather than a library's: the front is the only HTTP parser in the process (the
// hostile-clients issue, round 2: a second parser behind it was a side door), so nothing else
// needs one; the routes keep the same small surface they had (status, headers, set_content,
// set_chunked_content_provider).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmx::server {

// Header fields, names as received; lookups ignore case (RFC 9110 §5.1).
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The first value of header `name` (any case), or "" when absent.
std::string header_value(const HttpHeaders& h, std::string_view name);
bool has_header(const HttpHeaders& h, std::string_view name);

struct HttpRequest {
  std::string method;   // "GET", "POST", ... (HEAD is served as GET, without the body)
  std::string target;   // as sent: path and query
  std::string path;     // the target's path, percent-decoded
  int minor_version = 1;  // HTTP/1.x
  HttpHeaders headers;
  std::string body;     // decoded: de-chunked, Content-Encoding undone, at most the server's cap
  std::string client;   // who sent it, for fair admission: "key:N" (the Nth API key), else "addr:IP"
  std::vector<std::string> matches;  // a route's path captures (/v1/models/{id}: [path, id])

  std::string header(std::string_view name) const { return header_value(headers, name); }
};

// Where a streaming response writes. write() blocks while the client is behind (the outbox holds
// its bound) and returns false once the client is gone or was cut for not reading (a write
// deadline): the route stops and its generation is cancelled. done() ends the stream.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(const char* data, size_t n) = 0;
  virtual void done() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  std::string content_type;
  // A stream (chunked transfer): called until it returns false (stop: the client is gone) or has
  // called sink.done(). on_end(ok) runs once after, ok = the stream ended with done().
  std::function<bool(StreamSink&)> stream;
  std::function<void(bool ok)> on_end;

  void set_header(const std::string& name, const std::string& value) { headers.emplace_back(name, value); }
  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_chunked_content_provider(std::string type, std::function<bool(StreamSink&)> provider,
                                    std::function<void(bool)> end = nullptr) {
    content_type = std::move(type);
    stream = std::move(provider);
    on_end = std::move(end);
  }
};

}  // namespace mmx::server
