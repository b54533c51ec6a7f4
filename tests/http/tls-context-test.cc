// CreateTlsServerContext(): clear errors for missing, malformed and mismatched files.

#include "http/tls-context.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "testutil/test-cert.h"

namespace qr {
namespace {

class TlsContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qr-tls-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::string error;
    ASSERT_TRUE(testing::WriteSelfSignedCert(dir_, "server", &cert_, &error)) << error;
    ASSERT_TRUE(testing::WriteSelfSignedCert(dir_, "other", &other_, &error)) << error;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Error(const std::string& cert, const std::string& key) {
    std::shared_ptr<boost::asio::ssl::context> ctx;
    Status s = CreateTlsServerContext(cert, key, &ctx);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ctx, nullptr);
    return s.message();
  }

  std::string dir_;
  testing::TestCert cert_, other_;
};

TEST_F(TlsContextTest, AcceptsAMatchingPair) {
  std::shared_ptr<boost::asio::ssl::context> ctx;
  Status s = CreateTlsServerContext(cert_.cert_file, cert_.key_file, &ctx);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(ctx, nullptr);
}

TEST_F(TlsContextTest, ReportsTheCertificateItPresents) {
  std::shared_ptr<boost::asio::ssl::context> ctx;
  ASSERT_TRUE(CreateTlsServerContext(cert_.cert_file, cert_.key_file, &ctx).ok());
  TlsCertificateInfo info;
  Status s = GetTlsCertificateInfo(*ctx, &info);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(info.subject, "/O=server/CN=127.0.0.1");
  // WriteSelfSignedCert(): valid for 86,400 s from when SetUp() ran.
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  EXPECT_GT(info.not_after_unix_seconds, now_s + 86400 - 600);
  EXPECT_LE(info.not_after_unix_seconds, now_s + 86400);
}

// TLS 1.2 offers forward-secret key exchange and AEAD ciphers only; TLS 1.3 keeps its own.
TEST_F(TlsContextTest, OnlyForwardSecretAeadCiphers) {
  std::shared_ptr<boost::asio::ssl::context> ctx;
  ASSERT_TRUE(CreateTlsServerContext(cert_.cert_file, cert_.key_file, &ctx).ok());
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(ctx->native_handle());
  ASSERT_NE(ciphers, nullptr);
  int tls12 = 0, tls13 = 0;
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    const std::string name = SSL_CIPHER_get_name(c);
    if (std::string(SSL_CIPHER_get_version(c)) == "TLSv1.3") {
      ++tls13;
      continue;
    }
    ++tls12;
    EXPECT_EQ(SSL_CIPHER_get_kx_nid(c), NID_kx_ecdhe) << name;
    EXPECT_EQ(SSL_CIPHER_is_aead(c), 1) << name;
  }
  EXPECT_GE(tls12, 2);
  EXPECT_GE(tls13, 1);
}

TEST_F(TlsContextTest, MissingFilesAreNamed) {
  EXPECT_EQ(Error(dir_ + "/nope.crt", cert_.key_file),
            "cannot read the TLS certificate file '" + dir_ + "/nope.crt': No such file or "
            "directory");
  EXPECT_EQ(Error(cert_.cert_file, dir_ + "/nope.key"),
            "cannot read the TLS private key file '" + dir_ + "/nope.key': No such file or "
            "directory");
}

TEST_F(TlsContextTest, MalformedFilesAreNamed) {
  const std::string junk = dir_ + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  EXPECT_NE(Error(junk, cert_.key_file).find("bad TLS certificate file '" + junk + "'"),
            std::string::npos);
  EXPECT_NE(Error(cert_.cert_file, junk).find("bad TLS private key file '" + junk + "'"),
            std::string::npos);
  // The key where the certificate belongs, and the other way round.
  EXPECT_NE(Error(cert_.key_file, cert_.key_file).find("bad TLS certificate file"),
            std::string::npos);
}

TEST_F(TlsContextTest, MismatchedKeyIsRefused) {
  EXPECT_EQ(Error(cert_.cert_file, other_.key_file),
            "the TLS private key '" + other_.key_file + "' does not match the certificate '" +
                cert_.cert_file + "'");
}

}  // namespace
}  // namespace qr
