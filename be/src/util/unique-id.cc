#include "util/unique-id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid.hpp>

namespace qr {
namespace {

boost::uuids::random_generator_mt19937& ThreadGenerator() {
  // Seeded once per thread from the OS entropy source; afterwards pure user-space arithmetic.
  // (boost::uuids::random_generator would call getrandom() for every id.)
  thread_local boost::uuids::random_generator_mt19937 gen;
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
  boost::uuids::uuid u = ThreadGenerator()();
  UniqueId id;
  std::memcpy(&id.hi, u.data, 8);
  std::memcpy(&id.lo, u.data + 8, 8);
  id.lo &= 0xffffffff00000000ULL;
  return id;
}

uint64_t RandomU64() {
  boost::uuids::uuid u = ThreadGenerator()();
  uint64_t v;
  // Bytes 0..5 and 10..15 are untouched by the UUID version/variant bits.
  std::memcpy(&v, u.data, 6);
  v ^= static_cast<uint64_t>(u.data[10]) << 48 ^ static_cast<uint64_t>(u.data[11]) << 56;
  return v;
}

uint64_t SecureRandomU64() {
  thread_local uint64_t pool[64];
  thread_local int next = 64;
  if (next == 64) {
    size_t filled = 0;
    char* buf = reinterpret_cast<char*>(pool);
    while (filled < sizeof(pool)) {
      ssize_t n = getrandom(buf + filled, sizeof(pool) - filled, 0);
      if (n < 0 && errno == EINTR) continue;
      PCHECK(n > 0) << "getrandom failed";
      filled += static_cast<size_t>(n);
    }
    next = 0;
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
