#pragma once

// HazardQueryRegistry: QueryExecMgr's reference counting over a SeqlockTagMap, the question
// docs/benchmarks.md leaves for adopting a reader that stores nothing (issue 20): what does the
// executor's lookup, which must take a reference to the QueryState it finds, gain when the map
// itself is read without a lock? A benchmark variant for BM_QueryLifecycle, not the registry.
//
// A Get finds the state optimistically, publishes it in the thread's hazard record (its own
// cache line), checks that no writer has changed the state's shard since (its seqlock version:
// one load; the state is still registered), then takes a reference unless the count is already
// 0, and clears the record. The last Release unregisters the state and retires it; once the
// retired states outnumber twice the records, that Release runs membarrier(PRIVATE_EXPEDITED),
// reads every record and deletes the retired states no record holds (a held one waits for the
// next scan or the destructor). So a reader needs only a compiler barrier between its
// publication and its check (the asymmetric Dekker handshake), and the barrier and the walk
// over the records are paid once per ~2R deletions. A state's destructor therefore runs up to
// ~2R deletions late: a difference from QueryExecMgr that adopting this would have to answer.
// Where membarrier is unavailable (and under ThreadSanitizer) both sides use seq_cst fences
// instead (under ThreadSanitizer, a seq_cst RMW). Per access the reader pays the map's loads,
// two stores to its own line, one load of the shard's version and the reference count's CAS;
// ShardedQueryRegistry (QueryExecMgr) pays ShardLock's two locked RMWs on top of the same CAS.
//
// Thread-safety: thread-safe. A thread's Gets do not nest.

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include <glog/logging.h>

#include "benchmarks/seqlock-map.h"
#include "benchmarks/seqlock-tag-map.h"
#include "runtime/query-state.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr::bench {

/// 'kAsymmetric': membarrier on the deleting side where available; false: a seq_cst fence on
/// both sides (the reader's costs a locked instruction's store-buffer drain).
template <bool kAsymmetric>
class HazardQueryRegistry {
 public:
  explicit HazardQueryRegistry(int num_shards) : map_(num_shards) {
    asymmetric_ = kAsymmetric && seqlock_internal::EnableAsymmetricBarrier();
  }
  /// No Get or Release may be running.
  ~HazardQueryRegistry() {
    MutexLock l(&mu_);
    for (Entry* e : retired_) delete e;
  }

  QueryState* Create(const UniqueId& id, const QueryContext& ctx) {
    auto* e = new Entry(id, ctx);
    CHECK(map_.Add(id, e));
    return e;
  }

  /// States created and not deleted yet, over all registries (for tests).
  static int64_t LiveStates() { return live_states_.load(std::memory_order_relaxed); }

  /// A new reference, or nullptr when 'id' is not registered.
  QueryState* Get(const UniqueId& id) {
    Record* r = tls_record_;
    if (r == nullptr) [[unlikely]] r = RegisterThread();
    for (;;) {
      Entry* e = nullptr;
      typename SeqlockTagMap<Entry*>::Ticket ticket;
      if (!map_.Get(id, &e, &ticket)) {
        r->hazard.store(nullptr, std::memory_order_release);  // Set if this is a retry.
        return nullptr;
      }
      r->hazard.store(e, std::memory_order_relaxed);
      Fence();  // The publication before the check (the reader's half of Dekker).
      // No writer changed the shard since the find: 'e' is still registered, so a deleter
      // that unregisters it later will see the hazard in its scan.
      if (!SeqlockTagMap<Entry*>::Unchanged(ticket)) continue;
      const bool ok = TryAddRef(e);
      // Release: this thread's accesses to 'e' happen before a deleter that sees the record
      // cleared.
      r->hazard.store(nullptr, std::memory_order_release);
      return ok ? e : nullptr;
    }
  }

  /// Drops one reference; the last one unregisters the state and deletes it once unprotected.
  void Release(QueryState* qs) {
    auto* e = static_cast<Entry*>(qs);
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) > 1) return;
    CHECK(map_.Delete(e->query_id()));
    std::vector<Entry*> batch;
    {
      MutexLock l(&mu_);
      retired_.push_back(e);
      // Scan once per batch of at least twice the records: the fence and the walk over every
      // record's line are paid once per ~2R deletions, and at most R of them stay protected.
      const size_t records = num_records_.load(std::memory_order_relaxed);
      if (retired_.size() < std::max<size_t>(64, 2 * records)) return;
      batch.swap(retired_);
    }
    HeavyFence();  // The unregistrations before the scan (the deleter's half of Dekker).
    std::vector<const Entry*> held;
    for (Record* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
      // Acquire: the reader's accesses to the state happen before the null it stored after.
      if (const Entry* h = r->hazard.load(std::memory_order_acquire)) held.push_back(h);
    }
    std::sort(held.begin(), held.end());
    std::vector<Entry*> kept;
    for (Entry* d : batch) {
      if (std::binary_search(held.begin(), held.end(), d)) {
        kept.push_back(d);
      } else {
        delete d;
      }
    }
    if (!kept.empty()) {
      MutexLock l(&mu_);
      retired_.insert(retired_.end(), kept.begin(), kept.end());
    }
  }

 private:
  struct Entry : QueryState {
    Entry(const UniqueId& id, const QueryContext& ctx) : QueryState(id, ctx) {
      live_states_.fetch_add(1, std::memory_order_relaxed);
    }
    ~Entry() { live_states_.fetch_sub(1, std::memory_order_relaxed); }
    std::atomic<int32_t> refs{1};
  };

  /// One thread's hazard: the state it is about to take a reference to, or null. Records are
  /// never freed; a record whose thread exited is reused by the next new thread.
  struct alignas(64) Record {
    std::atomic<const Entry*> hazard{nullptr};
    Record* next = nullptr;  // Set before the record is published, never changed.
  };

  static bool TryAddRef(Entry* e) {
    int32_t n = e->refs.load(std::memory_order_relaxed);
    do {
      if (n == 0) return false;
    } while (!e->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
  }

  void Fence() const {
    if (asymmetric_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      FullFence();
    }
  }
  void HeavyFence() const {
    if (asymmetric_) {
      seqlock_internal::HeavyBarrier();
    } else {
      FullFence();
    }
  }
  static void FullFence() {
#ifdef QR_SEQLOCK_MAP_TSAN
    // ThreadSanitizer does not model fences (and warns about them); a seq_cst RMW is the same
    // full barrier on x86. What makes a deletion safe for TSan's checks are the release and
    // acquire edges of the hazard records.
    static std::atomic<int> dummy{0};
    dummy.fetch_add(1, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }

  /// The calling thread's record, taken from the free ones or allocated (once a thread; a
  /// mutex, since threads come and go far less often than they look states up).
  [[gnu::noinline]] Record* RegisterThread() {
    struct Releaser {
      ~Releaser() {
        if (tls_record_ == nullptr) return;
        MutexLock l(&free_mu_);
        free_records_.push_back(tls_record_);
        tls_record_ = nullptr;
      }
    };
    thread_local Releaser releaser;
    (void)releaser;
    MutexLock l(&free_mu_);
    if (!free_records_.empty()) {
      tls_record_ = free_records_.back();
      free_records_.pop_back();
      return tls_record_;
    }
    auto* r = new Record;
    r->next = records_.load(std::memory_order_relaxed);
    records_.store(r, std::memory_order_release);  // Pushes are serialised by free_mu_.
    num_records_.fetch_add(1, std::memory_order_relaxed);
    tls_record_ = r;
    return r;
  }

  SeqlockTagMap<Entry*> map_;
  bool asymmetric_ = false;
  /// Every thread's record (push-only, shared by all registries; never freed).
  static inline std::atomic<Record*> records_{nullptr};
  static inline thread_local Record* tls_record_ = nullptr;
  static inline std::atomic<size_t> num_records_{0};
  static inline std::atomic<int64_t> live_states_{0};
  static inline Mutex free_mu_;
  /// Records of exited threads (shared by all registries, like the records themselves).
  static inline std::vector<Record*> free_records_ QR_GUARDED_BY(free_mu_);
  Mutex mu_;
  /// Unregistered states not deleted yet: waiting for the next scan, or still protected by
  /// some record at the last one.
  std::vector<Entry*> retired_ QR_GUARDED_BY(mu_);
};

}  // namespace qr::bench
