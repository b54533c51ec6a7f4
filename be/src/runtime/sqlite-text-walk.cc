#include "runtime/sqlite-text-walk.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

/// Walks over up to 'max_chars' characters of the NUL-terminated UTF-8 text at 'p' (whose NUL
/// is at 'end' or before), as SQLite's SQLITE_SKIP_UTF8 does: a byte of 0xc0 or more and the
/// 10xxxxxx bytes after it are one character, any other byte one; stops at a NUL. Eight
/// ASCII bytes at a time, where SQLite goes byte by byte (~1.5 ns per byte: 3 ms for 2 MiB).
/// Charges its bytes to 'checkpoints' every kCheckpointBytes and at its end (nothing in it
/// allocates, so the allocation checkpoint never runs in a row of such walks). Returns where
/// it stopped, with '*chars' the characters walked; nullptr if a check said stop.
const unsigned char* WalkChars(const unsigned char* p, const unsigned char* end,
                               int64_t max_chars, int64_t* chars,
                               WorkCheckpoints* checkpoints) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighs = 0x8080808080808080;
  const unsigned char* next_check = p + kCheckpointBytes;
  int64_t n = 0;
  while (n < max_chars) {
    // Eight bytes that are all ASCII and none NUL are eight characters (up to the check).
    const unsigned char* const fast_end = std::min(end, next_check);
    while (fast_end - p >= 8 && max_chars - n >= 8) {
      uint64_t w;
      memcpy(&w, p, sizeof(w));
      if (((w | (w - kOnes)) & kHighs) != 0) break;
      p += 8;
      n += 8;
    }
    if (n == max_chars) break;
    const unsigned char c = *p;
    if (c == 0) break;
    ++p;
    ++n;
    if (c >= 0xc0) {
      while ((*p & 0xc0) == 0x80) ++p;
    }
    if (p >= next_check) {
      if (checkpoints->Advance(kCheckpointBytes)) return nullptr;
      next_check = p + kCheckpointBytes;
    }
  }
  *chars = n;
  // The rest counts toward the next check, across the calls of a row.
  if (checkpoints->Advance(kCheckpointBytes - static_cast<size_t>(next_check - p))) {
    return nullptr;
  }
  return p;
}

/// length(X), SQLite's exactly: the characters of a text before its first NUL, the bytes of
/// a blob or of a number's text, NULL for NULL; the text walked by WalkChars(), with its
/// checks. Unlike the built-in, the argument of a blob column is read in full rather than
/// its size alone.
void LengthFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  switch (sqlite3_value_type(argv[0])) {
    case SQLITE_BLOB:
    case SQLITE_INTEGER:
    case SQLITE_FLOAT: sqlite3_result_int(ctx, sqlite3_value_bytes(argv[0])); return;
    case SQLITE_TEXT: break;
    default: return;  // NULL
  }
  const auto* z = sqlite3_value_text(argv[0]);
  if (z == nullptr) return;  // as the built-in: no memory to convert it
  WorkCheckpoints checkpoints;
  int64_t chars = 0;
  if (WalkChars(z, z + sqlite3_value_bytes(argv[0]), INT64_MAX, &chars, &checkpoints) ==
      nullptr) {
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  sqlite3_result_int64(ctx, chars);
}

/// substr(X, Y[, Z]) and substring(), SQLite 3.40's exactly (Y and Z read as 32-bit ints; a
/// text is walked by characters, a blob indexed by bytes; an empty blob gives NULL). The
/// walks to a large start or length run in WalkChars(), with its checks: SQLite's walk to
/// substr(x, 2000000, 1) took ~3 ms per call of 2 MiB and allocated nothing.
void SubstrFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL ||
      (argc == 3 && sqlite3_value_type(argv[2]) == SQLITE_NULL)) {
    return;
  }
  const int type = sqlite3_value_type(argv[0]);
  int64_t p1 = sqlite3_value_int(argv[1]);
  const unsigned char* z;
  const unsigned char* end = nullptr;
  int64_t len = 0;
  WorkCheckpoints checkpoints;
  if (type == SQLITE_BLOB) {
    len = sqlite3_value_bytes(argv[0]);
    z = static_cast<const unsigned char*>(sqlite3_value_blob(argv[0]));
    if (z == nullptr) return;
  } else {
    z = sqlite3_value_text(argv[0]);
    if (z == nullptr) return;
    end = z + sqlite3_value_bytes(argv[0]);
    if (p1 < 0 && WalkChars(z, end, INT64_MAX, &len, &checkpoints) == nullptr) {
      sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
      return;
    }
  }
  int64_t p2;
  bool neg_p2 = false;
  if (argc == 3) {
    p2 = sqlite3_value_int(argv[2]);
    if (p2 < 0) {
      p2 = -p2;
      neg_p2 = true;
    }
  } else {
    p2 = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
  }
  if (p1 < 0) {
    p1 += len;
    if (p1 < 0) {
      p2 += p1;
      if (p2 < 0) p2 = 0;
      p1 = 0;
    }
  } else if (p1 > 0) {
    --p1;
  } else if (p2 > 0) {
    --p2;
  }
  if (neg_p2) {
    p1 -= p2;
    if (p1 < 0) {
      p2 += p1;
      p1 = 0;
    }
  }
  if (type != SQLITE_BLOB) {
    int64_t walked = 0;
    const unsigned char* from = WalkChars(z, end, p1, &walked, &checkpoints);
    const unsigned char* to =
        from == nullptr ? nullptr : WalkChars(from, end, p2, &walked, &checkpoints);
    if (to == nullptr) {
      sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
      return;
    }
    sqlite3_result_text64(ctx, reinterpret_cast<const char*>(from),
                          static_cast<sqlite3_uint64>(to - from), SQLITE_TRANSIENT,
                          SQLITE_UTF8);
  } else {
    if (p1 + p2 > len) {
      p2 = len - p1;
      if (p2 < 0) p2 = 0;
    }
    // (An empty result may start past the end: no pointer is formed there.)
    sqlite3_result_blob64(ctx, p2 > 0 ? z + p1 : z, static_cast<sqlite3_uint64>(p2),
                          SQLITE_TRANSIENT);
  }
}

}  // namespace

Status RegisterCheckedTextWalks(sqlite3* db) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  struct Walk {
    const char* name;
    int n_args;
    void (*function)(sqlite3_context*, int, sqlite3_value**);
  };
  constexpr Walk kWalks[] = {
      {"length", 1, &LengthFunction},    {"substr", 2, &SubstrFunction},
      {"substr", 3, &SubstrFunction},    {"substring", 2, &SubstrFunction},
      {"substring", 3, &SubstrFunction},
  };
  for (const Walk& f : kWalks) {
    if (sqlite3_create_function_v2(db, f.name, f.n_args, kFlags, nullptr, f.function, nullptr,
                                   nullptr, nullptr) != SQLITE_OK) {
      return Internal(std::string("cannot register the checked ") + f.name +
                      "(): " + sqlite3_errmsg(db));
    }
  }
  return Status::OK();
}

}  // namespace qr
