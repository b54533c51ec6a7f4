#include "testutil/test-cert.h"

#include <cstdio>
#include <memory>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace qr::testing {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};

bool AddSan(X509* cert) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool BuildCert(EVP_PKEY* key, const std::string& organization, X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  return X509_set_version(cert, 2) == 1 &&
         ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) == 1 &&
         X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr &&
         X509_gmtime_adj(X509_getm_notAfter(cert), 86400) != nullptr &&
         X509_set_pubkey(cert, key) == 1 &&
         X509_NAME_add_entry_by_txt(
             name, "O", MBSTRING_ASC,
             reinterpret_cast<const unsigned char*>(organization.c_str()), -1, -1, 0) == 1 &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                    reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1,
                                    0) == 1 &&
         X509_set_issuer_name(cert, name) == 1 && AddSan(cert) &&
         X509_sign(cert, key, EVP_sha256()) > 0;
}

template <typename Write>
bool WritePem(const std::string& path, Write write) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  bool ok = write(f);
  return fclose(f) == 0 && ok;
}

}  // namespace

bool WriteSelfSignedCert(const std::string& dir, const std::string& name, TestCert* out,
                         std::string* error) {
  std::unique_ptr<EVP_PKEY, KeyFree> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, CertFree> cert(X509_new());
  if (!key || !cert || !BuildCert(key.get(), name, cert.get())) {
    *error = "cannot generate a test certificate";
    return false;
  }
  out->cert_file = dir + "/" + name + ".crt";
  out->key_file = dir + "/" + name + ".key";
  bool ok = WritePem(out->key_file, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  }) && WritePem(out->cert_file, [&](FILE* f) { return PEM_write_X509(f, cert.get()) == 1; });
  if (!ok) *error = "cannot write the test certificate into " + dir;
  return ok;
}

}  // namespace qr::testing
