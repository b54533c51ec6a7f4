#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/status.h"

/// The password file of coordinatord (--auth_password_file): one user per line,
///   user:pbkdf2-sha256:ITERATIONS:SALT_BASE64:HASH_BASE64
/// where HASH = PBKDF2-HMAC-SHA256(password, SALT, ITERATIONS) (32 bytes). Blank lines and
/// lines starting with '#' are ignored. Entries are made by coordinatord-passwd.
/// Thread-safety: all functions are thread-safe; a PasswordFile is immutable once parsed.

namespace qr {

/// One user's salted password hash.
struct PasswordEntry {
  std::string user;
  int iterations = 0;
  std::string salt;  // raw bytes
  std::string hash;  // raw bytes, kPasswordHashBytes long
};

inline constexpr size_t kPasswordHashBytes = 32;
inline constexpr size_t kPasswordSaltBytes = 16;
inline constexpr size_t kMinPasswordSaltBytes = 8;
inline constexpr int kMinPasswordIterations = 1000;
inline constexpr int kMaxPasswordIterations = 10000000;
/// What coordinatord-passwd uses unless told otherwise.
inline constexpr int kDefaultPasswordIterations = 100000;
/// Longest accepted user name and password (bytes).
inline constexpr size_t kMaxUserNameBytes = 128;
inline constexpr size_t kMaxPasswordBytes = 1024;

/// The parsed password file: users and their hashes.
class PasswordFile {
 public:
  /// Parses 'content'; errors name 'source' (the file name), the line number and what is
  /// wrong with it. A file without any user is an error (it would lock everyone out).
  static Status Parse(std::string_view content, std::string_view source, PasswordFile* out);
  /// Reads and parses the file at 'path'.
  static Status Load(const std::string& path, PasswordFile* out);

  /// The entry of 'user', or nullptr.
  const PasswordEntry* Find(std::string_view user) const;
  size_t size() const { return entries_.size(); }
  /// The iteration count most entries use (the larger on a tie; the default when empty): what
  /// an unknown user's dummy check costs, so that it takes as long as a typical known user's.
  int TypicalIterations() const;

 private:
  std::unordered_map<std::string, PasswordEntry> entries_;
};

/// A user name is 1..kMaxUserNameBytes printable ASCII or UTF-8 bytes without ':' or
/// whitespace. Returns an error saying what is wrong.
Status ValidateUserName(std::string_view user);

/// PBKDF2-HMAC-SHA256 of 'password' with a fresh random salt: the password file line of
/// 'user' (without a newline).
Status MakePasswordEntryLine(std::string_view user, std::string_view password, int iterations,
                             std::string* line);

/// Recomputes the hash of 'password' with 'entry''s salt and iterations and compares it in
/// constant time.
bool VerifyPassword(const PasswordEntry& entry, std::string_view password);

}  // namespace qr
