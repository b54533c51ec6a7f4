#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "status.h"

namespace qr {

/// A 128-bit id of a query (and, in its low 32 bits of 'lo', of a fragment instance).
/// Printed as 16 hex digits, ':', 16 hex digits, like Impala's TUniqueId.
struct UniqueId {
  uint64_t hi = 0;
  uint64_t lo = 0;

  constexpr bool operator==(const UniqueId&) const = default;
  constexpr bool operator<(const UniqueId& o) const {
    return hi < o.hi || (hi == o.hi && lo < o.lo);
  }
};

/// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/// Hash for hash maps keyed by UniqueId; good in all 64 bits (open-addressing tables use both
/// the high and the low bits).
struct UniqueIdHash {
  size_t operator()(const UniqueId& id) const {
    return Mix64(id.hi ^ (id.lo * 0x9e3779b97f4a7c15ULL));
  }
};

/// A new random query id. Uses a per-thread Mersenne Twister seeded once from the OS, so no
/// system call is made per id. The low 32 bits of 'lo' are zero. A child of fork() draws new
/// seeds (its ids are not its parent's).
/// Thread-safety: thread-safe.
UniqueId GenerateQueryId();

/// Owner-routed ids (a cluster of coordinators, docs/operations.md#cluster): the member id of
/// the coordinator that owns a query is kept in bits 48..63 of 'lo', above the fragment bits
/// (0..31) and 16 random bits (32..47). 'hi' stays random, so the registry's shard choice (from
/// 'hi' alone) is the same with or without an owner. 0 means no owner: a coordinator that runs
/// alone, or one that has no member id yet.
inline constexpr int kQueryOwnerShift = 48;
inline constexpr uint32_t kMaxQueryOwner = 0xffff;

/// 'id' with 'owner' (at most kMaxQueryOwner) in its owner bits; the other bits unchanged.
constexpr UniqueId WithQueryOwner(UniqueId id, uint32_t owner) {
  constexpr uint64_t kMask = uint64_t{kMaxQueryOwner} << kQueryOwnerShift;
  id.lo = (id.lo & ~kMask) | ((uint64_t{owner} & kMaxQueryOwner) << kQueryOwnerShift);
  return id;
}

/// The member id of the coordinator that owns 'id' (0: none).
constexpr uint32_t QueryOwner(const UniqueId& id) {
  return static_cast<uint32_t>(id.lo >> kQueryOwnerShift) & kMaxQueryOwner;
}

/// GenerateQueryId() owned by member 'owner' (0: no owner).
inline UniqueId GenerateQueryId(uint32_t owner) {
  return WithQueryOwner(GenerateQueryId(), owner);
}

/// A random 64-bit value from the same per-thread generator (not for secrets).
uint64_t RandomU64();

/// A random 64-bit value from the OS's cryptographic generator, for secrets such as the nextUri
/// slug. Served from a per-thread pool refilled by getrandom(2): one system call per 64 values.
/// A child of fork() refills its pool (it never serves the values its parent serves).
uint64_t SecureRandomU64();

/// "%016x:%016x", lowercase.
std::string PrintId(const UniqueId& id);
/// Writes the 33 characters of PrintId into 'out' (no terminator).
void PrintId(const UniqueId& id, char out[33]);

/// Parses exactly 16 hex digits, ':', 16 hex digits (either case). Anything else (empty halves,
/// signs, spaces, a prefix such as 0x, more or fewer digits) is an InvalidArgument error whose
/// message quotes the (truncated) input.
Status ParseId(std::string_view s, UniqueId* out);

}  // namespace qr

template <>
struct std::hash<qr::UniqueId> {
  size_t operator()(const qr::UniqueId& id) const { return qr::UniqueIdHash()(id); }
};
