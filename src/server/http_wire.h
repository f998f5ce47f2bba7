// HTTP/1.1 on the wire, as pure functions over bytes (the front, front.h, does the sockets):
//   parse_head      request line + header fields -> HttpRequest, under the field-count and byte limits
//   chunked_extent  where a chunked body ends (or that it is malformed) and how many data bytes it has
//   dechunk         a complete chunked body -> its data
//   decode_content  Content-Encoding undone (gzip, deflate), capped on the decoded bytes
//   response_head   status line and header fields of an answer
// Every reader is bounds-checked on untrusted bytes and fuzzed through the server (tests/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http.h"

namespace mmx::server {

struct HeadLimits {
  int max_headers = 100;                      // header fields; more: 431
  size_t max_header_bytes = size_t(32) << 10; // their names + values; more: 431
};

// A request the front answers itself (status, reason phrase, message for the error body).
struct WireError {
  int status = 400;
  std::string message;
};

// The head [0, head.size()) ends with its blank line ("\r\n\r\n"). Fills req's method, target,
// path, minor_version and headers. False with *err for a malformed line (400), a version other
// than HTTP/1.0 or 1.1 (505), or fields past the limits (431).
bool parse_head(std::string_view head, const HeadLimits& limits, HttpRequest* req, WireError* err);

// A chunked body starting at s[from]: 1 when complete (*end = one past its trailers' blank line),
// 0 when more bytes are needed, -1 when malformed. *decoded = the data bytes seen so far.
int chunked_extent(std::string_view s, size_t from, size_t* end, size_t* decoded);

// The data of a complete, well-formed chunked body (chunked_extent said 1).
std::string dechunk(std::string_view body);

// Undoes `encoding` ("", "identity", "gzip", "x-gzip", "deflate"), refusing more than `cap` decoded
// bytes. Throws ApiError: 413 over the cap, 400 for a corrupt stream, 415 for another encoding.
std::string decode_content(std::string body, const std::string& encoding, size_t cap);

// The reason phrase of a status ("OK", "Not Found", ...; "" for one we never send).
const char* reason_phrase(int status);

// "HTTP/1.1 STATUS REASON" and the header fields of `res`, Content-Type, Connection (with
// keep-alive, "Keep-Alive: timeout=S" when keep_alive_s > 0: clients that read it, as undici does,
// stop reusing an idle connection before the server closes it) and either Content-Length:
// content_length or (chunked) Transfer-Encoding: chunked; ends with the blank line.
std::string response_head(const HttpResponse& res, bool keep_alive, bool chunked, size_t content_length,
                          int keep_alive_s = 0);

// One chunk of a chunked response: size in hex, the data, CRLF.
std::string chunk(const char* data, size_t n);

// The last chunk of a chunked response.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace mmx::server
