#include "http/tls-context.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace qr {
namespace ssl = boost::asio::ssl;
namespace {

Status CheckReadable(const char* what, const std::string& path) {
  if (path.empty()) return InvalidArgument(std::string("no TLS ") + what + " file given");
  if (access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(std::string("cannot read the TLS ") + what + " file " +
                           QuoteForError(path, 256) + ": " + std::strerror(errno));
  }
  return Status::OK();
}

/// The reason of OpenSSL's latest error (or of 'ec'), for messages.
std::string SslReason(const boost::system::error_code& ec) {
  unsigned long e = ERR_peek_last_error();
  const char* text = e != 0 ? ERR_reason_error_string(e) : nullptr;
  std::string reason = text != nullptr ? text : "";
  ERR_clear_error();
  return reason.empty() ? ec.message() : reason;
}

constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

Status KeyMismatch(const std::string& cert_file, const std::string& key_file) {
  return InvalidArgument("the TLS private key " + QuoteForError(key_file, 256) +
                         " does not match the certificate " + QuoteForError(cert_file, 256));
}

}  // namespace

Status CreateTlsServerContext(const std::string& cert_file, const std::string& key_file,
                              std::shared_ptr<ssl::context>* out) {
  QR_RETURN_IF_ERROR(CheckReadable("certificate", cert_file));
  QR_RETURN_IF_ERROR(CheckReadable("private key", key_file));
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  if (ec) return Internal("cannot set TLS options: " + ec.message());
  // TLS 1.2: forward-secret key exchange and AEAD ciphers only (OpenSSL's default list also
  // has RSA key exchange, without forward secrecy, and CBC suites). TLS 1.3's suites are all
  // of that kind already and are left as they are.
  if (SSL_CTX_set_cipher_list(ctx->native_handle(), kTls12Ciphers) != 1) {
    ERR_clear_error();
    return Internal("cannot set the TLS 1.2 cipher list");
  }
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return InvalidArgument("bad TLS certificate file " + QuoteForError(cert_file, 256) + ": " +
                           SslReason(ec) + " (expected a PEM certificate chain)");
  }
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  // Asio took OpenSSL's error code off the queue: it is in 'ec'.
  if (ec && ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    ERR_clear_error();
    return KeyMismatch(cert_file, key_file);
  }
  if (ec) {
    return InvalidArgument("bad TLS private key file " + QuoteForError(key_file, 256) + ": " +
                           SslReason(ec) + " (expected an unencrypted PEM private key)");
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    return KeyMismatch(cert_file, key_file);
  }
  *out = std::move(ctx);
  return Status::OK();
}

Status GetTlsCertificateInfo(const ssl::context& ctx, TlsCertificateInfo* out) {
  // const_cast: OpenSSL 3's getter takes a const SSL_CTX*, Asio's native_handle() is non-const.
  X509* cert = SSL_CTX_get0_certificate(const_cast<ssl::context&>(ctx).native_handle());
  if (cert == nullptr) return Internal("the TLS context has no certificate");
  tm t{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &t) != 1) {
    ERR_clear_error();
    return Internal("cannot read the TLS certificate's notAfter time");
  }
  char* subject = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0);
  out->subject = subject != nullptr ? subject : "";
  OPENSSL_free(subject);
  out->not_after_unix_seconds = static_cast<int64_t>(timegm(&t));
  return Status::OK();
}

}  // namespace qr
