#include "http/http-framing.h"

#include <string_view>

#include "http/http-message.h"
#include "util/status.h"

namespace qr {
namespace {

namespace http = boost::beast::http;

std::string_view ToStd(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool IsChunked(std::string_view s) {
  if (s.size() != 7) return false;
  for (size_t i = 0; i < 7; ++i) {
    if ((s[i] | 0x20) != "chunked"[i]) return false;
  }
  return true;
}

enum class CodingList { kChunked, kUnsupported, kMalformed };

// Classifies a Transfer-Encoding value: exactly "chunked"; a well-formed list of
// transfer-codings (token *( OWS ";" OWS parameter )) that is something else; or malformed
// (empty elements, non-token names, chunked with parameters or more than once).
CodingList ClassifyCodings(std::string_view value) {
  int elements = 0;
  int chunked = 0;
  while (true) {
    size_t comma = value.find(',');
    std::string_view element = TrimOws(value.substr(0, comma));
    size_t semicolon = element.find(';');
    std::string_view name = TrimOws(element.substr(0, semicolon));
    if (!IsToken(name)) return CodingList::kMalformed;
    if (IsChunked(name)) {
      if (semicolon != std::string_view::npos) return CodingList::kMalformed;
      ++chunked;
    }
    ++elements;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  if (chunked > 1) return CodingList::kMalformed;
  return elements == 1 && chunked == 1 ? CodingList::kChunked : CodingList::kUnsupported;
}

bool Refuse(unsigned status, std::string message, FramingError* error) {
  error->status = status;
  error->message = std::move(message);
  return false;
}

bool CheckTransferEncoding(std::string_view te, int te_lines, int length_lines, unsigned version,
                           FramingError* error) {
  const std::string quoted = QuoteForError(te, 80);
  if (version < 11) {
    return Refuse(400, "Transfer-Encoding " + quoted + " in an HTTP/1.0 request: send the body "
                  "with a Content-Length, or use HTTP/1.1", error);
  }
  if (length_lines > 0) {
    return Refuse(400, "Both Transfer-Encoding " + quoted + " and Content-Length: send one of "
                  "them, not both", error);
  }
  if (te_lines > 1) {
    return Refuse(400, "More than one Transfer-Encoding field: send one, "
                  "\"Transfer-Encoding: chunked\"", error);
  }
  switch (ClassifyCodings(te)) {
    case CodingList::kChunked: return true;
    case CodingList::kUnsupported:
      return Refuse(501, "Transfer-Encoding " + quoted + " is not supported: the only accepted "
                    "transfer coding is \"chunked\", alone", error);
    case CodingList::kMalformed: break;
  }
  return Refuse(400, "Malformed Transfer-Encoding " + quoted + ": expected \"chunked\"", error);
}

// RFC 9110 quoted-string at the start of 's'; its length, or 0 if there is none.
size_t QuotedStringLength(std::string_view s) {
  if (s.empty() || s[0] != '"') return 0;
  for (size_t i = 1; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"') return i + 1;
    if (c == '\\') {
      if (++i == s.size()) return 0;
      const unsigned char escaped = static_cast<unsigned char>(s[i]);
      if (escaped < 0x20 && escaped != '\t') return 0;
      if (escaped == 0x7f) return 0;
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return 0;
    }
  }
  return 0;
}

// The length of the token at the start of 's' (0 if none).
size_t TokenLength(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsTokenChar(s[n])) ++n;
  return n;
}

}  // namespace

bool CheckRequestHead(const http::request_header<>& head, bool folded, HttpRequest* req,
                      FramingError* error) {
  req->target.assign(ToStd(head.target()));
  if (folded) {
    return Refuse(400, "Obsolete line folding (a header line starting with a space or tab) is "
                  "not accepted: send each field on one line", error);
  }
  if (!CheckRequestFraming(head, head.version(), error)) return false;
  if (!ParseRequestTarget(ToStd(head.target()), req)) {
    req->target.assign(ToStd(head.target()));
    return Refuse(400, "Bad request target " + QuoteForError(req->target, 128) +
                  ": expected a path (/path?query) or an absolute URL (http://host/path)", error);
  }
  std::string decoded;
  if (!PercentDecodePath(req->path, &decoded, &error->message)) {
    error->status = 400;
    return false;
  }
  req->path = std::move(decoded);
  return true;
}

bool IsStrictChunkExtension(std::string_view ext) {
  while (!ext.empty()) {
    if (ext[0] != ';') return false;
    ext.remove_prefix(1);
    const size_t name = TokenLength(ext);
    if (name == 0) return false;
    ext.remove_prefix(name);
    if (ext.empty() || ext[0] != '=') continue;
    ext.remove_prefix(1);
    const size_t value = !ext.empty() && ext[0] == '"' ? QuotedStringLength(ext) : TokenLength(ext);
    if (value == 0) return false;
    ext.remove_prefix(value);
  }
  return true;
}

bool HasWellFormedVersion(std::string_view data) {
  const size_t cr = data.find('\r');
  if (cr == std::string_view::npos || cr + 1 >= data.size() || data[cr + 1] != '\n') return false;
  std::string_view line = data.substr(0, cr);
  if (line.size() < 9) return false;
  std::string_view v = line.substr(line.size() - 9);
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return v.substr(0, 6) == " HTTP/" && digit(v[6]) && v[7] == '.' && digit(v[8]);
}

void FramingReadBuffer::Scan(std::string_view consumed) {
  for (char c : consumed) {
    if (after_lf_ && (c == ' ' || c == '\t')) folded_ = true;
    after_lf_ = c == '\n';
  }
}

bool CheckRequestFraming(const http::fields& fields, unsigned version, FramingError* error) {
  int hosts = 0;
  int length_lines = 0;
  int te_lines = 0;
  std::string_view length;
  std::string_view te;
  for (const auto& field : fields) {
    switch (field.name()) {
      case http::field::host: ++hosts; break;
      case http::field::content_length:
        ++length_lines;
        length = ToStd(field.value());
        break;
      case http::field::transfer_encoding:
        ++te_lines;
        te = ToStd(field.value());
        break;
      default: break;
    }
  }
  if (hosts > 1) return Refuse(400, "More than one Host field: send exactly one", error);
  if (hosts == 0 && version >= 11) {
    return Refuse(400, "An HTTP/1.1 request needs a Host field", error);
  }
  if (te_lines > 0) return CheckTransferEncoding(te, te_lines, length_lines, version, error);
  if (length_lines > 1) {
    return Refuse(400, "More than one Content-Length field: send exactly one", error);
  }
  length = TrimOws(length);
  if (length_lines == 1 &&
      (length.empty() || length.find_first_not_of("0123456789") != std::string_view::npos)) {
    return Refuse(400, "Bad Content-Length " + QuoteForError(length, 40) +
                  ": expected one decimal number of bytes", error);
  }
  return true;
}

}  // namespace qr
