#include "util/unique-id.h"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace qr {
namespace {

/// Fills 'buf' from the OS's cryptographic generator (getrandom(2)); aborts if it fails, which
/// on Linux >= 3.17 it does not once the pool is initialized.
void FillFromOs(void* buf, size_t len) {
  size_t filled = 0;
  char* out = static_cast<char*>(buf);
  while (filled < len) {
    ssize_t n = getrandom(out + filled, len - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    filled += static_cast<size_t>(n);
  }
}

/// Bumped in the child of every fork(): a thread's generator and secure pool, inherited from
/// the parent, would otherwise give the child the very ids and secrets the parent gets next.
std::atomic<uint64_t> fork_generation{0};
[[maybe_unused]] const bool fork_handler_registered = [] {
  pthread_atfork(nullptr, nullptr,
                 [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

std::mt19937_64 SeededGenerator() {
  // The generator's whole 312-word state, through a seed_seq of 8 words from the OS.
  uint32_t seed[8];
  FillFromOs(seed, sizeof(seed));
  std::seed_seq seq(std::begin(seed), std::end(seed));
  return std::mt19937_64(seq);
}

std::mt19937_64& ThreadGenerator() {
  // Seeded once per thread (and again after a fork) from the OS entropy source; otherwise pure
  // user-space arithmetic and one relaxed load, no system call per id.
  thread_local std::mt19937_64 gen = SeededGenerator();
  thread_local uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  const uint64_t now = fork_generation.load(std::memory_order_relaxed);
  if (generation != now) {
    gen = SeededGenerator();
    generation = now;
  }
  return gen;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseHalf(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  for (char c : s) {
    int d = HexValue(c);
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

UniqueId GenerateQueryId() {
  std::mt19937_64& gen = ThreadGenerator();
  UniqueId id;
  id.hi = gen();
  id.lo = gen() & 0xffffffff00000000ULL;
  return id;
}

uint64_t RandomU64() { return ThreadGenerator()(); }

uint64_t SecureRandomU64() {
  thread_local uint64_t pool[64];
  thread_local int next = 64;
  thread_local uint64_t generation = 0;
  const uint64_t now = fork_generation.load(std::memory_order_relaxed);
  if (next == 64 || generation != now) {
    FillFromOs(pool, sizeof(pool));
    next = 0;
    generation = now;
  }
  return pool[next++];
}

void PrintId(const UniqueId& id, char out[33]) {
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) out[i] = kHex[(id.hi >> (60 - 4 * i)) & 0xf];
  out[16] = ':';
  for (int i = 0; i < 16; ++i) out[17 + i] = kHex[(id.lo >> (60 - 4 * i)) & 0xf];
}

std::string PrintId(const UniqueId& id) {
  std::string s(33, '\0');
  PrintId(id, s.data());
  return s;
}

Status ParseId(std::string_view s, UniqueId* out) {
  UniqueId id;
  if (s.size() != 33 || s[16] != ':' || !ParseHalf(s.substr(0, 16), &id.hi) ||
      !ParseHalf(s.substr(17), &id.lo)) {
    return InvalidArgument("invalid query id " + QuoteForError(s) +
                           ": expected 16 hex digits, ':', 16 hex digits "
                           "(e.g. 4d1f3a2b5c6d7e8f:9a0b1c2d00000000)");
  }
  *out = id;
  return Status::OK();
}

}  // namespace qr
