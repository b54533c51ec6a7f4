#include "cluster/forward-auth.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "http/base64.h"

namespace qr {

namespace {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMacBytes = 32;

void AppendField(std::string_view field, std::string* out) {
  out->append(std::to_string(field.size()));
  out->push_back(':');
  out->append(field);
}

/// What a signed header carries: the domain keeps a MAC of one kind from passing as the other.
constexpr std::string_view kPrincipalDomain = "qr-forward-v1;";
constexpr std::string_view kClientDomain = "qr-forward-client-v1;";

/// HMAC-SHA256 over 'domain' and the length-prefixed fields, as 64 lowercase hex digits.
std::string Mac(std::string_view domain, std::string_view secret, std::string_view value,
                std::string_view method, std::string_view target, int64_t ts) {
  std::string input(domain);
  AppendField(value, &input);
  AppendField(method, &input);
  AppendField(target, &input);
  AppendField(std::to_string(ts), &input);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[mac[i] >> 4]);
    hex.push_back(kHex[mac[i] & 15]);
  }
  return hex;
}

/// "v1;<unix ms>;<hex MAC>;<base64 value>".
std::string Sign(std::string_view domain, std::string_view secret, std::string_view value,
                 std::string_view method, std::string_view target, int64_t now_ms) {
  return "v1;" + std::to_string(now_ms) + ";" + Mac(domain, secret, value, method, target, now_ms) +
         ";" + Base64Encode(value);
}

PrincipalCheck Verify(std::string_view domain, std::string_view secret, std::string_view header,
                      std::string_view method, std::string_view target, int64_t now_ms,
                      int64_t window_ms, std::string* value) {
  std::string_view parts[4];
  for (int i = 0; i < 4; ++i) {
    const size_t semi = header.find(';');
    if ((i < 3) != (semi != std::string_view::npos)) return PrincipalCheck::kMalformed;
    parts[i] = header.substr(0, semi);
    if (i < 3) header.remove_prefix(semi + 1);
  }
  if (parts[0] != "v1" || parts[2].size() != 2 * kMacBytes) return PrincipalCheck::kMalformed;
  int64_t ts = 0;
  const char* end = parts[1].data() + parts[1].size();
  auto [ptr, ec] = std::from_chars(parts[1].data(), end, ts);
  if (ec != std::errc() || ptr != end || parts[1].empty() || ts < 0) {
    return PrincipalCheck::kMalformed;
  }
  std::string decoded;
  if (!Base64Decode(parts[3], &decoded) || decoded.empty()) return PrincipalCheck::kMalformed;
  const std::string want = Mac(domain, secret, decoded, method, target, ts);
  if (CRYPTO_memcmp(want.data(), parts[2].data(), want.size()) != 0) {
    return PrincipalCheck::kBadMac;
  }
  if (ts > now_ms + window_ms || ts < now_ms - window_ms) return PrincipalCheck::kExpired;
  *value = std::move(decoded);
  return PrincipalCheck::kOk;
}

}  // namespace

Status LoadClusterSecret(const std::string& path, std::string* secret) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return InvalidArgument("--cluster_secret_file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("--cluster_secret_file " + path + ": not a regular file");
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return InvalidArgument("--cluster_secret_file " + path +
                           ": readable by every user of the machine; chmod o-r it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--cluster_secret_file " + path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() < kMinSecretBytes) {
    return InvalidArgument("--cluster_secret_file " + path + ": holds " +
                           std::to_string(s.size()) + " bytes; at least " +
                           std::to_string(kMinSecretBytes) +
                           " are needed (e.g. openssl rand -hex 32)");
  }
  *secret = std::move(s);
  return Status::OK();
}

const char* PrincipalCheckName(PrincipalCheck check) {
  switch (check) {
    case PrincipalCheck::kOk: return "ok";
    case PrincipalCheck::kMalformed: return "malformed";
    case PrincipalCheck::kBadMac: return "bad MAC";
    case PrincipalCheck::kExpired: return "outside the time window";
  }
  return "malformed";
}

std::string SignForwardedPrincipal(std::string_view secret, std::string_view principal,
                                   std::string_view method, std::string_view target,
                                   int64_t now_ms) {
  return Sign(kPrincipalDomain, secret, principal, method, target, now_ms);
}

PrincipalCheck VerifyForwardedPrincipal(std::string_view secret, std::string_view header,
                                        std::string_view method, std::string_view target,
                                        int64_t now_ms, int64_t window_ms,
                                        std::string* principal) {
  return Verify(kPrincipalDomain, secret, header, method, target, now_ms, window_ms, principal);
}

std::string SignForwardedClient(std::string_view secret, std::string_view client_address,
                                std::string_view method, std::string_view target,
                                int64_t now_ms) {
  return Sign(kClientDomain, secret, client_address, method, target, now_ms);
}

PrincipalCheck VerifyForwardedClient(std::string_view secret, std::string_view header,
                                     std::string_view method, std::string_view target,
                                     int64_t now_ms, int64_t window_ms,
                                     std::string* client_address) {
  return Verify(kClientDomain, secret, header, method, target, now_ms, window_ms,
                client_address);
}

}  // namespace qr
