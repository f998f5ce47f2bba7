#include "server/http_wire.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "server/api_error.h"

namespace mmx::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110 §5.6.2 token characters (method, field names).
bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded; a '%' not followed by two hex digits stays as it is.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = s[i] == '%' && i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
    if (hi >= 0 && lo >= 0) {
      out += char(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool fail(WireError* err, int status, std::string msg) {
  err->status = status;
  err->message = std::move(msg);
  return false;
}

}  // namespace

std::string header_value(const HttpHeaders& h, std::string_view name) {
  for (const auto& [k, v] : h)
    if (iequals(k, name)) return v;
  return "";
}

bool has_header(const HttpHeaders& h, std::string_view name) {
  return std::any_of(h.begin(), h.end(), [&](const auto& kv) { return iequals(kv.first, name); });
}

bool parse_head(std::string_view head, const HeadLimits& limits, HttpRequest* req, WireError* err) {
  // Request line: METHOD SP TARGET SP HTTP/1.x CRLF
  const size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return fail(err, 400, "Malformed request line");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp2 == sp1 + 1 ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(err, 400, "Malformed request line (expected: METHOD TARGET HTTP/1.1)");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), is_tchar)) return fail(err, 400, "Malformed request method");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(err, 400, "Malformed request target");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || (version[7] != '0' && version[7] != '1'))
    return fail(err, 505, "HTTP version not supported (this server speaks HTTP/1.0 and HTTP/1.1)");
  req->method = std::string(method);
  req->target = std::string(target);
  req->path = percent_decode(target.substr(0, target.find('?')));
  req->minor_version = version[7] - '0';
  req->headers.clear();

  // Header fields: NAME ":" OWS VALUE OWS CRLF, up to the blank line.
  size_t bytes = 0;
  for (size_t pos = eol + 2; pos < head.size();) {
    const size_t end = head.find("\r\n", pos);
    if (end == std::string_view::npos) return fail(err, 400, "Malformed header field (no CRLF)");
    if (end == pos) break;  // the blank line
    const std::string_view f = head.substr(pos, end - pos);
    pos = end + 2;
    if (f[0] == ' ' || f[0] == '\t') return fail(err, 400, "Obsolete header line folding is not accepted");
    const size_t colon = f.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        !std::all_of(f.begin(), f.begin() + int64_t(colon), is_tchar))
      return fail(err, 400, "Malformed header field");
    const std::string_view value = trim(f.substr(colon + 1));
    for (char c : value)
      if (c == '\r' || c == '\n' || c == '\0') return fail(err, 400, "Malformed header field value");
    bytes += colon + value.size();
    if (int(req->headers.size()) >= limits.max_headers || bytes > limits.max_header_bytes) {
      size_t n = req->headers.size() + 1;  // count them all for the message
      for (size_t p = pos; p < head.size();) {
        const size_t e = head.find("\r\n", p);
        if (e == std::string_view::npos || e == p) break;
        bytes += e - p;
        ++n;
        p = e + 2;
      }
      return fail(err, 431,
                  fmt::format("Request header fields too large: {} fields, {} bytes (this server takes at most {} "
                              "fields, {} bytes)", n, bytes, limits.max_headers, limits.max_header_bytes));
    }
    req->headers.emplace_back(std::string(f.substr(0, colon)), std::string(value));
  }
  return true;
}

int chunked_extent(std::string_view s, size_t from, size_t* end, size_t* decoded) {
  size_t pos = from;
  *decoded = 0;
  for (;;) {
    const size_t eol = s.find("\r\n", pos);
    if (eol == std::string_view::npos) return s.size() - pos > 1024 ? -1 : 0;  // a size line is short
    size_t n = 0, k = pos;
    for (; k < eol && hex_value(s[k]) >= 0; ++k) {
      if (n > (size_t(1) << 40)) return -1;
      n = n * 16 + size_t(hex_value(s[k]));
    }
    if (k == pos || (k < eol && s[k] != ';')) return -1;  // a size, optionally ";extensions"
    if (n == 0) {  // the last chunk: trailer fields, then a blank line
      for (size_t t = eol + 2;;) {
        const size_t te = s.find("\r\n", t);
        if (te == std::string_view::npos) return s.size() - t > 8192 ? -1 : 0;
        if (te == t) {
          *end = te + 2;
          return 1;
        }
        t = te + 2;
      }
    }
    *decoded += n;
    if (s.size() < eol + 2 + n + 2) return 0;
    if (s.substr(eol + 2 + n, 2) != "\r\n") return -1;
    pos = eol + 2 + n + 2;
  }
}

std::string dechunk(std::string_view body) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string_view::npos) break;
    size_t n = 0;
    for (size_t k = pos; k < eol && hex_value(body[k]) >= 0; ++k) n = n * 16 + size_t(hex_value(body[k]));
    if (n == 0 || eol + 2 + n > body.size()) break;
    out.append(body.substr(eol + 2, n));
    pos = eol + 2 + n + 2;
  }
  return out;
}

std::string decode_content(std::string body, const std::string& encoding, size_t cap) {
  const std::string_view e = trim(encoding);
  auto too_large = [cap] {
    return ApiError(413, fmt::format("The request body is too large (over {} bytes decoded)", cap));
  };
  if (e.empty() || iequals(e, "identity")) {
    if (body.size() > cap) throw too_large();
    return body;
  }
  const bool gz = iequals(e, "gzip") || iequals(e, "x-gzip");
  if (!gz && !iequals(e, "deflate"))
    throw ApiError(415, "Content-Encoding '" + std::string(e) + "' is not supported (use gzip, deflate or none)");
  z_stream z{};
  // gzip: the gzip wrapper (+16); deflate: zlib's wrapper or raw, detected (+32 takes zlib and gzip)
  if (inflateInit2(&z, gz ? 15 + 16 : 15 + 32) != Z_OK) throw ApiError(500, "internal server error");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(body.data());
  z.avail_in = uInt(body.size());
  char buf[65536];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    const size_t got = sizeof buf - z.avail_out;
    if (out.size() + got > cap) {
      inflateEnd(&z);
      throw too_large();
    }
    out.append(buf, got);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK || (z.avail_in == 0 && got == 0)) {
      inflateEnd(&z);
      throw ApiError(400, "The request body could not be read (a corrupt or truncated " + std::string(e) +
                              " Content-Encoding)");
    }
  }
  inflateEnd(&z);
  return out;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
  }
}

std::string response_head(const HttpResponse& res, bool keep_alive, bool chunked, size_t content_length,
                          int keep_alive_s) {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\n", res.status, reason_phrase(res.status));
  if (!res.content_type.empty()) h += "Content-Type: " + res.content_type + "\r\n";
  for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  if (keep_alive && keep_alive_s > 0) h += fmt::format("Keep-Alive: timeout={}\r\n", keep_alive_s);
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  else if (res.status != 204 && res.status >= 200) h += fmt::format("Content-Length: {}\r\n", content_length);
  h += "\r\n";
  return h;
}

std::string chunk(const char* data, size_t n) {
  std::string c = fmt::format("{:x}\r\n", n);
  c.append(data, n);
  c += "\r\n";
  return c;
}

}  // namespace mmx::server
