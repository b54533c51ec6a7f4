#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/step-checkpoint.h"

/// printf()'s repeated characters in linear time with a small constant.
///
/// SQLite 3.40's printf() renders '%.Nc' (the character repeated N times, the only way SQL
/// has to build a long string from a short one) with one sqlite3_str_append() call per
/// character: ~20 ns each, so printf('%.*c', 8000000, 'a') is a single VM step of ~170 ms on
/// a 2-core VM. No progress handler runs inside it, so it can be neither interrupted nor
/// yielded, and it is the bulk of an 'instr' bomb's CPU time. A plan splits the format at
/// every such conversion: the rest is rendered by the built-in (exactly as before), the
/// repeats here by doubling memcpy().
///
/// The parse follows sqlite3_str_vappendf() of SQLite 3.40 in its SQL-function mode (flags,
/// '*' and digit widths and precisions with their int conversions, 'l'/'ll', which
/// conversions take an argument); tests compare every result with the built-in's on random
/// formats (sqlite-guarded-functions-test.cc).

namespace qr {

/// A %c conversion's precision above which its repeats are rendered here.
constexpr int64_t kPrintfRepeatThreshold = 256;

/// One piece of a planned printf() result.
struct PrintfPiece {
  /// Rendered by the built-in: format bytes [format_begin, format_end) with the arguments
  /// [first_arg, end_arg) of the call (fewer if the call has fewer; the built-in treats a
  /// missing argument as NULL, as it would have).
  size_t format_begin = 0;
  size_t format_end = 0;
  int first_arg = 0;
  int end_arg = 0;
  /// A %c conversion rendered here (when 'repeat' > 0): 'lead' spaces, 'unit' 'repeat' - 1
  /// times, 'mid' spaces (SQLite pads there when the width counts a stray continuation byte),
  /// 'unit' once more, 'trail' spaces.
  int64_t lead = 0;
  int64_t repeat = 0;
  int64_t mid = 0;
  int64_t trail = 0;
  std::string unit;

  /// Bytes of this piece when rendered here.
  int64_t RepeatBytes() const {
    return lead + repeat * static_cast<int64_t>(unit.size()) + mid + trail;
  }
};

/// A lower bound of the length of printf('format', argv...) ('argv': the arguments after the
/// format): the sum over its conversions of each one's width or, for repeats and integers,
/// precision, whichever is larger, as SQLite takes them ('*' takes the next argument, as an
/// int); 0 if none. The guard of printf() answers NULL at once when it exceeds the length
/// limit, as the built-in would after spending time in it: checking each conversion alone let
/// 2,000 repeats of 2 MB each through, which the built-in appends a character at a time (4e9
/// appends in one uninterruptible call), and let the planner hold 350,000 pieces.
int64_t MinimumPrintfLength(const char* format, int argc, sqlite3_value** argv);

/// Plans printf('format', argv[0..argc)) as pieces when the format has a %c conversion whose
/// precision exceeds 'threshold' and every conversion in it is one whose argument use is
/// known (not %n, internal or unknown ones, which end or change SQLite's output); returns
/// false otherwise (render the whole call with the built-in). Reads the arguments of the
/// repeated conversions as text (sqlite3_value_text(), as the built-in does).
bool PlanPrintfRepeats(const char* format, int argc, sqlite3_value** argv, int64_t threshold,
                       std::vector<PrintfPiece>* pieces);

/// Writes the piece's 'RepeatBytes()' bytes at 'out', reporting the work to 'checkpoints';
/// false if they said stop.
bool RenderRepeat(const PrintfPiece& piece, char* out, WorkCheckpoints* checkpoints);

}  // namespace qr
