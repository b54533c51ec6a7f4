#pragma once

#include <memory>
#include <string>

#include "util/status.h"

namespace boost::asio::ssl {
class context;
}
typedef struct ssl_st SSL;

namespace qr {

/// Files of a coordinator's TLS as a client: towards the other members of its cluster
/// (docs/operations.md "TLS between members") or towards etcd ("TLS to etcd").
struct ClusterTlsFiles {
  /// PEM CA certificates the members' certificates are verified against
  /// (--cluster_ca_file); empty: the system's trust store.
  std::string ca_file;
  /// Both or neither: the client certificate (chain, leaf first) presented to members that
  /// ask for one, and its unencrypted private key (--cluster_client_cert_file,
  /// --cluster_client_key_file).
  std::string client_cert_file;
  std::string client_key_file;
  /// The flags' prefix, for messages: "cluster" (--cluster_ca_file, ...) or "etcd"
  /// (--etcd_ca_file, ...).
  std::string flag_prefix = "cluster";
};

/// Builds the client-side TLS context of the requests to members whose advertised URI is
/// https://, or to etcd endpoints given as https:// (TLS 1.2 and newer, the peer's chain
/// verified; host names are checked per connection by SetTlsPeerName()). Errors name the flag and the file and say what is wrong
/// (unreadable, not PEM, no certificate, key does not match).
/// Thread-safety: thread-safe; the context is immutable once built and shared.
Status CreateClusterTlsContext(const ClusterTlsFiles& files,
                               std::shared_ptr<boost::asio::ssl::context>* out);

/// Prepares a client connection 'ssl' for peer 'host' (a DNS name or an IP address literal
/// without brackets): SNI for a name, and the handshake fails unless the peer's certificate
/// matches it (subjectAltName DNS or IP entries only, never the CN; no partial wildcards). False
/// when OpenSSL refuses the name.
bool SetTlsPeerName(SSL* ssl, const std::string& host);

/// Why the TLS handshake of 'ssl' failed, for messages: the certificate verification's
/// failure ("certificate verify failed: unable to get local issuer certificate", "...:
/// hostname mismatch") when there was one, else 'fallback'.
std::string TlsHandshakeFailure(SSL* ssl, const std::string& fallback);

}  // namespace qr
