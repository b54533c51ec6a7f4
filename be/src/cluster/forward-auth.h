#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

/// What a forwarded request carries across the hop between two members of a cluster
/// (docs/operations.md#cluster): the marker that stops it being forwarded again, the scheme the
/// client used, and the principal the forwarding member authenticated and the client's address,
/// each signed with the cluster's shared secret so that a client cannot forge it.
/// Thread-safety: pure functions.

namespace qr {

/// Set by the forwarding member to its member id: a request with it is never forwarded again.
inline constexpr std::string_view kForwardedByHeader = "X-Qr-Forwarded-By";
/// "http" or "https": how the client reached the forwarding member (for nextUri).
inline constexpr std::string_view kForwardedProtoHeader = "X-Qr-Forwarded-Proto";
/// "v1;<unix ms>;<hex HMAC-SHA256>;<base64 principal>" (SignForwardedPrincipal()).
inline constexpr std::string_view kForwardedPrincipalHeader = "X-Qr-Forwarded-Principal";
/// "v1;<unix ms>;<hex HMAC-SHA256>;<base64 address>" (SignForwardedClient()): the address the
/// client's connection to the forwarding member came from ("ip:port"), which the owner then
/// logs and limits as the request's, instead of the forwarding member's.
inline constexpr std::string_view kForwardedClientHeader = "X-Qr-Forwarded-Client";

/// Reads the cluster secret from 'path' (--cluster_secret_file): the file must exist, be a
/// regular file, not be readable by others (mode o+r), and hold at least 16 bytes once a
/// trailing newline is dropped. The error names the path and what is wrong.
Status LoadClusterSecret(const std::string& path, std::string* secret);

/// The value of kForwardedPrincipalHeader for 'principal' on a request 'method' 'target'
/// (origin form, with the query string) signed at 'now_ms'. The MAC covers every field,
/// each length-prefixed, so no two inputs share one.
std::string SignForwardedPrincipal(std::string_view secret, std::string_view principal,
                                   std::string_view method, std::string_view target,
                                   int64_t now_ms);

enum class PrincipalCheck {
  kOk,
  kMalformed,  // not the header's syntax
  kBadMac,     // the MAC does not match: another secret, or a forged or altered header
  kExpired,    // signed more than the window away from now (either side)
};
/// "ok", "malformed", "bad MAC", "outside the time window".
const char* PrincipalCheckName(PrincipalCheck check);

/// Checks 'header' (kForwardedPrincipalHeader's value) for a request 'method' 'target' at
/// 'now_ms': kOk with '*principal' set only when it is well formed, its MAC is the one 'secret'
/// gives, and it was signed within 'window_ms' of 'now_ms'.
PrincipalCheck VerifyForwardedPrincipal(std::string_view secret, std::string_view header,
                                        std::string_view method, std::string_view target,
                                        int64_t now_ms, int64_t window_ms,
                                        std::string* principal);

/// The value of kForwardedClientHeader for 'client_address' on a request 'method' 'target',
/// signed at 'now_ms' like a principal but under another domain, so that neither signature
/// passes as the other.
std::string SignForwardedClient(std::string_view secret, std::string_view client_address,
                                std::string_view method, std::string_view target,
                                int64_t now_ms);
/// Checks kForwardedClientHeader's value as VerifyForwardedPrincipal() checks a principal.
PrincipalCheck VerifyForwardedClient(std::string_view secret, std::string_view header,
                                     std::string_view method, std::string_view target,
                                     int64_t now_ms, int64_t window_ms,
                                     std::string* client_address);

}  // namespace qr
