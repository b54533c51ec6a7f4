#pragma once

#include <sqlite3.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "util/status.h"

/// Guards for SQLite built-ins whose cost can exceed what their result's size suggests, and
/// which cannot be replaced by a linear implementation as instr/replace/trim are
/// (sqlite-functions.h):
///  - printf()/format(): a width or precision of N costs time in N even when the result is
///    refused as too big ('%.*c' with N = 2e9 takes ~5 s). A width or precision larger than
///    SQLITE_LIMIT_LENGTH can only make a result that is too big, for which the built-in
///    answers NULL: the guard answers NULL at once.
///  - json_patch(T, P): quadratic in the keys of T and P (17 s for two 720 KB objects). It
///    is refused with an error that says so when |T| * |P| exceeds kJsonPatchMaxWork bytes^2
///    (~55 ms in the worst case here).
/// A call that passes its guard runs SQLite's own built-in, unchanged, on a private in-memory
/// connection of the same thread (the overrides hide it on the serving connection).
/// Thread-safety: like the connection it serves: one thread at a time.

namespace qr {

/// |target| * |patch| bytes^2 above which json_patch() is refused: (64 KiB)^2.
constexpr int64_t kJsonPatchMaxWork = int64_t{1} << 32;

class GuardedBuiltins {
 public:
  /// Overrides printf, format and json_patch on 'db'; '*out' must outlive 'db''s use.
  static Status Register(sqlite3* db, std::unique_ptr<GuardedBuiltins>* out);
  ~GuardedBuiltins();
  GuardedBuiltins(const GuardedBuiltins&) = delete;
  GuardedBuiltins& operator=(const GuardedBuiltins&) = delete;

  /// Runs built-in 'name' on the private connection with the arguments of this call and
  /// returns its result (or error) through 'ctx'.
  void CallBuiltin(sqlite3_context* ctx, const char* name, int argc, sqlite3_value** argv);
  /// The serving connection's SQLITE_LIMIT_LENGTH.
  int64_t max_length() const { return sqlite3_limit(served_, SQLITE_LIMIT_LENGTH, -1); }

 private:
  GuardedBuiltins(sqlite3* served, sqlite3* builtins) : served_(served), builtins_(builtins) {}

  sqlite3* const served_;
  sqlite3* const builtins_;
  /// "SELECT name(?1, ..., ?n)" by (name, n), prepared once.
  std::map<std::pair<std::string, int>, sqlite3_stmt*> statements_;
};

/// The largest width or precision in printf() format 'format' applied to 'argv' (the
/// arguments after the format), following SQLite's printf syntax ('*' takes the next
/// argument); 0 if none.
int64_t LargestPrintfWidth(const char* format, int argc, sqlite3_value** argv);

}  // namespace qr
