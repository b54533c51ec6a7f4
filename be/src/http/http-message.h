#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/webserver.h"

/// Parsing and formatting of HTTP/1.1 messages for the webserver: pure functions, no I/O, no
/// Beast stream code (that stays in webserver.cc, which is the only heavy translation unit).
/// Thread-safety: all functions are thread-safe.

namespace qr {

/// Decodes %XX escapes, and '+' as a space when 'plus_as_space' (query strings). A '%' not
/// followed by two hex digits is kept literally rather than rejected.
std::string PercentDecode(std::string_view in, bool plus_as_space);

/// Percent-decodes a request path (RFC 3986 2.1) into '*out' before routing. Refuses, with a
/// message in '*error' for a 400: a '%' not followed by two hex digits ("%G1", a truncated
/// "%3"), and an escape that decodes to '/' (%2F: a slash inside a segment would change the
/// segments handlers split on) or to NUL (%00). Other bytes decode as they are.
[[nodiscard]] bool PercentDecodePath(std::string_view raw, std::string* out, std::string* error);

/// Splits a request target into req->target (origin form), path, query and
/// absolute_authority. Accepts the origin form "/p?q" and the absolute form
/// "http[s]://authority[/p][?q]" (an empty path becomes "/"); a fragment is dropped.
/// Returns false, leaving 'req' unspecified, for anything else ("*", authority form, garbage).
bool ParseRequestTarget(std::string_view target, HttpRequest* req);

/// True when a response with 'status' never carries a body nor a Content-Length (1xx, 204,
/// 304).
bool StatusHasNoBody(unsigned status);

/// Appends the status line and header block (through the empty line) of a response to 'out':
/// "HTTP/1.1 <status> <reason>", Server, Date, Content-Type and Content-Length (when
/// 'content_length' is set), resp.headers, and Connection ("close" when not 'keep_alive';
/// "keep-alive" for a kept-alive HTTP/1.0 client). Headers the server owns (Content-Length,
/// Transfer-Encoding, Connection, Server, Date, Content-Type) and headers whose name or value
/// could split the response (CR, LF, NUL, non-token names) are dropped with a warning.
/// 'streamed': a body follows without a Content-Length ('content_length' unset): chunked
/// ("Transfer-Encoding: chunked") or delimited by the close; Content-Type is sent as with one.
enum class StreamedBody { kNo, kChunked, kCloseDelimited };
void AppendResponseHead(unsigned status, const HttpResponse& resp,
                        std::optional<uint64_t> content_length, bool keep_alive, bool http10,
                        std::string* out, StreamedBody streamed = StreamedBody::kNo);

/// The chunked transfer coding's framing of a 'size'-byte chunk (size > 0), appended to
/// '*prefix' ("<hex>\r\n") and '*suffix' ("\r\n", then the last chunk "0\r\n\r\n" when
/// 'last'). A 'size' of 0 appends only the last chunk (when 'last').
void AppendChunkFraming(size_t size, bool last, std::string* prefix, std::string* suffix);

}  // namespace qr
