#include "http/password-file.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <glog/logging.h>

#include "http/base64.h"

namespace qr {
namespace {

constexpr std::string_view kScheme = "pbkdf2-sha256";

bool Pbkdf2(std::string_view password, std::string_view salt, int iterations, std::string* out) {
  out->assign(kPasswordHashBytes, '\0');
  return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                           reinterpret_cast<const unsigned char*>(salt.data()),
                           static_cast<int>(salt.size()), iterations, EVP_sha256(),
                           static_cast<int>(kPasswordHashBytes),
                           reinterpret_cast<unsigned char*>(out->data())) == 1;
}

/// Splits 'line' at ':' into exactly 5 fields.
bool SplitFields(std::string_view line, std::string_view fields[5]) {
  for (int i = 0; i < 5; ++i) {
    size_t colon = line.find(':');
    if ((i < 4) != (colon != std::string_view::npos)) return false;
    fields[i] = line.substr(0, colon);
    if (i < 4) line.remove_prefix(colon + 1);
  }
  return true;
}

/// Parses one non-comment line; errors say what is wrong (the caller adds where).
Status ParseEntry(std::string_view line, PasswordEntry* out) {
  std::string_view f[5];
  if (!SplitFields(line, f)) {
    return InvalidArgument("expected 5 ':'-separated fields "
                           "user:pbkdf2-sha256:ITERATIONS:SALT_BASE64:HASH_BASE64 "
                           "(make lines with coordinatord-passwd)");
  }
  QR_RETURN_IF_ERROR(ValidateUserName(f[0]));
  if (f[1] != kScheme) {
    return InvalidArgument("unknown hash scheme " + QuoteForError(f[1], 32) +
                           ": only pbkdf2-sha256 is supported");
  }
  int iterations = 0;
  auto [ptr, ec] = std::from_chars(f[2].data(), f[2].data() + f[2].size(), iterations);
  if (ec != std::errc() || ptr != f[2].data() + f[2].size() ||
      iterations < kMinPasswordIterations || iterations > kMaxPasswordIterations) {
    return InvalidArgument("bad iteration count " + QuoteForError(f[2], 32) + ": expected " +
                           std::to_string(kMinPasswordIterations) + " to " +
                           std::to_string(kMaxPasswordIterations));
  }
  std::string salt, hash;
  if (!Base64Decode(f[3], &salt) || salt.size() < kMinPasswordSaltBytes) {
    return InvalidArgument("bad salt: expected base64 of at least " +
                           std::to_string(kMinPasswordSaltBytes) + " bytes");
  }
  if (!Base64Decode(f[4], &hash) || hash.size() != kPasswordHashBytes) {
    return InvalidArgument("bad hash: expected base64 of " + std::to_string(kPasswordHashBytes) +
                           " bytes");
  }
  *out = PasswordEntry{std::string(f[0]), iterations, std::move(salt), std::move(hash)};
  return Status::OK();
}

}  // namespace

Status ValidateUserName(std::string_view user) {
  if (user.empty()) return InvalidArgument("empty user name");
  if (user.front() == '#') {
    // Its line would read as a comment: the user could never log in.
    return InvalidArgument("user name " + QuoteForError(user) +
                           " starts with '#', which marks a comment line in a password file");
  }
  if (user.size() > kMaxUserNameBytes) {
    return InvalidArgument("user name longer than " + std::to_string(kMaxUserNameBytes) +
                           " bytes");
  }
  for (char c : user) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == ':' || u <= 0x20 || u == 0x7f) {
      return InvalidArgument("user name " + QuoteForError(user) +
                             " contains ':', a space or a control character");
    }
  }
  return Status::OK();
}

Status PasswordFile::Parse(std::string_view content, std::string_view source,
                           PasswordFile* out) {
  PasswordFile file;
  int line_number = 0;
  while (!content.empty()) {
    ++line_number;
    size_t eol = content.find('\n');
    std::string_view line = content.substr(0, eol);
    content = eol == std::string_view::npos ? std::string_view() : content.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') continue;
    PasswordEntry entry;
    Status s = ParseEntry(line, &entry);
    if (s.ok() && file.entries_.contains(entry.user)) {
      s = InvalidArgument("user " + QuoteForError(entry.user) + " appears twice");
    }
    if (!s.ok()) {
      return InvalidArgument(std::string(source) + ":" + std::to_string(line_number) + ": " +
                             s.message());
    }
    std::string user = entry.user;
    file.entries_.emplace(std::move(user), std::move(entry));
  }
  if (file.entries_.empty()) {
    return InvalidArgument(std::string(source) + ": no users (add lines made with "
                           "coordinatord-passwd)");
  }
  *out = std::move(file);
  return Status::OK();
}

Status PasswordFile::Load(const std::string& path, PasswordFile* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("cannot read the password file " + QuoteForError(path, 256) + ": " +
                           std::strerror(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return InvalidArgument("error reading the password file " + path);
  QR_RETURN_IF_ERROR(Parse(content.str(), path, out));
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    LOG(WARNING) << "The password file " << QuoteForError(path, 256)
                 << " is readable by every user of this machine (mode "
                 << std::oct << (st.st_mode & 07777) << std::dec
                 << "): anyone here can copy its hashes and guess passwords offline; "
                    "chmod o-r it";
  }
  return Status::OK();
}

const PasswordEntry* PasswordFile::Find(std::string_view user) const {
  auto it = entries_.find(std::string(user));
  return it == entries_.end() ? nullptr : &it->second;
}

int PasswordFile::TypicalIterations() const {
  std::unordered_map<int, size_t> uses;
  int typical = kDefaultPasswordIterations;
  size_t most = 0;
  for (const auto& [user, entry] : entries_) {
    size_t n = ++uses[entry.iterations];
    if (n > most || (n == most && entry.iterations > typical)) {
      most = n;
      typical = entry.iterations;
    }
  }
  return typical;
}

Status MakePasswordEntryLine(std::string_view user, std::string_view password, int iterations,
                             std::string* line) {
  QR_RETURN_IF_ERROR(ValidateUserName(user));
  if (password.empty() || password.size() > kMaxPasswordBytes) {
    return InvalidArgument("the password must be 1 to " + std::to_string(kMaxPasswordBytes) +
                           " bytes long");
  }
  if (iterations < kMinPasswordIterations || iterations > kMaxPasswordIterations) {
    return InvalidArgument("iterations must be " + std::to_string(kMinPasswordIterations) +
                           " to " + std::to_string(kMaxPasswordIterations));
  }
  std::string salt(kPasswordSaltBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(salt.data()),
                 static_cast<int>(salt.size())) != 1) {
    return Internal("RAND_bytes failed: no randomness for the salt");
  }
  std::string hash;
  if (!Pbkdf2(password, salt, iterations, &hash)) return Internal("PBKDF2 failed");
  *line = std::string(user) + ":" + std::string(kScheme) + ":" + std::to_string(iterations) +
          ":" + Base64Encode(salt) + ":" + Base64Encode(hash);
  return Status::OK();
}

bool VerifyPassword(const PasswordEntry& entry, std::string_view password) {
  std::string hash;
  if (password.size() > kMaxPasswordBytes ||
      !Pbkdf2(password, entry.salt, entry.iterations, &hash)) {
    return false;
  }
  return hash.size() == entry.hash.size() &&
         CRYPTO_memcmp(hash.data(), entry.hash.data(), hash.size()) == 0;
}

}  // namespace qr
