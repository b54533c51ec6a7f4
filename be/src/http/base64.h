#pragma once

#include <string>
#include <string_view>

/// Standard base64 with padding (RFC 4648 section 4), on OpenSSL's EVP_EncodeBlock and
/// EVP_DecodeBlock: the one base64 of the HTTP layer, its tools and its tests (the result
/// encoder appends with EVP_EncodeBlock directly, see runtime/json-encoding.h).
/// Thread-safety: pure functions.

namespace qr {

/// 'in' as base64 with padding, no line breaks.
std::string Base64Encode(std::string_view in);

/// Strict base64: padding required to a multiple of 4, no whitespace, no junk, and the unused
/// low bits of the last character zero (one encoding per value). False (and '*out' cleared)
/// when 'in' is not that.
bool Base64Decode(std::string_view in, std::string* out);

}  // namespace qr
