#pragma once

// StableRef<T> and StableRefRegistry<T>: reference-counted objects in type-stable memory, and a
// registry of them by id whose lookups take no lock and store nothing but the reference they
// take (issue 20, item 3). This is the coordinator's shape: an object is registered (Add) and
// unregistered (Delete) explicitly, and lives as long as anyone holds a reference to it,
// registered or not (std::shared_ptr's shape, with the registry's lookups made lock-free).
// runtime/stable-query-registry.h is the executor's shape, where the last reference
// unregisters. docs/architecture.md, "The coordinator's registry".
//
// An object lives in a node of TypeStableNodes (one for each T, for the process: a reference
// may outlive every registry). The node's first line holds the count word and the id, which
// outlive the object: a lookup that raced with the object's end and the node's reuse touches
// only them. The count word is rcuref's, as RefTake::kAdd (stable-query-registry.h): a
// generation (high 32 bits) and a count (low 32 bits), a count of kDeadCount or more dead (the
// node pooled). A lookup adds one to the count of the node it found (one locked add, which cannot
// fail) and keeps the reference when the count was live and the node still holds the id it
// looked up (the map's shard unchanged since the find, else the node's id equal). The last
// release decrements to 0 and marks the count dead with a CAS from (its generation, 0); a lookup
// that added to that 0 first made the CAS fail and holds the object, whose next last release
// tries again. Then it destroys the object and pools the node.
//
// Thread-safety: StableRef is as thread-safe as std::shared_ptr (distinct handles to one object
// may be used, copied and dropped concurrently; one handle is not); StableRefRegistry is
// thread-safe. Ownership: every StableRef and a registry that holds the object own one reference.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "util/seqlock-tag-map.h"
#include "util/sharded-query-map-util.h"
#include "util/type-stable-nodes.h"
#include "util/unique-id.h"

namespace qr {

template <class T>
class StableRef;

namespace stable_ref_internal {

/// A count of this or more (the low 32 bits of the count word) is dead.
inline constexpr uint32_t kDeadCount = uint32_t{1} << 31;

template <class T>
struct alignas(64) Node {
  /// The generation (high 32 bits) and the references (low 32 bits; kDeadCount or more: the
  /// node holds no object, none can be taken).
  std::atomic<uint64_t> refs{kDeadCount};
  /// The id the object was made with (outlives it: stale lookups compare it).
  std::atomic<uint64_t> hi{0};
  std::atomic<uint64_t> lo{0};
  alignas(T) unsigned char storage[sizeof(T)];

  T* object() { return std::launder(reinterpret_cast<T*>(storage)); }
  /// A lookup's reference: kept unless the count was dead (acquire: from the publication of the
  /// object, or a release that came before).
  bool TryRef() {
    const uint64_t before = refs.fetch_add(1, std::memory_order_acquire);
    return static_cast<uint32_t>(before) < kDeadCount;
  }
  /// One more reference where the caller holds one (the count is live and stays so).
  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
};

/// Every node of type T, for the process. Never destroyed: a reference may be dropped during
/// static destruction (LeakSanitizer sees the slabs as root regions, not as leaks).
template <class T>
TypeStableNodes<Node<T>, NodeMemory::kHugeSlabs>& NodesOf() {
  static auto* nodes = new TypeStableNodes<Node<T>, NodeMemory::kHugeSlabs>();
  return *nodes;
}

}  // namespace stable_ref_internal

/// Test seams of StableRef<T>'s last release, here doing nothing.
template <class T>
struct StableRefTesting {
  /// Called between the last release's decrement to 0 and its mark of the count as dead (set
  /// while no reference is being dropped).
  static inline void (*before_mark_dead)() = nullptr;
};

/// A counted reference to a T in type-stable memory, with std::shared_ptr's interface (the
/// parts the coordinator uses). Made by MakeStable; copied by a relaxed add; the last one
/// dropped destroys the T.
template <class T>
class StableRef {
 public:
  StableRef() noexcept = default;
  StableRef(std::nullptr_t) noexcept {}  // NOLINT: converts like shared_ptr's
  StableRef(const StableRef& o) noexcept : n_(o.n_) {
    if (n_ != nullptr) n_->Ref();
  }
  StableRef(StableRef&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  StableRef& operator=(const StableRef& o) noexcept {
    StableRef(o).swap(*this);
    return *this;
  }
  StableRef& operator=(StableRef&& o) noexcept {
    StableRef(std::move(o)).swap(*this);
    return *this;
  }
  ~StableRef() {
    if (n_ != nullptr) Release(n_);
  }

  T* get() const noexcept { return n_ == nullptr ? nullptr : n_->object(); }
  T& operator*() const noexcept { return *n_->object(); }
  T* operator->() const noexcept { return n_->object(); }
  explicit operator bool() const noexcept { return n_ != nullptr; }
  void reset() noexcept { StableRef().swap(*this); }
  void swap(StableRef& o) noexcept { std::swap(n_, o.n_); }

  friend bool operator==(const StableRef& a, const StableRef& b) noexcept { return a.n_ == b.n_; }
  friend bool operator==(const StableRef& a, std::nullptr_t) noexcept { return a.n_ == nullptr; }

  /// Objects of type T made and not destroyed yet (for tests and /metrics).
  static int64_t Live() { return live_.load(std::memory_order_relaxed); }
  /// Bytes of type-stable memory held for T's nodes (2 MiB slabs, for the peak of live objects;
  /// kept until exit).
  static size_t NodeBytes() { return stable_ref_internal::NodesOf<T>().Bytes(); }

 private:
  using Node = stable_ref_internal::Node<T>;
  template <class U, class... Args>
  friend StableRef<U> MakeStable(const UniqueId& id, Args&&... args);
  template <class U, class Seams>
  friend class StableRefRegistry;

  /// Adopts a reference the caller took.
  explicit StableRef(Node* n) noexcept : n_(n) {}

  static void Release(Node* n) {
    // acq_rel: the thread that drops the last reference sees what every other holder wrote.
    const uint64_t before = n->refs.fetch_sub(1, std::memory_order_acq_rel);
    DCHECK_GT(static_cast<uint32_t>(before), 0u);
    DCHECK_LT(static_cast<uint32_t>(before), stable_ref_internal::kDeadCount);
    if (static_cast<uint32_t>(before) == 1) [[unlikely]] End(n, before - 1);
  }
  /// After the decrement to 0 (out of line: it keeps the release's fast path free of spills).
  [[gnu::noinline]] static void End(Node* n, uint64_t zero) {
    if (StableRefTesting<T>::before_mark_dead != nullptr) StableRefTesting<T>::before_mark_dead();
    // A lookup that added to the 0 holds the object now (its last release ends it).
    if (!n->refs.compare_exchange_strong(zero, zero | stable_ref_internal::kDeadCount,
                                         std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    n->object()->~T();
    live_.fetch_sub(1, std::memory_order_relaxed);
    stable_ref_internal::NodesOf<T>().Put(n);
  }

  Node* n_ = nullptr;
  static inline std::atomic<int64_t> live_{0};
};

/// A new T built from 'args' in a pooled node, with one reference; 'id' is what registries file
/// it under (the coordinator passes the request's query id).
template <class T, class... Args>
StableRef<T> MakeStable(const UniqueId& id, Args&&... args) {
  using Node = stable_ref_internal::Node<T>;
  Node* n = stable_ref_internal::NodesOf<T>().Take();
  new (n->storage) T(std::forward<Args>(args)...);
  StableRef<T>::live_.fetch_add(1, std::memory_order_relaxed);
  n->hi.store(id.hi, std::memory_order_relaxed);
  n->lo.store(id.lo, std::memory_order_relaxed);
  // Publishes the object and the id: a new generation with a count of 1 over the dead count the
  // node had (stale lookups' adds included, which changed no live count).
  const uint64_t generation = (n->refs.load(std::memory_order_relaxed) >> 32) + 1;
  n->refs.store(generation << 32 | 1, std::memory_order_release);
  return StableRef<T>(n);
}

/// Test seams of StableRefRegistry, here doing nothing.
struct NoStableRefSeams {
  /// In a lookup, between its find and its reference.
  template <class Registry>
  static void AfterFind(const Registry*) {}
};

/// A registry of StableRef<T>s by the id each was made with: Add and Delete take the shard's
/// writers' lock, Get takes no lock (a SeqlockQueryMap read, then the node's count).
/// Thread-safety: thread-safe. Ownership: holds one reference to every registered object.
template <class T, class Seams = NoStableRefSeams>
class StableRefRegistry {
 public:
  explicit StableRefRegistry(int num_shards) : map_(num_shards) {}
  /// Drops the references of the objects still registered.
  ~StableRefRegistry() {
    std::vector<Node*> left;
    map_.ForEachValue([&](Node* n) { left.push_back(n); });
    for (Node* n : left) StableRef<T>::Release(n);
  }
  StableRefRegistry(const StableRefRegistry&) = delete;
  StableRefRegistry& operator=(const StableRefRegistry&) = delete;

  /// Registers 'ref' (non-null) under its id; false if that id is registered.
  bool Add(const StableRef<T>& ref) {
    Node* n = ref.n_;
    DCHECK(n != nullptr);
    n->Ref();  // The registry's.
    if (map_.Add(IdOf(n), n)) return true;
    n->refs.fetch_sub(1, std::memory_order_relaxed);  // 'ref' still holds one.
    return false;
  }
  /// Unregisters 'id' and drops the registry's reference; false if 'id' is not registered.
  bool Delete(const UniqueId& id) {
    Node* n = nullptr;
    if (!map_.Delete(id, &n)) return false;
    StableRef<T>::Release(n);
    return true;
  }

  /// A new reference to the object registered under 'id', or null.
  StableRef<T> Get(const UniqueId& id) const {
    for (;;) {
      Node* n = nullptr;
      typename Map::Ticket ticket;
      if (!map_.Get(id, &n, &ticket)) return {};
      Seams::AfterFind(this);
      // Dead: the object was unregistered and has ended (the registry's reference is dropped
      // only after its Delete), so 'id' is not registered.
      if (!n->TryRef()) return {};
      StableRef<T> ref(n);
      // The shard unchanged: 'id' is still registered to 'n' (a node is reused only after its
      // object's Delete, which changed the shard's version; the reference acquired the count
      // from the node's new owner, which came after that Delete, so this load sees it).
      if (Map::Unchanged(ticket)) [[likely]] return ref;
      // The node holds the object found (registered when found, maybe unregistered since: the
      // lookup came first), or another one now, which the reference is dropped from.
      if (n->hi.load(std::memory_order_relaxed) == id.hi &&
          n->lo.load(std::memory_order_relaxed) == id.lo) {
        return ref;
      }
    }
  }

  /// References to every registered object (each shard walked under its writers' lock).
  std::vector<StableRef<T>> Snapshot() const {
    std::vector<StableRef<T>> out;
    out.reserve(map_.Count());
    map_.ForEachValue([&](Node* n) {
      n->Ref();  // The registry's reference keeps the count live.
      out.push_back(StableRef<T>(n));
    });
    return out;
  }

  /// Registered objects (exact when nothing is added or deleted meanwhile).
  uint64_t Count() const { return map_.Count(); }
  int num_shards() const { return map_.num_shards(); }
  /// The map's statistics of one shard (entries, writer-lock acquisitions; lookups take none).
  ShardStats GetShardStats(int shard) const { return map_.GetShardStats(shard); }

 private:
  using Node = stable_ref_internal::Node<T>;
  using Map = SeqlockQueryMap<Node*>;

  static UniqueId IdOf(const Node* n) {
    return UniqueId{n->hi.load(std::memory_order_relaxed), n->lo.load(std::memory_order_relaxed)};
  }

  Map map_;
};

}  // namespace qr
