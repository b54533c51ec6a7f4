#pragma once

// HazardDomain: hazard records for what a map read without a lock hands out (issue 20; used by
// hazard-query-registry.h and hazard-shared-map.h). A benchmark building block, not the registry.
//
// A reader publishes the node it found in its thread's record (a line of its own), checks that
// the node is still registered (for a SeqlockTagMap, that the shard's version has not moved
// since the find), uses it, and clears the record. The writer that unregisters a node retires
// it to one of kRetireLists lists (picked by its thread's record, so that writers on different
// threads rarely share a list's lock); once a list holds max(scan_batch, 2R) nodes (R: the
// threads that ever read), that Retire runs membarrier(PRIVATE_EXPEDITED), reads every record
// and deletes the list's nodes no record holds (a held one waits for the list's next scan or
// the destructor). So a reader needs only a compiler barrier between its publication and its
// check (the asymmetric Dekker handshake), and the barrier (an IPI to every CPU running the
// process: tens of microseconds on this KVM guest) and the walk over the records are paid once
// per max(scan_batch, 2R) retirements of a list. A node's destructor therefore runs up to
// kRetireLists * max(scan_batch, 2R) retirements late.
// Where membarrier is unavailable, with 'kAsymmetric' false, and under ThreadSanitizer both
// sides use seq_cst fences instead (under ThreadSanitizer, a seq_cst RMW).
//
// Records are shared by all domains of one Node type and never freed; a record whose thread
// exited is reused by the next new thread. Thread-safety: thread-safe. A thread protects one
// node at a time.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "benchmarks/seqlock-map.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr::bench {

template <typename Node, bool kAsymmetric>
class HazardDomain {
 public:
  /// One thread's hazard: the node it is about to use, or null.
  struct alignas(64) Record {
    std::atomic<const Node*> hazard{nullptr};
    Record* next = nullptr;  // Set before the record is published, never changed.
    size_t index = 0;        // The record's number (0, 1, ...); picks the thread's retire list.
  };

  /// Retired nodes a list collects before it scans, at least (by default), and the lists.
  static constexpr size_t kDefaultScanBatch = 512;
  static constexpr size_t kRetireLists = 16;

  explicit HazardDomain(size_t scan_batch = kDefaultScanBatch) : scan_batch_(scan_batch) {
    asymmetric_ = kAsymmetric && seqlock_internal::EnableAsymmetricBarrier();
  }
  /// No reader or writer may be running.
  ~HazardDomain() {
    for (RetireList& list : lists_) {
      MutexLock l(&list.mu);
      for (Node* n : list.retired) delete n;
    }
  }
  HazardDomain(const HazardDomain&) = delete;
  HazardDomain& operator=(const HazardDomain&) = delete;

  /// The calling thread's record.
  [[gnu::always_inline]] static Record* Mine() {
    Record* r = tls_record_;
    if (r == nullptr) [[unlikely]] r = RegisterThread();
    return r;
  }
  /// Publishes 'n' in 'r', ordered before the caller's check that 'n' is still registered.
  [[gnu::always_inline]] void Protect(Record* r, const Node* n) const {
    r->hazard.store(n, std::memory_order_relaxed);
    Fence();  // The publication before the check (the reader's half of Dekker).
  }
  /// Release: this thread's accesses to the node happen before a scan that sees the null.
  static void Clear(Record* r) { r->hazard.store(nullptr, std::memory_order_release); }

  /// 'n', unregistered by the caller, is deleted once no record holds it.
  void Retire(Node* n) {
    RetireList& list = lists_[Mine()->index % kRetireLists];
    std::vector<Node*> batch;
    {
      MutexLock l(&list.mu);
      list.retired.push_back(n);
      // Scan once per batch of at least twice the records: the fence and the walk over every
      // record's line are paid once per batch, and at most R of its nodes stay held.
      const size_t records = num_records_.load(std::memory_order_relaxed);
      if (list.retired.size() < std::max<size_t>(scan_batch_, 2 * records)) return;
      batch.swap(list.retired);
    }
    HeavyFence();  // The unregistrations before the scan (the deleter's half of Dekker).
    std::vector<const Node*> held;
    for (Record* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
      // Acquire: the reader's accesses to the node happen before the null it stored after.
      if (const Node* h = r->hazard.load(std::memory_order_acquire)) held.push_back(h);
    }
    std::sort(held.begin(), held.end());
    std::vector<Node*> kept;
    for (Node* d : batch) {
      if (std::binary_search(held.begin(), held.end(), d)) {
        kept.push_back(d);
      } else {
        delete d;
      }
    }
    if (!kept.empty()) {
      MutexLock l(&list.mu);
      list.retired.insert(list.retired.end(), kept.begin(), kept.end());
    }
  }

 private:
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
  /// mutex, since threads come and go far less often than they read).
  [[gnu::noinline]] static Record* RegisterThread() {
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
    r->index = num_records_.load(std::memory_order_relaxed);
    records_.store(r, std::memory_order_release);  // Pushes are serialised by free_mu_.
    num_records_.fetch_add(1, std::memory_order_relaxed);
    tls_record_ = r;
    return r;
  }

  const size_t scan_batch_;
  bool asymmetric_ = false;
  /// Every thread's record (push-only, shared by the domains of this Node type; never freed).
  static inline std::atomic<Record*> records_{nullptr};
  static inline thread_local Record* tls_record_ = nullptr;
  static inline std::atomic<size_t> num_records_{0};
  static inline Mutex free_mu_;
  /// Records of exited threads (shared like the records themselves).
  static inline std::vector<Record*> free_records_ QR_GUARDED_BY(free_mu_);
  /// Unregistered nodes not deleted yet: waiting for their list's next scan, or still held by
  /// some record at its last one.
  struct alignas(64) RetireList {
    Mutex mu;
    std::vector<Node*> retired QR_GUARDED_BY(mu);
  };
  RetireList lists_[kRetireLists];
};

}  // namespace qr::bench
