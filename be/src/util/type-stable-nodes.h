#pragma once

// TypeStableNodes: memory for the nodes of a registry read without a lock (issue 20, item 3).
// A node is allocated once and never freed while its TypeStableNodes lives: a reader that holds
// a stale pointer to a node (its lookup raced with the node's end and reuse) may still touch the
// node's atomics, so a node is only handed back (Put) for a later Take, never unmapped. Used by
// runtime/stable-query-registry.h (the executor's states, one TypeStableNodes per registry) and
// util/stable-ref-registry.h (the coordinator's requests, one per type for the process).
//
// Thread-safety: Take and Put are thread-safe; ForEachNode takes the allocation lock.
// Ownership: owns the node memory; the nodes' contents (a state built in a node) are the
// caller's, which must destroy what it built before the TypeStableNodes is destroyed.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include <sys/mman.h>

#include <glog/logging.h>

#if defined(__SANITIZE_ADDRESS__)
#define QR_TYPE_STABLE_NODES_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define QR_TYPE_STABLE_NODES_LSAN 1
#endif
#endif
#ifdef QR_TYPE_STABLE_NODES_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// Where the nodes live (docs/benchmarks.md, "Node memory and the guessed count").
/// kNew: one allocation per node, operator new with the node's 64-byte alignment. glibc's
///   memalign gives the 1,024-byte node a 1,152-byte stride, so the nodes' first lines (the
///   count and the id, which every lookup touches) all fall in half of the cache sets.
/// kSlabs: 2 MiB slabs mapped as the registry grows, never unmapped while it lives; nodes at a
///   stride of an odd number of cache lines (their first lines spread over every set); a page
///   is faulted in when a node on it is first used.
/// kHugeSlabs: the same slabs, 2 MiB-aligned and advised as transparent huge pages
///   (MADV_HUGEPAGE; advice only, without THP they keep 4 KiB pages). A lookup's node then
///   costs no page walk of its own: 100,000 live states fill 52 huge pages, not 27,000 pages.
enum class NodeMemory { kNew, kSlabs, kHugeSlabs };

/// 'Node': default-constructible, alignas(64).
template <class Node, NodeMemory kNodes>
class TypeStableNodes {
 public:
  TypeStableNodes() = default;
  /// Unmaps the slabs (kNew: frees the nodes). The caller destroyed what it built in them.
  ~TypeStableNodes() {
    if constexpr (kNodes != NodeMemory::kNew) {
      MutexLock l(&mu_);
      for (void* slab : slabs_) {
#ifdef QR_TYPE_STABLE_NODES_LSAN
        __lsan_unregister_root_region(slab, kSlabBytes);
#endif
        munmap(slab, kSlabBytes);
      }
    }
  }
  TypeStableNodes(const TypeStableNodes&) = delete;
  TypeStableNodes& operator=(const TypeStableNodes&) = delete;

  /// A node handed back earlier, or a new one (default-constructed): the calling thread's pool
  /// first (a thread that ends what it created takes its nodes back without meeting another
  /// thread), then the other pools, then new memory.
  Node* Take() {
    const size_t mine = PoolIndex();
    for (size_t i = 0; i < kPools; ++i) {
      Pool& p = pools_[(mine + i) % kPools];
      MutexLock l(&p.mu);
      if (!p.free.empty()) {
        Node* n = p.free.back();
        p.free.pop_back();
        return n;
      }
    }
    MutexLock l(&mu_);
    if constexpr (kNodes == NodeMemory::kNew) {
      nodes_.push_back(std::make_unique<Node>());
      bytes_.fetch_add(sizeof(Node), std::memory_order_relaxed);
      return nodes_.back().get();
    } else {
      if (slabs_.empty() || slab_used_ == kNodesPerSlab) {
        slabs_.push_back(MapSlab());
        slab_used_ = 0;
        bytes_.fetch_add(kSlabBytes, std::memory_order_relaxed);
      }
      return new (SlabNode(slabs_.size() - 1, slab_used_++)) Node;
    }
  }
  /// Hands 'n' back for a later Take (its contents as the caller left them).
  void Put(Node* n) {
    Pool& p = pools_[PoolIndex()];
    MutexLock l(&p.mu);
    p.free.push_back(n);
  }

  /// Calls 'fn(Node*)' on every node ever taken, under the allocation lock (no Take of a new
  /// node meanwhile).
  template <typename Fn>
  void ForEachNode(Fn fn) {
    MutexLock l(&mu_);
    if constexpr (kNodes == NodeMemory::kNew) {
      for (const std::unique_ptr<Node>& n : nodes_) fn(n.get());
    } else {
      for (size_t s = 0; s < slabs_.size(); ++s) {
        const size_t used = s + 1 < slabs_.size() ? kNodesPerSlab : slab_used_;
        for (size_t i = 0; i < used; ++i) fn(SlabNode(s, i));
      }
    }
  }

  /// Nodes a slab holds (kSlabs, kHugeSlabs).
  static constexpr size_t NodesPerSlab() { return kNodesPerSlab; }
  /// Bytes of node memory held (mapped slabs, or allocated nodes for kNew).
  size_t Bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static_assert(alignof(Node) == 64 && sizeof(Node) % 64 == 0,
                "nodes are whole cache lines (alignas(64))");

  /// Node 'i' of slab 's'.
  Node* SlabNode(size_t s, size_t i) QR_REQUIRES(mu_) {
    return reinterpret_cast<Node*>(static_cast<unsigned char*>(slabs_[s]) + i * kNodeStride);
  }
  /// A new slab of kSlabBytes (2 MiB-aligned for kHugeSlabs: 2 MiB more are mapped and the
  /// ends unmapped).
  static void* MapSlab() {
    const size_t extra = kNodes == NodeMemory::kHugeSlabs ? kSlabBytes : 0;
    void* p = mmap(nullptr, kSlabBytes + extra, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PCHECK(p != MAP_FAILED) << "mmap of a " << kSlabBytes << "-byte node slab";
    if constexpr (kNodes == NodeMemory::kHugeSlabs) {
      const uintptr_t start = reinterpret_cast<uintptr_t>(p);
      const uintptr_t aligned = (start + kSlabBytes - 1) & ~(kSlabBytes - 1);
      if (aligned > start) munmap(p, aligned - start);
      if (aligned + kSlabBytes < start + 2 * kSlabBytes) {
        munmap(reinterpret_cast<void*>(aligned + kSlabBytes), start + kSlabBytes - aligned);
      }
      p = reinterpret_cast<void*>(aligned);
      // Advice only: without transparent huge pages the slab keeps 4 KiB pages.
      madvise(p, kSlabBytes, MADV_HUGEPAGE);
    }
#ifdef QR_TYPE_STABLE_NODES_LSAN
    // What the nodes' contents allocate is referenced from here only: LeakSanitizer scans the
    // heap, not anonymous mappings.
    __lsan_register_root_region(p, kSlabBytes);
#endif
    return p;
  }
  /// The calling thread's pool: threads take pools in turn as they first use one.
  static size_t PoolIndex() {
    static std::atomic<size_t> next{0};
    thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % kPools;
    return index;
  }

  Mutex mu_;
  /// Every node ever allocated (kNew).
  std::vector<std::unique_ptr<Node>> nodes_ QR_GUARDED_BY(mu_);
  /// kSlabs, kHugeSlabs: the slabs, the last one holding 'slab_used_' nodes so far.
  static constexpr size_t kSlabBytes = size_t{2} << 20;
  static constexpr size_t kNodeStride =
      (sizeof(Node) / 64) % 2 == 0 ? sizeof(Node) + 64 : sizeof(Node);
  static constexpr size_t kNodesPerSlab = kSlabBytes / kNodeStride;
  std::vector<void*> slabs_ QR_GUARDED_BY(mu_);
  size_t slab_used_ QR_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> bytes_{0};
  /// Nodes handed back, for reuse (one pool per thread, threads sharing pools beyond kPools:
  /// the pool's mutex is then theirs alone, where one pool's was every writer's).
  static constexpr size_t kPools = 16;
  struct alignas(64) Pool {
    Mutex mu;
    std::vector<Node*> free QR_GUARDED_BY(mu);
  };
  Pool pools_[kPools];
};

}  // namespace qr
