#pragma once

#include <cstddef>
#include <string>
#include <string_view>

/// The one parser of HTTP Basic credentials (RFC 7617), for the authenticator and for
/// everything else that reads a user name out of an Authorization header.
/// Thread-safety: pure functions.

namespace qr {

/// Decoded Basic credentials: "user:password" exactly as sent, split at the first ':'.
struct BasicCredentials {
  std::string decoded;
  size_t colon = 0;

  std::string_view user() const { return std::string_view(decoded).substr(0, colon); }
  std::string_view password() const { return std::string_view(decoded).substr(colon + 1); }
};

/// Parses an Authorization header value of the form
///   OWS "Basic" 1*SP token68 OWS
/// (RFC 9110 section 11.6.2; OWS is spaces and tabs around the field value): the scheme is
/// case-insensitive, one or more spaces separate it from the token, the token is strict
/// base64 (http/base64.h) of "user:password" with a non-empty user. False (and '*out'
/// cleared) for anything else, including another scheme.
bool ParseBasicCredentials(std::string_view authorization, BasicCredentials* out);

}  // namespace qr
