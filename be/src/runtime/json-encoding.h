#pragma once

#include <cstdint>
#include <string>
#include <string_view>

/// Hand-written JSON encoding of result values: the hot path of every query (each value of
/// every row goes through these), so no JSON library, no intermediate objects, and appends
/// into one growing page buffer.
/// Thread-safety: pure functions.

namespace qr {

/// Appends 's' as a JSON string literal, quotes included. '"' and '\' are escaped, control
/// characters become \u00XX, valid UTF-8 passes through unchanged, and each maximal invalid
/// UTF-8 subsequence (a stray byte, an overlong form, a surrogate, a code point above
/// U+10FFFF, a truncated sequence) becomes one U+FFFD, as the Unicode standard recommends.
void AppendJsonString(std::string_view s, std::string* out);

/// The number of bytes AppendJsonString(s) appends, counted without encoding: from
/// s.size() + 2 (nothing to escape) up to 6 * s.size() + 2 (control characters only).
size_t JsonStringSize(std::string_view s);

/// Appends a decimal integer.
void AppendJsonInt(int64_t v, std::string* out);

/// Appends a double that a strict JSON reader decodes as a double: the shortest round-trip
/// form, always with a '.' or an exponent ("3.0", "1e+300"). NaN and infinities, which JSON
/// numbers cannot express, become the strings "NaN", "Infinity" and "-Infinity" (Trino's form).
void AppendJsonDouble(double v, std::string* out);

/// Appends 'bytes' as standard base64 with padding (RFC 4648), no quotes: OpenSSL's
/// EVP_EncodeBlock writing straight into 'out' (http/base64.h wraps the same for the HTTP layer).
void AppendBase64(std::string_view bytes, std::string* out);

}  // namespace qr
