#include "runtime/sqlite-functions.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/byte-search.h"
#include "runtime/sqlite-like.h"
#include "runtime/sqlite-text-walk.h"
#include "runtime/step-checkpoint.h"

// Why these functions are replaced, and what stays bounded only by a limit.
//
// One call of a built-in SQL function cannot be interrupted, so its cost must be bounded by
// the value limit (SQLITE_LIMIT_LENGTH: 16 MiB when this was measured, --max_value_mb since,
// 2 MiB by default, chosen by the json_* rows below). Measured with SQLite 3.40.1 (Debian 12),
// g++ -O2, one call on a 2-core shared VM, adversarial inputs (n = size of X; "a*k" = k 'a's):
//
//   call                                    n        seconds   16 MiB (extrapolated)
//   instr(a*n, a*(n/2)||'b')                1 MiB    5.6       ~1400 s (quadratic)
//   instr on BLOBs, same bytes              1 MiB    5.1       ~1300 s
//   replace(a*n, a*(n/2)||'b', 'z')         1 MiB    5.0       ~1300 s
//   trim/ltrim/rtrim(a*n, b*(n-1)||'a')     64 KiB   5.6-6.2   ~4 days (|X| * chars of Y)
//   trim(a*n, 127 distinct ASCII chars)     16 MiB   3.4       (linear, x127)
//   LIKE '%'||a*49997||'b' on a*n           256 KiB  9.0       ~600 s (|X| * pattern)
//   GLOB '*'||a*49997||'b' on a*n           256 KiB  9.4       ~600 s
//   LIKE '%'||a*(L-2)||'b' on a*16MiB       L=4: 0.10  L=16: 0.29  L=64: 1.1  L=128: 1.9
//   GLOB '*[b..ba]c' (L bytes) on a*16MiB   L=4: 0.19  L=16: 0.65  L=64: 2.0  L=128: 3.7
//   LIKE '%a%a..%b', '%_%_..', '_*49999'    16 MiB   <0.02     (SQLITE_NOWILDCARDMATCH)
//   substr, hex, quote,                     16 MiB   0.06-0.07 linear
//     upper, soundex, unicode
//   json_extract(16 MiB array, '$[#-1]')    16 MiB   0.15      linear (parse)
//   json_set / json_array_length            16 MiB   0.08-0.13 linear
//   json(), json_set() on an array of 1-digit 16 MiB   0.3-0.45  linear (~15-25 ns per byte):
//     numbers (densest), strftime(%Y*n)                        at 2 MiB 12-32 ms (--max_value_mb)
//   printf('%.*c') (SQLite 3.40: one append  8 MiB    0.17      linear, ~20 ns per character;
//     per character)                                             rendered by sqlite-printf.h
//                                                                instead: a 16 MiB query
//                                                                ~60 ms through the daemon
//
// Replaced here, with SQLite's exact results: instr and replace (FindBytes: memmem in 64 KiB
// windows, or Rabin-Karp for needles over 1 KiB, with a StepCheckpoint every 64 KiB so that
// one call yields the CPU of a long query and stops on a cancel), and the
// two-argument trim/ltrim/rtrim (byte table plus a hashed set of Y's multi-byte characters).
// With them, every adversarial case above takes 0.03-0.07 s at 16 MiB (replace of all of
// 16 MiB of 'a': 0.1 s), except trim() with a Y of ~4M distinct multi-byte characters:
// ~1.3 s and ~250 MB for the hash set (the built-in takes days there).
//
// LIKE and GLOB: the built-ins cost O(|X| * pattern length), bounded only by
// SQLITE_LIMIT_LIKE_PATTERN_LENGTH (default 50000: ~10 minutes per call at 16 MiB). No limit
// reaches 100 ms at 16 MiB: even a 4-byte '%ab' costs ~0.1 s there (~6 ns per byte of X for
// the per-position recursion), and each further pattern byte adds ~15 ms ('%' + literal) to
// ~28 ms ('*[class]'). So they are replaced too (sqlite-like.h): with the pattern limited to
// kLikePatternLengthLimit (64) bytes, a pattern has at most 64 items and compiles to a
// bit-parallel automaton that reads X once, whatever the pattern. What that costs: the LIKE
// index optimization, which only recognizes the built-in.

namespace qr {
namespace {

constexpr int kFunctionFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/// The 1-based position SQLite's instrFunc reports for a match at byte 'match' of text
/// 'hay': it steps from byte 0 to each following byte that is not a UTF-8 continuation byte.
int TextPosition(const unsigned char* hay, size_t match) {
  int position = 1;
  for (size_t i = 1; i <= match; ++i) position += IsContinuation(hay[i]) ? 0 : 1;
  return position;
}

/// instr() on 'hay'/'needle' (nNeedle > 0), given whether SQLite compares them as text.
int FindPosition(const unsigned char* hay, size_t n_hay, const unsigned char* needle,
                 size_t n_needle, bool is_text, WorkCheckpoints* checkpoints) {
  if (n_needle > n_hay) return 0;
  // SQLite only tries byte 0 and non-continuation bytes; a needle that starts with a
  // continuation byte can therefore only match at byte 0.
  if (is_text && IsContinuation(needle[0])) return memcmp(hay, needle, n_needle) == 0 ? 1 : 0;
  const size_t match = FindBytes(hay, n_hay, needle, n_needle, checkpoints);
  if (match == SIZE_MAX) return 0;
  return is_text ? TextPosition(hay, match) : static_cast<int>(match) + 1;
}

/// instr(X,Y): SQLite's instrFunc, with memmem (linear in glibc) instead of a memcmp at
/// every position.
void InstrFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  const int type_hay = sqlite3_value_type(argv[0]);
  const int type_needle = sqlite3_value_type(argv[1]);
  if (type_hay == SQLITE_NULL || type_needle == SQLITE_NULL) return;
  if (sqlite3_value_bytes(argv[1]) == 0) {
    sqlite3_result_int(ctx, 1);
    return;
  }
  const bool is_text = type_hay != SQLITE_BLOB || type_needle != SQLITE_BLOB;
  // Like SQLite, convert copies when only one side is a BLOB, so that converting one
  // argument cannot move the other's bytes.
  const bool mixed = is_text && (type_hay == SQLITE_BLOB || type_needle == SQLITE_BLOB);
  sqlite3_value* hay = mixed ? sqlite3_value_dup(argv[0]) : argv[0];
  sqlite3_value* needle = mixed ? sqlite3_value_dup(argv[1]) : argv[1];
  const void* z_hay = nullptr;
  const void* z_needle = nullptr;
  if (hay != nullptr && needle != nullptr) {
    z_hay = is_text ? sqlite3_value_text(hay) : sqlite3_value_blob(hay);
    z_needle = is_text ? sqlite3_value_text(needle) : sqlite3_value_blob(needle);
  }
  const int n_hay = hay != nullptr ? sqlite3_value_bytes(hay) : 0;
  const int n_needle = needle != nullptr ? sqlite3_value_bytes(needle) : 0;
  if (z_needle == nullptr || (z_hay == nullptr && n_hay > 0)) {
    sqlite3_result_error_nomem(ctx);
  } else {
    WorkCheckpoints checkpoints;
    const int position =
        FindPosition(static_cast<const unsigned char*>(z_hay), n_hay,
                     static_cast<const unsigned char*>(z_needle), n_needle, is_text,
                     &checkpoints);
    if (checkpoints.stopped()) {
      sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    } else {
      sqlite3_result_int(ctx, position);
    }
  }
  if (mixed) {
    sqlite3_value_free(hay);
    sqlite3_value_free(needle);
  }
}

/// Number of non-overlapping, leftmost-first matches of 'pat' in 'str' (stops early if
/// 'checkpoints' says so).
size_t CountMatches(const unsigned char* str, size_t n_str, const unsigned char* pat,
                    size_t n_pat, WorkCheckpoints* checkpoints) {
  size_t count = 0;
  for (size_t i = 0; i + n_pat <= n_str;) {
    const size_t found = FindBytes(str + i, n_str - i, pat, n_pat, checkpoints);
    if (found == SIZE_MAX || checkpoints->Advance(found + n_pat)) break;
    ++count;
    i += found + n_pat;
  }
  return count;
}

/// Writes 'str' with every match of 'pat' replaced by 'rep' to 'out'; returns its length
/// (stops early if 'checkpoints' says so).
size_t WriteReplaced(const unsigned char* str, size_t n_str, const unsigned char* pat,
                     size_t n_pat, const unsigned char* rep, size_t n_rep, char* out,
                     WorkCheckpoints* checkpoints) {
  size_t i = 0;
  size_t j = 0;
  while (i + n_pat <= n_str) {
    const size_t found = FindBytes(str + i, n_str - i, pat, n_pat, checkpoints);
    if (found == SIZE_MAX || checkpoints->Advance(found + n_pat)) break;
    const size_t match = i + found;
    memcpy(out + j, str + i, match - i);
    j += match - i;
    if (n_rep > 0) memcpy(out + j, rep, n_rep);
    j += n_rep;
    i = match + n_pat;
  }
  if (n_str > i) memcpy(out + j, str + i, n_str - i);
  return j + (n_str - i);
}

/// replace(X,Y,Z): SQLite's replaceFunc (NULL if X, Y or Z is NULL, except that a Y whose
/// first byte is NUL returns X itself, value and type; the result is TEXT), with memmem.
void ReplaceFunction(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  const auto* str = sqlite3_value_text(argv[0]);
  if (str == nullptr) return;
  const size_t n_str = sqlite3_value_bytes(argv[0]);
  const auto* pat = sqlite3_value_text(argv[1]);
  if (pat == nullptr) return;
  if (pat[0] == 0) {
    sqlite3_result_value(ctx, argv[0]);
    return;
  }
  const size_t n_pat = sqlite3_value_bytes(argv[1]);
  const auto* rep = sqlite3_value_text(argv[2]);
  if (rep == nullptr) return;
  const size_t n_rep = sqlite3_value_bytes(argv[2]);
  const auto limit =
      static_cast<size_t>(sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1));
  // SQLite allocates n_str + 1 bytes first, and fails once the output outgrows the limit.
  size_t n_out = n_str;
  WorkCheckpoints checkpoints;
  if (n_rep > n_pat) n_out += CountMatches(str, n_str, pat, n_pat, &checkpoints) * (n_rep - n_pat);
  if (checkpoints.stopped()) {
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  if (n_str + 1 > limit || n_out > limit) {
    sqlite3_result_error_toobig(ctx);
    return;
  }
  auto* out = static_cast<char*>(sqlite3_malloc64(n_out + 1));
  if (out == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  const size_t written = WriteReplaced(str, n_str, pat, n_pat, rep, n_rep, out, &checkpoints);
  if (checkpoints.stopped()) {
    sqlite3_free(out);
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  out[written] = '\0';
  sqlite3_result_text64(ctx, out, written, sqlite3_free, SQLITE_UTF8);
}

/// The characters of trim()'s second argument Y, split as SQLite splits them
/// (SQLITE_SKIP_UTF8: a byte >= 0xC0 takes all the continuation bytes that follow it, any
/// other byte is a character alone; Y ends at its first NUL), indexed so that the
/// character SQLite strips at a position of X (the first one in Y's order that matches
/// there) is found in time linear in the bytes looked at. Multi-byte characters are found
/// by a polynomial hash with a random base, and verified with memcmp.
/// Thread-safety: one instance per call. Ownership: points into Y, which must outlive it.
class TrimCharSet {
 public:
  /// QR_REQUIRES: 'y' is NUL-terminated.
  explicit TrimCharSet(const unsigned char* y);

  bool empty() const { return count_ == 0; }
  /// The number of bytes SQLite strips from the front of x[0, n), 0 if none. QR_REQUIRES: n > 0.
  size_t PrefixMatch(const unsigned char* x, size_t n);
  /// The length of x[0, n) once SQLite's right trim has stripped characters from its end.
  size_t TrimRight(const unsigned char* x, size_t n);

 private:
  static constexpr uint64_t kMod = (uint64_t{1} << 61) - 1;
  static constexpr uint32_t kNone = UINT32_MAX;

  /// A distinct multi-byte character of Y and the index of its first occurrence.
  struct Entry {
    const unsigned char* bytes;
    size_t len;
    uint32_t index;
  };

  uint64_t Step(uint64_t hash, unsigned char c) const;
  static uint64_t Key(uint64_t hash, size_t len) { return hash * 31 + len; }
  void Add(const unsigned char* bytes, size_t len, uint32_t index);
  /// Adds to 'hits_' the entries of length 'len' hashed to 'hash' that come before 'best'.
  void CollectHits(uint64_t hash, size_t len, uint32_t best);
  /// The first hit (in Y's order) whose bytes equal 'x'; nullptr if none.
  const Entry* FirstVerifiedHit(const unsigned char* x);
  /// Bytes of the best multi-byte match ending at x[e - 1], given 'best' so far.
  const Entry* SuffixMatch(const unsigned char* x, size_t e, uint32_t best);

  uint32_t count_ = 0;
  uint32_t single_[256];  // index of the first 1-byte character b in Y, or kNone
  std::unordered_multimap<uint64_t, Entry> multi_;
  size_t max_len_ = 0;  // longest multi-byte character
  uint64_t base_ = 0;
  std::vector<Entry> hits_;
  // TrimRight state: the last non-continuation byte below the current end, and the prefix
  // hashes of the run that starts at it.
  size_t lead_ = SIZE_MAX;
  std::vector<uint64_t> lead_hashes_;
};

TrimCharSet::TrimCharSet(const unsigned char* y) {
  std::fill(std::begin(single_), std::end(single_), kNone);
  sqlite3_randomness(sizeof(base_), &base_);
  base_ = base_ % (kMod - 512) + 256;
  for (const unsigned char* z = y; *z != 0; ++count_) {
    const unsigned char* start = z;
    if (*z++ >= 0xC0) {
      while (IsContinuation(*z)) ++z;
    }
    Add(start, z - start, count_);
  }
}

uint64_t TrimCharSet::Step(uint64_t hash, unsigned char c) const {
  const unsigned __int128 product = static_cast<unsigned __int128>(hash) * base_;
  uint64_t r = static_cast<uint64_t>(product & kMod) + static_cast<uint64_t>(product >> 61);
  r = (r >= kMod ? r - kMod : r) + c + 1;
  return r >= kMod ? r - kMod : r;
}

void TrimCharSet::Add(const unsigned char* bytes, size_t len, uint32_t index) {
  if (len == 1) {
    if (single_[bytes[0]] == kNone) single_[bytes[0]] = index;
    return;
  }
  uint64_t hash = 0;
  for (size_t i = 0; i < len; ++i) hash = Step(hash, bytes[i]);
  const uint64_t key = Key(hash, len);
  auto [begin, end] = multi_.equal_range(key);
  for (auto it = begin; it != end; ++it) {
    if (it->second.len == len && memcmp(it->second.bytes, bytes, len) == 0) return;
  }
  multi_.emplace(key, Entry{bytes, len, index});
  max_len_ = std::max(max_len_, len);
}

void TrimCharSet::CollectHits(uint64_t hash, size_t len, uint32_t best) {
  auto [begin, end] = multi_.equal_range(Key(hash, len));
  for (auto it = begin; it != end; ++it) {
    if (it->second.len == len && it->second.index < best) hits_.push_back(it->second);
  }
}

const TrimCharSet::Entry* TrimCharSet::FirstVerifiedHit(const unsigned char* x) {
  // Verifying in Y's order stops at the winner, whose length is what gets stripped; other
  // hits are hash collisions, so verification stays linear in the stripped bytes.
  std::sort(hits_.begin(), hits_.end(),
            [](const Entry& a, const Entry& b) { return a.index < b.index; });
  for (const Entry& hit : hits_) {
    if (memcmp(hit.bytes, x, hit.len) == 0) return &hit;
  }
  return nullptr;
}

size_t TrimCharSet::PrefixMatch(const unsigned char* x, size_t n) {
  uint32_t best = single_[x[0]];
  size_t best_len = best == kNone ? 0 : 1;
  if (x[0] >= 0xC0 && max_len_ > 1) {
    hits_.clear();
    uint64_t hash = Step(0, x[0]);
    for (size_t len = 2; len <= n && len <= max_len_ && IsContinuation(x[len - 1]); ++len) {
      hash = Step(hash, x[len - 1]);
      CollectHits(hash, len, best);
    }
    if (const Entry* hit = FirstVerifiedHit(x)) best_len = hit->len;
  }
  return best_len;
}

const TrimCharSet::Entry* TrimCharSet::SuffixMatch(const unsigned char* x, size_t e,
                                                   uint32_t best) {
  // A multi-byte character ending at x[e - 1] starts at the last non-continuation byte
  // below e. Each byte is scanned once: 'lead_' only moves down as 'e' does.
  if (lead_ == SIZE_MAX || lead_ >= e) {
    size_t i = e;
    while (i > 0 && IsContinuation(x[i - 1])) --i;
    if (i == 0) return nullptr;
    lead_ = i - 1;
    lead_hashes_.clear();
  }
  const size_t len = e - lead_;
  if (x[lead_] < 0xC0 || len > max_len_) return nullptr;
  if (lead_hashes_.empty()) {
    uint64_t hash = 0;
    const size_t n_hashes = std::min(e - lead_, max_len_);
    for (size_t i = 0; i < n_hashes; ++i) lead_hashes_.push_back(hash = Step(hash, x[lead_ + i]));
  }
  hits_.clear();
  CollectHits(lead_hashes_[len - 1], len, best);
  return FirstVerifiedHit(x + lead_);
}

size_t TrimCharSet::TrimRight(const unsigned char* x, size_t n) {
  lead_ = SIZE_MAX;
  while (n > 0) {
    const uint32_t best = single_[x[n - 1]];
    size_t best_len = best == kNone ? 0 : 1;
    if (max_len_ > 1 && IsContinuation(x[n - 1])) {
      if (const Entry* hit = SuffixMatch(x, n, best)) best_len = hit->len;
    }
    if (best_len == 0) break;
    n -= best_len;
  }
  return n;
}

/// trim/ltrim/rtrim(X,Y): SQLite's trimFunc ('flags' 1: left, 2: right, 3: both) with a
/// hashed character set instead of a scan of all of Y's characters at every step.
void TrimFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  const auto* in = sqlite3_value_text(argv[0]);
  if (in == nullptr) return;
  size_t n_in = sqlite3_value_bytes(argv[0]);
  // Linear, but a trim of 2 MiB of spaces takes milliseconds and allocates nothing: a row of
  // many such calls checks between them.
  if (StepCheckpoint::Charge(n_in)) {
    sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    return;
  }
  // The one-argument forms trim spaces, as trim(X, ' ') does.
  const auto* char_set =
      argc == 1 ? reinterpret_cast<const unsigned char*>(" ") : sqlite3_value_text(argv[1]);
  if (char_set == nullptr) return;
  TrimCharSet set(char_set);
  if (!set.empty()) {
    const auto flags = reinterpret_cast<intptr_t>(sqlite3_user_data(ctx));
    if (flags & 1) {
      while (n_in > 0) {
        const size_t len = set.PrefixMatch(in, n_in);
        if (len == 0) break;
        in += len;
        n_in -= len;
      }
    }
    if (flags & 2) n_in = set.TrimRight(in, n_in);
  }
  sqlite3_result_text64(ctx, reinterpret_cast<const char*>(in), n_in, SQLITE_TRANSIENT,
                        SQLITE_UTF8);
}

/// zeroblob(N) as SQLite's, registered without SQLITE_DETERMINISTIC: a deterministic call
/// with a constant argument is factored out of the row loop, and the OP_Copy that moves its
/// result into the row expands the zero-blob, so `SELECT zeroblob(16000000) c0, ..., c59`
/// allocated ~1 GB of SQLite heap inside sqlite3_step(), before the engine could check the
/// row. Computed in place, the blob stays a count of zeros until the engine reads it, and the
/// row's size is checked against the memory budgets first.
void ZeroblobFunction(sqlite3_context* ctx, int, sqlite3_value** argv) {
  sqlite3_int64 n = sqlite3_value_int64(argv[0]);
  if (n < 0) n = 0;
  const int rc = sqlite3_result_zeroblob64(ctx, static_cast<sqlite3_uint64>(n));
  if (rc != SQLITE_OK) sqlite3_result_error_code(ctx, rc);
}

struct Override {
  const char* name;
  int n_args;
  intptr_t user_data;
  void (*function)(sqlite3_context*, int, sqlite3_value**);
};

constexpr Override kOverrides[] = {
    {"instr", 2, 0, &InstrFunction},  {"replace", 3, 0, &ReplaceFunction},
    {"ltrim", 2, 1, &TrimFunction},   {"rtrim", 2, 2, &TrimFunction},
    {"trim", 2, 3, &TrimFunction},    {"ltrim", 1, 1, &TrimFunction},
    {"rtrim", 1, 2, &TrimFunction},   {"trim", 1, 3, &TrimFunction},
};

}  // namespace

Status RegisterLinearTimeFunctions(sqlite3* db) {
  QR_RETURN_IF_ERROR(RegisterLinearTimeLikeGlob(db));
  QR_RETURN_IF_ERROR(RegisterCheckedTextWalks(db));
  if (sqlite3_create_function_v2(db, "zeroblob", 1, SQLITE_UTF8 | SQLITE_INNOCUOUS, nullptr,
                                 &ZeroblobFunction, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Internal(std::string("cannot register zeroblob(): ") + sqlite3_errmsg(db));
  }
  for (const Override& f : kOverrides) {
    if (sqlite3_create_function_v2(db, f.name, f.n_args, kFunctionFlags,
                                   reinterpret_cast<void*>(f.user_data), f.function, nullptr,
                                   nullptr, nullptr) != SQLITE_OK) {
      return Internal(std::string("cannot register the linear-time ") + f.name +
                      "(): " + sqlite3_errmsg(db));
    }
  }
  return Status::OK();
}

void ApplyCpuBoundingLimits(sqlite3* db) {
  sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, kLikePatternLengthLimit);
}

}  // namespace qr
