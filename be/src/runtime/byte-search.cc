#include "runtime/byte-search.h"

#include <sqlite3.h>
#include <string.h>

#include <algorithm>

namespace qr {
namespace {

constexpr uint64_t kMod = (uint64_t{1} << 61) - 1;

uint64_t MulMod(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  uint64_t r = static_cast<uint64_t>(product & kMod) + static_cast<uint64_t>(product >> 61);
  r = (r & kMod) + (r >> 61);
  return r == kMod ? 0 : r;
}

uint64_t AddMod(uint64_t a, uint64_t b) {
  const uint64_t r = a + b;
  return r >= kMod ? r - kMod : r;
}

uint64_t Base() {
  static const uint64_t base = [] {
    uint64_t b = 0;
    sqlite3_randomness(sizeof(b), &b);
    return b % (kMod - 512) + 256;
  }();
  return base;
}

size_t ShortSearch(const unsigned char* hay, size_t n, const unsigned char* needle, size_t m,
                   WorkCheckpoints* checkpoints) {
  const size_t positions = n - m + 1;
  for (size_t start = 0; start < positions; start += kCheckpointBytes) {
    const size_t window = std::min(kCheckpointBytes, positions - start);
    const void* found = memmem(hay + start, window + m - 1, needle, m);
    if (found != nullptr) return static_cast<const unsigned char*>(found) - hay;
    if (checkpoints->Advance(window)) return SIZE_MAX;
  }
  return SIZE_MAX;
}

size_t RabinKarp(const unsigned char* hay, size_t n, const unsigned char* needle, size_t m,
                 WorkCheckpoints* checkpoints) {
  const uint64_t base = Base();
  uint64_t target = 0;
  uint64_t hash = 0;
  uint64_t top = 1;  // base^(m - 1): the weight of the byte leaving the window
  for (size_t i = 0; i < m; ++i) {
    target = AddMod(MulMod(target, base), needle[i] + 1);
    hash = AddMod(MulMod(hash, base), hay[i] + 1);
    if (i > 0) top = MulMod(top, base);
  }
  if (checkpoints->Advance(m)) return SIZE_MAX;
  const size_t last = n - m;
  for (size_t p = 0;; ++p) {
    if (hash == target && memcmp(hay + p, needle, m) == 0) return p;
    if (p == last) return SIZE_MAX;
    if ((p & (kCheckpointBytes - 1)) == kCheckpointBytes - 1 &&
        checkpoints->Advance(kCheckpointBytes)) {
      return SIZE_MAX;
    }
    hash = AddMod(hash, kMod - MulMod(hay[p] + 1, top));
    hash = AddMod(MulMod(hash, base), hay[p + m] + 1);
  }
}

}  // namespace

size_t FindBytes(const unsigned char* hay, size_t n, const unsigned char* needle, size_t m,
                 WorkCheckpoints* checkpoints) {
  if (m > n) return SIZE_MAX;
  return m <= kShortNeedle ? ShortSearch(hay, n, needle, m, checkpoints)
                           : RabinKarp(hay, n, needle, m, checkpoints);
}

}  // namespace qr
