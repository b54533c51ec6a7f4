// The boost::concurrent_flat_map variant of process-wide-locks-benchmark (see boost-peer.h).
// Include Boost 1.88 first and nothing that includes the project's Boost 1.74.
#include <boost/unordered/concurrent_flat_map.hpp>
#include <boost/version.hpp>

#include <utility>
#include <vector>

#include "benchmarks/boost-peer.h"
#include "benchmarks/map-benchmark-templates.h"

static_assert(BOOST_VERSION == 108800,
              "boost-peer.cc must be compiled against the Boost 1.88 headers of "
              "scripts/fetch-boost-headers.sh, not the system Boost");

namespace qr::bench {
namespace {

/// UniqueIdHash under a name with internal linkage: every instantiation of the map's table is
/// then local to this object (the boost-peer-symbols test).
struct PeerHash {
  size_t operator()(const UniqueId& id) const { return UniqueIdHash()(id); }
};

/// boost::concurrent_flat_map (Boost 1.88): open addressing in groups of 15 slots, each group
/// with its own spin reader-writer lock (eight to a cache line), plus a table-wide
/// reader-writer lock that every operation takes shared (per-thread slots) and a rehash takes
/// exclusively. A lookup is cvisit(): the group's lock shared while the visitor copies the
/// value out. The project's UniqueIdHash (as PeerHash). The adapter of registry-variants.h's interface; thread-safe.
template <typename T>
class BoostConcurrentFlatMap {
 public:
  explicit BoostConcurrentFlatMap(int /*num_shards*/) {}

  bool Add(const UniqueId& id, T v) { return map_.emplace(id, std::move(v)); }
  [[gnu::always_inline]] bool Get(const UniqueId& id, T* out) const {
    return map_.cvisit(id, [out](const auto& kv) { *out = kv.second; }) != 0;
  }
  bool Delete(const UniqueId& id) { return map_.erase(id) == 1; }
  template <typename Fn>
  void ForEachLocked(Fn&& fn) {
    map_.cvisit_all([&fn](const auto& kv) { fn(kv.first, kv.second); });
  }
  template <typename Fn>
  void ForEachSnapshot(Fn&& fn) {
    std::vector<std::pair<UniqueId, T>> copy;
    copy.reserve(map_.size());
    map_.cvisit_all([&copy](const auto& kv) { copy.emplace_back(kv.first, kv.second); });
    for (auto& [id, v] : copy) fn(id, v);
  }

 private:
  boost::concurrent_flat_map<UniqueId, T, PeerHash> map_;
};

}  // namespace

Variant MakeBoostConcurrentFlatMapVariant() {
  return MakeVariant<BoostConcurrentFlatMap<Value>>("BoostConcurrentFlatMap", 1);
}

}  // namespace qr::bench
