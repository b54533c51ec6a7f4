#include "http/http-message.h"

#include <charconv>
#include <ctime>

#include <boost/beast/http/status.hpp>
#include <absl/strings/match.h>
#include <glog/logging.h>

#include "util/status.h"

namespace qr {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 7230 tchar.
bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool IsValidHeaderName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A value must not end the header line early: no CR, LF or NUL (obs-text is allowed).
bool IsValidHeaderValue(std::string_view value) {
  return value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool IsServerOwnedHeader(std::string_view name) {
  static constexpr absl::string_view kOwned[] = {"content-length", "transfer-encoding",
                                                 "connection",     "server",
                                                 "date",           "content-type"};
  for (absl::string_view owned : kOwned) {
    if (absl::EqualsIgnoreCase(absl::string_view(name.data(), name.size()), owned)) return true;
  }
  return false;
}

void AppendUint(uint64_t v, std::string* out) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

// The IMF-fixdate of the current second, formatted once per second per thread (a response
// costs no gmtime_r). Built by hand: strftime's day and month names follow the locale.
std::string_view CurrentHttpDate() {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  thread_local time_t cached_second = -1;
  thread_local char buf[40];
  thread_local int len = 0;
  time_t now = time(nullptr);
  if (now != cached_second) {
    struct tm tm;
    gmtime_r(&now, &tm);
    len = snprintf(buf, sizeof(buf), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday],
                   tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                   tm.tm_sec);
    cached_second = now;
  }
  return std::string_view(buf, static_cast<size_t>(len));
}

void AppendHeader(std::string_view name, std::string_view value, std::string* out) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

}  // namespace

std::string PercentDecode(std::string_view in, bool plus_as_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%' && i + 2 < in.size() && HexValue(in[i + 1]) >= 0 && HexValue(in[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2])));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool PercentDecodePath(std::string_view raw, std::string* out, std::string* error) {
  out->clear();
  out->reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      out->push_back(raw[i]);
      continue;
    }
    const int high = i + 1 < raw.size() ? HexValue(raw[i + 1]) : -1;
    const int low = i + 2 < raw.size() ? HexValue(raw[i + 2]) : -1;
    if (high < 0 || low < 0) {
      *error = "Bad percent-escape " + QuoteForError(raw.substr(i, 3), 8) + " in the path " +
               QuoteForError(raw, 200) + ": '%' must be followed by two hex digits";
      return false;
    }
    const char c = static_cast<char>(high * 16 + low);
    if (c == '/' || c == '\0') {
      *error = "Percent-escape " + std::string(raw.substr(i, 3)) + " in the path " +
               QuoteForError(raw, 200) + " is not accepted: a path segment may not contain an "
               "encoded '/' or NUL";
      return false;
    }
    out->push_back(c);
    i += 2;
  }
  return true;
}

bool ParseRequestTarget(std::string_view target, HttpRequest* req) {
  std::string_view origin;
  req->absolute_authority.clear();
  if (!target.empty() && target[0] == '/') {
    origin = target;
  } else {
    const absl::string_view t(target.data(), target.size());
    size_t scheme_len = absl::StartsWithIgnoreCase(t, "http://")    ? 7
                        : absl::StartsWithIgnoreCase(t, "https://") ? 8
                                                                    : 0;
    if (scheme_len == 0) return false;
    std::string_view rest = target.substr(scheme_len);
    size_t authority_end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, authority_end);
    if (authority.empty()) return false;
    req->absolute_authority.assign(authority);
    origin = authority_end == std::string_view::npos ? std::string_view()
                                                     : rest.substr(authority_end);
  }
  // Conforming clients never send a fragment; never route on one either.
  origin = origin.substr(0, origin.find('#'));
  if (origin.empty() || origin[0] != '/') {
    req->target.assign("/");
    req->target.append(origin);
  } else {
    req->target.assign(origin);
  }
  size_t q = req->target.find('?');
  if (q == std::string::npos) {
    req->path.assign(req->target);
    req->query.clear();
  } else {
    req->path.assign(req->target, 0, q);
    req->query.assign(req->target, q + 1);
  }
  return true;
}

bool StatusHasNoBody(unsigned status) {
  return status < 200 || status == 204 || status == 304;
}

void AppendResponseHead(unsigned status, const HttpResponse& resp,
                        std::optional<uint64_t> content_length, bool keep_alive, bool http10,
                        std::string* out, StreamedBody streamed) {
  namespace http = boost::beast::http;
  // Always HTTP/1.1: a server announces its highest version (RFC 7230 2.6), also to 1.0 clients.
  out->append("HTTP/1.1 ");
  AppendUint(status, out);
  out->push_back(' ');
  http::status known = http::int_to_status(status);
  boost::beast::string_view reason =
      known == http::status::unknown ? "Status" : http::obsolete_reason(known);
  out->append(reason.data(), reason.size());
  out->append("\r\nServer: coordinatord\r\nDate: ");
  out->append(CurrentHttpDate());
  out->append("\r\n");
  if (content_length.has_value() || streamed != StreamedBody::kNo) {
    if (!resp.content_type.empty()) {
      if (IsValidHeaderValue(resp.content_type)) {
        AppendHeader("Content-Type", resp.content_type, out);
      } else {
        LOG(WARNING) << "dropping an invalid Content-Type " << QuoteForError(resp.content_type);
      }
    }
    if (content_length.has_value()) {
      out->append("Content-Length: ");
      AppendUint(*content_length, out);
      out->append("\r\n");
    } else if (streamed == StreamedBody::kChunked) {
      out->append("Transfer-Encoding: chunked\r\n");
    }
    // No body is to be sniffed into another type (a text/plain error echoing a request
    // must never render as HTML), unless the handler said so itself.
    bool has_nosniff = false;
    for (const auto& [name, value] : resp.headers) {
      has_nosniff = has_nosniff || absl::EqualsIgnoreCase(name, "x-content-type-options");
    }
    if (!has_nosniff) out->append("X-Content-Type-Options: nosniff\r\n");
  }
  for (const auto& [name, value] : resp.headers) {
    if (!IsValidHeaderName(name) || !IsValidHeaderValue(value) || IsServerOwnedHeader(name)) {
      LOG(WARNING) << "dropping response header " << QuoteForError(name) << ": "
                   << QuoteForError(value) << " (invalid, or set by the server itself)";
      continue;
    }
    AppendHeader(name, value, out);
  }
  if (!keep_alive) {
    out->append("Connection: close\r\n");
  } else if (http10) {
    out->append("Connection: keep-alive\r\n");
  }
  out->append("\r\n");
}

void AppendChunkFraming(size_t size, bool last, std::string* prefix, std::string* suffix) {
  if (size > 0) {
    char hex[2 * sizeof(size_t) + 1];
    int n = 0;
    for (size_t v = size; v > 0; v >>= 4) hex[n++] = "0123456789abcdef"[v & 0xf];
    while (n > 0) prefix->push_back(hex[--n]);
    prefix->append("\r\n");
    suffix->append("\r\n");
  }
  if (last) suffix->append("0\r\n\r\n");
}

std::string_view HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(boost::beast::string_view(name.data(), name.size()));
  if (it == headers.end()) return std::string_view();
  return std::string_view(it->value().data(), it->value().size());
}

std::string HttpRequest::QueryParam(std::string_view name, bool* present) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    size_t eq = part.find('=');
    std::string_view key = part.substr(0, eq);
    bool match = key == name || (key.find_first_of("%+") != std::string_view::npos &&
                                 PercentDecode(key, /*plus_as_space=*/true) == name);
    if (!match || part.empty()) continue;
    if (present != nullptr) *present = true;
    return eq == std::string_view::npos ? std::string()
                                        : PercentDecode(part.substr(eq + 1), true);
  }
  if (present != nullptr) *present = false;
  return std::string();
}

HttpResponse HttpResponse::Text(unsigned status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(text);
  return r;
}

HttpResponse HttpResponse::Json(unsigned status, std::string json) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(json);
  return r;
}

}  // namespace qr
