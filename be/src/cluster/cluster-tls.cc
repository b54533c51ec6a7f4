#include "cluster/cluster-tls.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace qr {
namespace ssl = boost::asio::ssl;
namespace {

Status CheckReadable(const std::string& flag, const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(flag + " " + QuoteForError(path, 256) +
                           ": cannot be read: " + std::strerror(errno));
  }
  return Status::OK();
}

/// The reason of OpenSSL's latest error (or of 'ec'), for messages.
std::string SslReason(const boost::system::error_code& ec) {
  const unsigned long e = ERR_peek_last_error();
  const char* text = e != 0 ? ERR_reason_error_string(e) : nullptr;
  std::string reason = text != nullptr ? text : "";
  ERR_clear_error();
  if (reason.empty() && ec.category() == boost::asio::error::get_ssl_category()) {
    text = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (text != nullptr) reason = text;
  }
  return reason.empty() ? ec.message() : reason;
}

}  // namespace

Status CreateClusterTlsContext(const ClusterTlsFiles& files, std::shared_ptr<ssl::context>* out) {
  const std::string ca_flag = "--" + files.flag_prefix + "_ca_file";
  const std::string cert_flag = "--" + files.flag_prefix + "_client_cert_file";
  const std::string key_flag = "--" + files.flag_prefix + "_client_key_file";
  if (files.client_cert_file.empty() != files.client_key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs both " + cert_flag + " and " +
                           key_flag);
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1,
                   ec);
  if (ec) return Internal("cannot set TLS options: " + ec.message());
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (ec) return Internal("cannot set the TLS verify mode: " + ec.message());
  if (files.ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) {
      return InvalidArgument("the system's trust store cannot be loaded (" + SslReason(ec) +
                             "): give the CA with " + ca_flag);
    }
  } else {
    QR_RETURN_IF_ERROR(CheckReadable(ca_flag, files.ca_file));
    ctx->load_verify_file(files.ca_file, ec);
    if (ec) {
      return InvalidArgument(ca_flag + " " + QuoteForError(files.ca_file, 256) + ": " +
                             SslReason(ec) + " (expected PEM CA certificates)");
    }
  }
  if (!files.client_cert_file.empty()) {
    QR_RETURN_IF_ERROR(CheckReadable(cert_flag, files.client_cert_file));
    QR_RETURN_IF_ERROR(CheckReadable(key_flag, files.client_key_file));
    ctx->use_certificate_chain_file(files.client_cert_file, ec);
    if (ec) {
      return InvalidArgument(cert_flag + " " +
                             QuoteForError(files.client_cert_file, 256) + ": " + SslReason(ec) +
                             " (expected a PEM certificate chain)");
    }
    ctx->use_private_key_file(files.client_key_file, ssl::context::pem, ec);
    if (!ec && SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      ec = boost::asio::error::invalid_argument;
    }
    if (ec) {
      ERR_clear_error();
      return InvalidArgument(key_flag + " " + QuoteForError(files.client_key_file, 256) +
                             ": not an unencrypted PEM private key matching " + cert_flag +
                             " " + QuoteForError(files.client_cert_file, 256));
    }
  }
  *out = std::move(ctx);
  return Status::OK();
}

bool SetTlsPeerName(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(
      param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  if (!ec) {
    // An address: no SNI (RFC 6066 allows only host names), the certificate's IP entries.
    return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  }
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
         X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) == 1;
}

std::string TlsHandshakeFailure(SSL* ssl, const std::string& fallback) {
  const long result = SSL_get_verify_result(ssl);
  if (result == X509_V_OK) return fallback;
  return std::string("certificate verify failed: ") + X509_verify_cert_error_string(result);
}

}  // namespace qr
