#include "runtime/sqlite-like.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

/// One bit per pattern item plus one for "all items matched".
using Mask = unsigned __int128;
constexpr int kMaxItems = 127;

/// sqlite3Utf8Trans1: the payload bits of a UTF-8 lead byte 0xc0..0xff.
constexpr unsigned char kUtf8Trans1[] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
    0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19,
    0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
    0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x00, 0x01, 0x02, 0x03,
    0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
};

/// Reads one character from [*z, end) exactly as sqlite3Utf8Read() does from a
/// NUL-terminated string ('end' is the first NUL or the end). QR_REQUIRES: *z < end.
inline uint32_t ReadUtf8(const unsigned char** z, const unsigned char* end) {
  uint32_t c = *(*z)++;
  if (c >= 0xc0) {
    c = kUtf8Trans1[c - 0xc0];
    while (*z < end && (**z & 0xc0) == 0x80) c = (c << 6) + (0x3f & *(*z)++);
    if (c < 0x80 || (c & 0xFFFFF800) == 0xD800 || (c & 0xFFFFFFFE) == 0xFFFE) c = 0xFFFD;
  }
  return c;
}

inline uint32_t ToLowerAscii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
inline uint32_t ToUpperAscii(uint32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }

std::string_view UpToNul(std::string_view s) { return s.substr(0, s.find('\0')); }

/// A pattern compiled to a shift-and automaton. State bit i: the items before item i have
/// matched the text read so far; bit 'k' (num_items): all have. A '%' ('*') before item i is
/// a self-loop on state i.
struct Compiled {
  bool never = false;  // a trailing escape or an unterminated class: no text matches
  bool too_complex = false;
  int num_items = 0;
  Mask star = 0;
  /// Items matching each ASCII character.
  Mask ascii[128] = {};
  /// Items matching every character ('_', '?').
  Mask any = 0;
  /// Literal items of a non-ASCII character (exact: LIKE folds ASCII only).
  std::vector<std::pair<Mask, uint32_t>> wide_literals;
  /// GLOB classes: their bit, whether inverted, and their ranges.
  struct Class {
    Mask bit;
    bool invert;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool Matches(uint32_t c) const {
      bool seen = false;
      for (const auto& [lo, hi] : ranges) seen = seen || (c >= lo && c <= hi);
      return seen != invert;
    }
  };
  std::vector<Class> classes;
  /// The pattern and escape this was compiled from (auxdata reuse check).
  std::string source;
  uint32_t escape = 0;

  Mask MaskFor(uint32_t c) const {
    if (c < 128) return ascii[c];
    Mask m = any;
    for (const auto& [bit, lit] : wide_literals) m |= lit == c ? bit : 0;
    for (const Class& cls : classes) m |= cls.Matches(c) ? cls.bit : 0;
    return m;
  }

  /// Adds an item; false when there are too many.
  bool NextItem(Mask* bit) {
    if (num_items >= kMaxItems) {
      too_complex = true;
      return false;
    }
    *bit = Mask(1) << num_items++;
    return true;
  }
  void AddLiteral(uint32_t c, bool fold) {
    Mask bit;
    if (!NextItem(&bit)) return;
    if (c >= 128) {
      wide_literals.emplace_back(bit, c);
    } else if (fold) {
      ascii[ToLowerAscii(c)] |= bit;
      ascii[ToUpperAscii(c)] |= bit;
    } else {
      ascii[c] |= bit;
    }
  }
  void AddAny() {
    Mask bit;
    if (!NextItem(&bit)) return;
    any |= bit;
    for (Mask& m : ascii) m |= bit;
  }
  /// Parses a GLOB class after its '[' the way patternCompare() does; false if unterminated.
  bool AddClass(const unsigned char** z, const unsigned char* end) {
    Class cls{0, false, {}};
    uint32_t c2 = *z < end ? ReadUtf8(z, end) : 0;
    if (c2 == '^') {
      cls.invert = true;
      c2 = *z < end ? ReadUtf8(z, end) : 0;
    }
    if (c2 == ']') {
      cls.ranges.emplace_back(']', ']');
      c2 = *z < end ? ReadUtf8(z, end) : 0;
    }
    uint32_t prior = 0;
    while (c2 != 0 && c2 != ']') {
      if (c2 == '-' && *z < end && **z != ']' && prior > 0) {
        c2 = ReadUtf8(z, end);
        cls.ranges.emplace_back(prior, c2);
        prior = 0;
      } else {
        cls.ranges.emplace_back(c2, c2);
        prior = c2;
      }
      c2 = *z < end ? ReadUtf8(z, end) : 0;
    }
    if (c2 == 0) return false;
    if (!NextItem(&cls.bit)) return true;
    for (uint32_t c = 0; c < 128; ++c) {
      if (cls.Matches(c)) ascii[c] |= cls.bit;
    }
    classes.push_back(std::move(cls));
    return true;
  }
};

std::unique_ptr<Compiled> Compile(std::string_view pattern_in, bool glob, uint32_t escape) {
  auto p = std::make_unique<Compiled>();
  p->source.assign(pattern_in);
  p->escape = escape;
  const std::string_view pattern = UpToNul(pattern_in);
  uint32_t match_all = glob ? '*' : '%';
  uint32_t match_one = glob ? '?' : '_';
  // likeFunc(): an ESCAPE equal to a wildcard turns that wildcard off.
  if (!glob && escape == match_all) match_all = 0;
  if (!glob && escape == match_one) match_one = 0;
  const auto* z = reinterpret_cast<const unsigned char*>(pattern.data());
  const auto* end = z + pattern.size();
  while (z < end && !p->too_complex) {
    uint32_t c = ReadUtf8(&z, end);
    if (c == match_all) {
      p->star |= Mask(1) << p->num_items;
    } else if (c == match_one) {
      p->AddAny();
    } else if (glob && c == '[') {
      if (!p->AddClass(&z, end)) p->never = true;
    } else if (!glob && escape != 0 && c == escape) {
      if (z >= end) {
        p->never = true;
      } else {
        p->AddLiteral(ReadUtf8(&z, end), /*fold=*/true);
      }
    } else {
      p->AddLiteral(c, /*fold=*/!glob);
    }
    if (p->never) break;
  }
  return p;
}

bool Match(const Compiled& p, std::string_view text_in) {
  if (p.never || p.too_complex) return false;
  const std::string_view text = UpToNul(text_in);
  const Mask accept = Mask(1) << p.num_items;
  const bool open_end = (p.star & accept) != 0;
  const auto* z = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = z + text.size();
  Mask d = 1;
  while (z < end) {
    if (open_end && (d & accept)) return true;
    const uint32_t c = *z < 0x80 ? *z++ : ReadUtf8(&z, end);
    d = ((d & p.MaskFor(c)) << 1) | (d & p.star);
    if (d == 0) return false;
  }
  return (d & accept) != 0;
}

std::string_view TextOf(sqlite3_value* v) {
  const unsigned char* t = sqlite3_value_text(v);
  if (t == nullptr) return {};
  return {reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_value_bytes(v))};
}

/// like(P,X[,E]) and glob(P,X): user data 1 for GLOB.
void LikeFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  const bool glob = sqlite3_user_data(ctx) != nullptr;
  // Debian's SQLite is built with SQLITE_LIKE_DOESNT_MATCH_BLOBS: a BLOB never matches.
  static const bool blobs_never_match =
      sqlite3_compileoption_used("LIKE_DOESNT_MATCH_BLOBS") != 0;
  if (blobs_never_match && (sqlite3_value_type(argv[0]) == SQLITE_BLOB ||
                            sqlite3_value_type(argv[1]) == SQLITE_BLOB)) {
    sqlite3_result_int(ctx, 0);
    return;
  }
  // Linear, but milliseconds on a 2 MiB value, and it allocates nothing: a row of many such
  // calls checks between them (StepCheckpoint::Charge).
  if (StepCheckpoint::Charge(static_cast<size_t>(sqlite3_value_bytes(argv[1])))) {
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  sqlite3* db = sqlite3_context_db_handle(ctx);
  if (sqlite3_value_bytes(argv[0]) > sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, -1)) {
    sqlite3_result_error(ctx, "LIKE or GLOB pattern too complex", -1);
    return;
  }
  uint32_t escape = 0;
  if (argc == 3) {
    const unsigned char* e = sqlite3_value_text(argv[2]);
    if (e == nullptr) return;  // NULL
    const std::string_view esc = UpToNul(
        {reinterpret_cast<const char*>(e), static_cast<size_t>(sqlite3_value_bytes(argv[2]))});
    const auto* z = reinterpret_cast<const unsigned char*>(esc.data());
    const auto* end = z + esc.size();
    // sqlite3Utf8CharLen(zEsc, -1) != 1: count characters the way SQLITE_SKIP_UTF8 does.
    int chars = 0;
    while (z < end) {
      if (*z++ >= 0xc0) {
        while (z < end && (*z & 0xc0) == 0x80) ++z;
      }
      ++chars;
    }
    if (chars != 1) {
      sqlite3_result_error(ctx, "ESCAPE expression must be a single character", -1);
      return;
    }
    z = reinterpret_cast<const unsigned char*>(esc.data());
    escape = ReadUtf8(&z, end);
  }
  const std::string_view pattern = TextOf(argv[0]);
  const std::string_view text = TextOf(argv[1]);
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    return;
  }
  if (sqlite3_value_text(argv[0]) == nullptr || sqlite3_value_text(argv[1]) == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  auto* cached = static_cast<Compiled*>(sqlite3_get_auxdata(ctx, 0));
  if (cached == nullptr || cached->escape != escape || cached->source != pattern) {
    std::unique_ptr<Compiled> fresh = Compile(pattern, glob, escape);
    cached = fresh.get();
    sqlite3_set_auxdata(ctx, 0, fresh.release(),
                        [](void* p) { delete static_cast<Compiled*>(p); });
    // sqlite3_set_auxdata() may free it at once (e.g. out of memory): look again.
    if (sqlite3_get_auxdata(ctx, 0) != cached) {
      std::unique_ptr<Compiled> local = Compile(pattern, glob, escape);
      sqlite3_result_int(ctx, Match(*local, text) ? 1 : 0);
      return;
    }
  }
  sqlite3_result_int(ctx, Match(*cached, text) ? 1 : 0);
}

}  // namespace

bool LikeGlobMatch(std::string_view pattern, std::string_view text, bool glob, uint32_t escape,
                   bool* too_complex) {
  std::unique_ptr<Compiled> p = Compile(pattern, glob, escape);
  if (too_complex != nullptr) *too_complex = p->too_complex;
  return Match(*p, text);
}

Status RegisterLinearTimeLikeGlob(sqlite3* db) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  struct Fn {
    const char* name;
    int n_args;
    void* glob;
  };
  static int glob_tag = 1;
  for (const Fn& f : {Fn{"like", 2, nullptr}, Fn{"like", 3, nullptr}, Fn{"glob", 2, &glob_tag}}) {
    if (sqlite3_create_function_v2(db, f.name, f.n_args, kFlags, f.glob, &LikeFunction, nullptr,
                                   nullptr, nullptr) != SQLITE_OK) {
      return Internal(std::string("cannot register the linear-time ") + f.name +
                      "(): " + sqlite3_errmsg(db));
    }
  }
  return Status::OK();
}

}  // namespace qr
