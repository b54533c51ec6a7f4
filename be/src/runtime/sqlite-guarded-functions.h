#pragma once

#include <sqlite3.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/sqlite-printf.h"
#include "util/status.h"

/// Guards for SQLite built-ins whose cost can exceed what their result's size suggests, and
/// which cannot be replaced by a linear implementation as instr/replace/trim are
/// (sqlite-functions.h):
///  - printf()/format(): a width or precision of N costs time in N even when the result is
///    refused as too big ('%.*c' with N = 2e9 takes ~5 s). A width or precision larger than
///    SQLITE_LIMIT_LENGTH can only make a result that is too big, for which the built-in
///    answers NULL: the guard answers NULL at once.
///    A %c conversion with a large precision (the character repeated) is rendered here
///    instead, in linear time with a small constant (sqlite-printf.h); the rest of such a
///    format still goes to the built-in.
///  - json_patch(T, P): quadratic in the keys of T and P (17 s for two 720 KB objects). It
///    is refused with an error that says so when |T| * |P| exceeds kJsonPatchMaxWork bytes^2
///    (~55 ms in the worst case here).
///  - the json_* functions and the -> and ->> operators: linear, but ~15-25 ns per byte
///    (~30 ms per 2 MiB value) inside one call, and SQLite checks an interrupt only between
///    loop iterations, so one row of many such calls ran back to back (ten on 1 MiB values:
///    ~0.5 s). Each call first charges its arguments' bytes to StepCheckpoint::Charge(): a
///    large one is preceded by a check (cancel, time limit, the long-query yield), and the
///    call answers SQLITE_INTERRUPT when the statement must stop.
/// A call that passes its guard runs SQLite's own built-in, unchanged, on a private in-memory
/// connection of the same thread (the overrides hide it on the serving connection). An
/// argument with JSON's subtype (the result of another json_* call) is passed through json()
/// there, so that the built-in reads it as JSON, as it does when the calls are nested.
/// Thread-safety: like the connection it serves: one thread at a time.

namespace qr {

/// |target| * |patch| bytes^2 above which json_patch() is refused: (64 KiB)^2.
constexpr int64_t kJsonPatchMaxWork = int64_t{1} << 32;

class GuardedBuiltins {
 public:
  /// A checked built-in's registration: the user data of its override.
  struct Checked {
    GuardedBuiltins* self;
    const char* name;
  };

  /// Overrides printf, format and the json_* functions on 'db'; '*out' must outlive 'db''s
  /// use.
  static Status Register(sqlite3* db, std::unique_ptr<GuardedBuiltins>* out);
  ~GuardedBuiltins();
  GuardedBuiltins(const GuardedBuiltins&) = delete;
  GuardedBuiltins& operator=(const GuardedBuiltins&) = delete;

  /// Runs built-in 'name' on the private connection with the arguments of this call and
  /// returns its result (or error) through 'ctx'.
  /// 'json_args': empty, or one character per argument, '1' for an argument passed through
  /// json() (it has JSON's subtype).
  void CallBuiltin(sqlite3_context* ctx, const char* name, int argc, sqlite3_value** argv,
                   const std::string& json_args = std::string());
  /// CallBuiltin() after StepCheckpoint::Charge() of the arguments' bytes, with the arguments
  /// of JSON's subtype passed through json(); SQLITE_INTERRUPT if the statement must stop.
  void CallChecked(sqlite3_context* ctx, const char* name, int argc, sqlite3_value** argv);
  /// Answers printf('format', argv[0..argc)) from its planned 'pieces' (PlanPrintfRepeats()):
  /// the built-in renders the format pieces, this the repeats, into one result.
  void RenderPlanned(sqlite3_context* ctx, const char* format, int argc, sqlite3_value** argv,
                     const std::vector<PrintfPiece>& pieces);
  /// The serving connection's SQLITE_LIMIT_LENGTH.
  int64_t max_length() const { return sqlite3_limit(served_, SQLITE_LIMIT_LENGTH, -1); }
  /// A %c precision above which printf() renders the repeats itself (tests lower it to
  /// compare both paths on small inputs).
  int64_t printf_repeat_threshold() const { return printf_repeat_threshold_; }
  void set_printf_repeat_threshold(int64_t threshold) { printf_repeat_threshold_ = threshold; }
  /// printf() calls answered through RenderPlanned(), and the format pieces it rendered
  /// through the built-in.
  int64_t planned_calls() const { return planned_calls_; }
  int64_t rendered_pieces() const { return rendered_pieces_; }
  /// Prepared statements of the built-ins held at most. Each lives in SQLite's heap, which
  /// every query shares, and one statement can ask for 2^127 of them (which of up to 127
  /// arguments come from json()): the cache starts over when full, so that no client fills
  /// the heap for good.
  static constexpr size_t kMaxCachedStatements = 64;
  size_t cached_statements() const { return statements_.size(); }

 private:
  GuardedBuiltins(sqlite3* served, sqlite3* builtins) : served_(served), builtins_(builtins) {}

  /// The prepared "SELECT name(?1, ..., ?argc)" ("SELECT ?1 -> ?2" for the operators), with
  /// json(?i) for the arguments 'json_args' marks; nullptr (with the error set on 'ctx') if
  /// it cannot be prepared.
  sqlite3_stmt* Statement(sqlite3_context* ctx, const char* name, int argc,
                          const std::string& json_args);
  /// Registers the override of built-in 'name' with 'num_args' arguments (-1: any) that
  /// calls CallChecked().
  Status RegisterChecked(const char* name, int num_args);
  /// Runs the built-in printf on format 'format' and 'argv[0..argc)': 1 with the result in
  /// '*out', 0 if it answered NULL (too big), -1 with the error set on 'ctx'.
  int RunPrintf(sqlite3_context* ctx, std::string_view format, int argc, sqlite3_value** argv,
                std::string* out);
  /// Sets the error of a step that did not return a row on 'ctx'.
  void SetStepError(sqlite3_context* ctx, int rc);

  sqlite3* const served_;
  sqlite3* const builtins_;
  /// "SELECT name(?1, ..., ?n)" by (name, n, json_args), prepared once; at most
  /// kMaxCachedStatements.
  std::map<std::tuple<std::string, int, std::string>, sqlite3_stmt*> statements_;
  /// The user data of the checked built-ins' overrides.
  std::vector<std::unique_ptr<Checked>> checked_;
  int64_t printf_repeat_threshold_ = kPrintfRepeatThreshold;
  int64_t planned_calls_ = 0;
  int64_t rendered_pieces_ = 0;
};

}  // namespace qr
