#pragma once

#include <string>

/// Test helper: a freshly generated self-signed certificate (made at test time with OpenSSL;
/// no key is ever committed).
/// Thread-safety: thread-safe.

namespace qr::testing {

struct TestCert {
  /// PEM files: the certificate (subject O='name' and CN 127.0.0.1, so that two of them
  /// trusted together are told apart; subjectAltName IP 127.0.0.1; valid for a day) and its
  /// EC P-256 private key.
  std::string cert_file;
  std::string key_file;
};

/// Writes 'dir'/'name'.crt and 'dir'/'name'.key. False with '*error' on failure.
bool WriteSelfSignedCert(const std::string& dir, const std::string& name, TestCert* out,
                         std::string* error);

}  // namespace qr::testing
