#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#if defined(__x86_64__) && __has_include(<sys/rseq.h>)
#include <sys/rseq.h>  // glibc >= 2.35: the thread's rseq area (__rseq_offset, __rseq_size)
#define QR_SHARD_LOCK_RSEQ 1
#endif

#include "spinlock.h"
#include "thread-annotations.h"

#if defined(__SANITIZE_THREAD__)
#define QR_SHARD_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QR_SHARD_LOCK_TSAN 1
#endif
#endif

namespace qr {

class ShardLock;

/// Whether a ShardLock may switch to read-biased mode (see ShardLock).
enum class ReadBias {
  /// Read-biased while no writer came for a while (the default).
  kAdaptive,
  /// Always through the reader slots: shared_acquisitions() counts every read.
  kNever,
};

namespace internal {
/// One thread's read-biased hold (ShardLock): the lock it holds shared without a reader slot,
/// or null. Owned by one thread at a time, reused after the thread exits, never freed.
struct alignas(64) BiasedReader {
  /// The ShardLock held read-biased, or null; the two sentinel records below hold themselves.
  std::atomic<const void*> hold{nullptr};
  /// Read-biased acquisitions made through this record, incremented by its owner only (a
  /// plain increment, no locked instruction); others only load it.
  std::atomic<uint64_t> reads{0};
  std::atomic<bool> in_use{false};
  /// The next record of the process-wide list (set before publication, then immutable).
  BiasedReader* next = nullptr;
};
/// The record of a thread that has none yet, and of one whose exit began: its hold is never
/// null, so lock_shared() takes a slot (and registers a thread that has none).
extern BiasedReader g_unregistered_reader;
extern BiasedReader g_retired_reader;
/// The calling thread's record (never null).
inline thread_local constinit BiasedReader* tls_biased_reader = &g_unregistered_reader;
/// The thread's clock for re-bias checks (CLOCK_MONOTONIC ns), refreshed every
/// ShardLock::kClockRefreshEvery slot reads: a slot read compares it with the lock's
/// inhibition instead of reading the clock.
inline thread_local constinit int64_t tls_rebias_clock_ns = 0;
inline thread_local constinit uint32_t tls_rebias_clock_countdown = 1;
/// Tests: revocations use the mprotect() barrier, as when membarrier() is refused.
extern std::atomic<bool> g_shard_lock_force_mprotect_barrier;
}  // namespace internal

/// The lock of one registry shard: exclusive for writers, shared for readers, and built so that
/// a reader writes no cache line that another core's reader writes.
///
/// Why: a lookup that takes an exclusive lock writes the lock word, so the shard's cache line
/// moves to the reading core on nearly every lookup once two cores read the same shards; on
/// the 2-core benchmark machine one lookup then costs ~4x its single-thread CPU time, and a
/// lookup-only workload does not scale past one core at all (docs/benchmarks.md). Here each
/// reader registers in one of a few reader slots, each on a cache line of its own, picked by
/// the CPU it runs on, so readers on different cores never touch the same line and a slot's
/// line stays in its core's cache. Writers (add, delete, a ScopedShardedMapRef) take the
/// exclusive SpinLock, raise the writer flag that every slot carries on its own line, and wait
/// for every slot to drain. The flag sits on the slot's line because the writer must read that
/// line anyway and its readers write it anyway: a write moves no line that only readers read
/// (the lock's read-mostly line, with the bias and the slot array, is written only when the
/// bias changes; the writers' SpinLock and counters are on a line of their own).
///
/// A slot is two counters that only grow: 'entered' (shared acquisitions) and 'exited'
/// (releases, and a reader's step back before a writer); entered - exited readers are inside,
/// and 'exited' doubles as the acquisition statistic, so a lookup pays for no counter of its
/// own. Reader: entered += 1; if a writer is flagged, step back (exited += 1) and wait for it.
/// Writer: lock, flag, wait until every slot has entered == exited (read 'exited' first: an
/// exit is always counted after its entry, so equal counts mean nobody was inside). Both sides
/// use sequentially consistent operations on (counter, flag), so at least one of them sees the
/// other (the Dekker pattern). A writer waiting for a reader that was preempted sleeps in the
/// kernel on the slot's 'exited' word (futex) after a short spin; a release wakes it only when
/// the slot's flag says a writer sleeps on it and the release emptied the slot, so an
/// uncontended release is one atomic increment and one load, both on the slot's own line. A
/// reader that meets a writer waits on the writers' SpinLock (WaitUntilFree: spin, then futex).
///
/// Read bias. While no writer comes, the slots' two locked increments are most of a lookup's
/// cost (docs/benchmarks.md). A lock that saw no writer for a while turns read-biased: a reader
/// stores the lock's address into its thread's own hold word (internal::BiasedReader), reads
/// the 'bias' flag and, if it is up, goes in: a plain store and a load, no locked instruction,
/// no line another core writes (if it is down, the reader clears its hold and takes a slot).
/// The store-then-load needs no fence on the reader's side because the writer pays for both
/// (asymmetric Dekker): a writer that finds the lock biased lowers the flag, calls
/// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full memory barrier on every CPU
/// running a thread of this process, and then waits until no thread's hold word names this
/// lock. So either the writer sees a reader's hold, or the reader sees the flag down and goes
/// through a slot instead. A revocation costs the writer ~1 us (the system call and the other
/// CPUs' interrupts; docs/benchmarks.md), so the lock stays unbiased for a while after each
/// (1 ms, x8 each time a bias did not last 100 ms, up to ~1 s): a shard written
/// often stays on the slots, one written seldom reads without locked instructions. Readers
/// re-bias it from the slot path (a thread-local clock compared per read, read every 64th),
/// only while holding it through a slot and while no writer is flagged. A thread holds at most
/// one lock read-biased at a time (nested holds go through slots). Without membarrier (older
/// kernels, seccomp) no lock ever turns read-biased; should it be refused later, a revocation
/// uses a page-protection change instead (read_bias_fallback_fences()), else aborts. Read-biased acquisitions are counted per
/// thread (biased_reads(), process-wide), not per lock; ReadBias::kNever keeps every read on the
/// slots and in shared_acquisitions().
///
/// Writers have priority: a flagged writer makes new readers wait, so a stream of readers can
/// never starve a writer. Not recursive in either mode; a reader must not take the lock
/// exclusively (it would wait for itself).
/// Thread-safety: thread-safe. Satisfies Lockable (lock/unlock/try_lock); the shared side is
/// lock_shared()/unlock_shared(slot) (the slot number lock_shared() returned), or its two
/// halves (try_lock_shared_biased(), else lock_shared_slot(), each with its own unlock),
/// released by the thread that took it.
class QR_CAPABILITY("mutex") ShardLock {
 public:
  ShardLock();
  /// Before any concurrent use: ReadBias::kNever keeps every read on the reader slots.
  void set_read_bias(ReadBias bias) {
    rebias_after_ns_.store(bias == ReadBias::kAdaptive && ReadBiasSupported() ? 0 : kNeverNs,
                           std::memory_order_relaxed);
  }
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;

  // The analysis checks the callers; inside, the writers' SpinLock is held across calls.
  void lock() QR_ACQUIRE() QR_NO_THREAD_SAFETY_ANALYSIS {
    writer_lock_.lock();
    // seq_cst: ordered before the reads of the slots below (the writer half of Dekker). Every
    // slot is flagged before any is read, so no reader gets in anywhere while the writer waits.
    FlagSlots();
    for (uint32_t i = 0; i <= slot_mask_; ++i) {
      if (!Drained(slots_[i])) WaitForReaders(i);
    }
    // After the slots: a slot reader that re-biased the lock has left by now, and its store of
    // the flag is visible (its exit's increment was read above). A bias lowered ahead
    // (ReadBiasBatch) still has its read-biased readers to wait for.
    if (bias_.load(std::memory_order_relaxed) != 0 || lowered_at_ != kNotLowered) [[unlikely]] {
      RevokeBias(/*wait=*/true);
    }
  }

  /// Takes the lock exclusively only if no writer holds it and no reader is inside.
  // No analysis inside: the writers' SpinLock stays held on success, past the return.
  [[nodiscard]] bool try_lock() QR_TRY_ACQUIRE(true) QR_NO_THREAD_SAFETY_ANALYSIS {
    if (!writer_lock_.try_lock()) return false;
    FlagSlots();
    bool free = true;
    for (uint32_t i = 0; i <= slot_mask_ && free; ++i) free = Drained(slots_[i]);
    if (free && (bias_.load(std::memory_order_relaxed) != 0 || lowered_at_ != kNotLowered)) {
      free = RevokeBias(/*wait=*/false);
    }
    if (!free) {
      ClearSlots();  // Readers that backed off retry.
      writer_lock_.unlock();
    }
    return free;
  }

  // No analysis inside: releases the writers' SpinLock that lock() or try_lock() left held.
  void unlock() QR_RELEASE() QR_NO_THREAD_SAFETY_ANALYSIS {
    ClearSlots();
    writer_lock_.unlock();
  }

  /// Takes the lock shared; returns the slot to hand to unlock_shared(): kBiasedSlot for a
  /// read-biased hold, else a reader slot.
  // No analysis inside: one of the two halves below takes the lock.
  [[nodiscard, gnu::always_inline]] uint32_t lock_shared() QR_ACQUIRE_SHARED()
      QR_NO_THREAD_SAFETY_ANALYSIS {
    return try_lock_shared_biased() != nullptr ? kBiasedSlot : lock_shared_slot();
  }

  // No analysis inside: releases the half that lock_shared() took.
  [[gnu::always_inline]] void unlock_shared(uint32_t slot) QR_RELEASE_SHARED()
      QR_NO_THREAD_SAFETY_ANALYSIS {
    if (slot == kBiasedSlot) {
      unlock_shared_biased(internal::tls_biased_reader);
    } else {
      unlock_shared_slot(slot);
    }
  }

  /// The read-biased half of lock_shared(): the calling thread's hold record if the thread now
  /// holds the lock read-biased (hand it to unlock_shared_biased()), null if it holds nothing
  /// and must take a slot (lock_shared_slot()). For callers that run their critical section
  /// once per half, so that the read-biased one keeps no slot number, tests none at the
  /// release and finds its record in a register (ShardedQueryMap's lookups;
  /// docs/benchmarks.md, "Read bias").
  [[nodiscard, gnu::always_inline]] internal::BiasedReader* try_lock_shared_biased()
      QR_TRY_ACQUIRE_SHARED(true) {
    // Announce the hold, then check the flag. When the lock is not biased this costs two
    // plain stores to this thread's own line, cheaper than loading the flag first on the
    // biased path (docs/benchmarks.md, "Read bias").
    internal::BiasedReader* r = internal::tls_biased_reader;
    if (r->hold.load(std::memory_order_relaxed) == nullptr) [[likely]] {
      r->hold.store(this, kHoldOrder);
      // The reader half of the asymmetric Dekker: a compiler barrier only (see RevokeBias).
      std::atomic_signal_fence(std::memory_order_seq_cst);
      // Acquire: a writer's changes happen before the slot reader's re-bias seen here.
      if (bias_.load(kBiasCheckOrder) != 0) [[likely]] {
        CountBiasedRead(r);
        return r;
      }
      r->hold.store(nullptr, std::memory_order_release);  // Release: see kHoldOrder.
    } else if (r == &internal::g_unregistered_reader) [[unlikely]] {
      RegisterBiasedReader();  // The next lock_shared() of this thread may go read-biased.
    }
    return nullptr;
  }

  /// Releases a hold of try_lock_shared_biased(), on the thread that took it ('hold' is what
  /// that returned).
  [[gnu::always_inline]] void unlock_shared_biased(internal::BiasedReader* hold)
      QR_RELEASE_SHARED() {
    // Release: what this reader read happens before a revoking writer's changes.
    hold->hold.store(nullptr, std::memory_order_release);
  }

  /// The slot half of lock_shared(): takes a reader slot (waiting for a writer if one is
  /// flagged) and returns its number, for unlock_shared_slot().
  [[nodiscard, gnu::always_inline]] uint32_t lock_shared_slot() QR_ACQUIRE_SHARED() {
    const uint32_t slot = CurrentSlot();
    // seq_cst: ordered before the read of the flag (the reader half of Dekker).
    slots_[slot].entered.fetch_add(1, std::memory_order_seq_cst);
    if (slots_[slot].writer.load(std::memory_order_seq_cst) != kNoWriter) [[unlikely]] {
      LockSharedSlow(slot);
    }
    if (internal::tls_rebias_clock_ns >= rebias_after_ns_.load(std::memory_order_relaxed))
        [[unlikely]] {
      MaybeRebias(slot);
    }
    if (--internal::tls_rebias_clock_countdown == 0) [[unlikely]] RefreshRebiasClock();
    return slot;
  }

  /// Releases a hold of lock_shared_slot().
  [[gnu::always_inline]] void unlock_shared_slot(uint32_t slot) QR_RELEASE_SHARED() {
    // seq_cst: a writer that read a stale count and goes to sleep must see this increment in
    // its futex check, or this thread must see its "sleeping" flag and wake it.
    slots_[slot].exited.fetch_add(1, std::memory_order_seq_cst);
    if (slots_[slot].writer.load(std::memory_order_seq_cst) == kWriterSleeping) [[unlikely]] {
      WakeWriterIfDrained(slot);
    }
  }

  /// membarrier() calls made by this process's ShardLocks (one per revocation, or one per
  /// ReadBiasBatch). Never decreases.
  static uint64_t read_bias_fences();
  /// Of those, the ones made by changing a page's protection instead (mprotect(), x86 only)
  /// because membarrier() was refused after start-up (a seccomp filter installed since).
  static uint64_t read_bias_fallback_fences();

  /// Exclusive acquisitions (writers).
  uint64_t acquisitions() const { return writer_lock_.acquisitions(); }
  /// Shared acquisitions (readers) released so far, summed over the slots. Never decreases and
  /// never runs ahead; it may lag while readers step back for a writer, exact when quiet.
  uint64_t shared_acquisitions() const;
  /// Exclusive acquisitions that found another writer, plus shared ones that found a writer.
  uint64_t contended_acquisitions() const {
    return writer_lock_.contended_acquisitions() +
           reader_waits_.load(std::memory_order_relaxed);
  }
  /// Times a thread slept in the kernel: a writer behind a writer or waiting for a reader, or
  /// a reader behind a writer.
  uint64_t sleeps() const {
    return writer_lock_.sleeps() + writer_sleeps_.load(std::memory_order_relaxed);
  }

  /// Read-biased shared acquisitions of every ShardLock of the process (not in
  /// shared_acquisitions()). Never decreases; may lag a reader that is still counting.
  static uint64_t biased_reads();
  /// Times a writer found this lock read-biased and revoked the bias.
  uint64_t bias_revocations() const { return bias_revocations_.load(std::memory_order_relaxed); }
  /// True while the lock is read-biased (a snapshot; for tests and statistics).
  bool read_biased() const { return bias_.load(std::memory_order_relaxed) != 0; }
  /// True if this process can revoke a read bias (membarrier with PRIVATE_EXPEDITED).
  static bool ReadBiasSupported();

  /// Reader slots per lock: the CPU count rounded up to a power of two, at most kMaxSlots.
  static uint32_t NumSlots();
  static constexpr uint32_t kMaxSlots = 16;
  /// What lock_shared() returns for a read-biased hold (never a slot number).
  static constexpr uint32_t kBiasedSlot = ~0u;
  /// Slot reads of one thread between two reads of its re-bias clock.
  static constexpr uint32_t kClockRefreshEvery = 64;

 private:
  friend class ReadBiasBatch;
#ifdef QR_SHARD_LOCK_TSAN
  // ThreadSanitizer does not see membarrier(): sequentially consistent on both sides, so that
  // the handshake is one it checks.
  static constexpr std::memory_order kHoldOrder = std::memory_order_seq_cst;
  static constexpr std::memory_order kBiasCheckOrder = std::memory_order_seq_cst;
#else
  // Release, not relaxed (a plain store either way on x86): a revoking writer that reads this
  // hold instead of the null stored by the thread's previous release must still see that
  // release's reads happen before its changes (a later relaxed store would break the chain).
  static constexpr std::memory_order kHoldOrder = std::memory_order_release;
  static constexpr std::memory_order kBiasCheckOrder = std::memory_order_acquire;
#endif
  static constexpr uint32_t kNoWriter = 0;
  static constexpr uint32_t kWriterActive = 1;
  static constexpr uint32_t kWriterSleeping = 2;

  struct alignas(64) Slot {
    /// Shared acquisitions through this slot, including ones that stepped back for a writer.
    std::atomic<uint64_t> entered{0};
    /// Releases through this slot, including steps back. A writer sleeps on its low 32 bits.
    std::atomic<uint64_t> exited{0};
    /// kNoWriter, kWriterActive, or kWriterSleeping (the writer sleeps until this slot
    /// drains). Every slot has its own copy of the writers' flag, on the line its readers
    /// write anyway and that the writer must read anyway: a write moves no line that only
    /// readers read (docs/benchmarks.md, "The writer's flag in the reader slots").
    std::atomic<uint32_t> writer{kNoWriter};
  };

  /// Raises every slot's writer flag (seq_cst: before the writer reads any slot's counts).
  void FlagSlots() {
    for (uint32_t i = 0; i <= slot_mask_; ++i) {
      slots_[i].writer.store(kWriterActive, std::memory_order_seq_cst);
    }
  }
  /// Lowers every slot's writer flag. Release: the writer's changes are visible to a reader
  /// that sees its slot's flag down.
  void ClearSlots() {
    for (uint32_t i = 0; i <= slot_mask_; ++i) {
      slots_[i].writer.store(kNoWriter, std::memory_order_release);
    }
  }

  /// True if nobody held the slot at the moment 'entered' was read. 'exited' is read first:
  /// every exit it counts had its entry counted before, so equal counts leave nobody inside.
  static bool Drained(const Slot& s) {
    const uint64_t exited = s.exited.load(std::memory_order_seq_cst);
    return s.entered.load(std::memory_order_seq_cst) == exited;
  }

  /// The reader slot of the CPU this thread runs on, from the cpu_id the kernel keeps in the
  /// thread's rseq area (a TLS load, no system call). It may be stale by the time it is used
  /// (the thread migrated): that costs a cache-line transfer, never correctness, since a slot
  /// is a counter, not a per-CPU assumption. Without rseq (glibc tunable off, valgrind, other
  /// architectures) each thread keeps one slot, handed out round robin.
  [[gnu::always_inline]] uint32_t CurrentSlot() const {
#ifdef QR_SHARD_LOCK_RSEQ
    if (__rseq_size != 0) [[likely]] {
      uintptr_t thread_pointer;
      asm("mov %%fs:0, %0" : "=r"(thread_pointer));
      const auto* cpu_id = reinterpret_cast<const uint32_t*>(
          thread_pointer + __rseq_offset + offsetof(struct rseq, cpu_id));
      // Relaxed: the kernel writes it; any recent value picks a valid slot.
      return __atomic_load_n(cpu_id, __ATOMIC_RELAXED) & slot_mask_;
    }
#endif
    uint32_t slot = tls_slot_;
    if (slot == kUnassigned) [[unlikely]] slot = AssignThreadSlot();
    return slot & slot_mask_;
  }
  /// Gives the calling thread its fallback slot number (round robin).
  static uint32_t AssignThreadSlot();
  static constexpr uint32_t kUnassigned = ~0u;
  static inline thread_local uint32_t tls_slot_ = kUnassigned;
  // Steps out of the shared hold and back in: invisible to the analysis by design.
  void LockSharedSlow(uint32_t slot) QR_NO_THREAD_SAFETY_ANALYSIS;
  /// A slot reader whose clock passed the inhibition: re-biases the lock if no writer is
  /// flagged and the inhibition is over by the real clock; registers the thread's record.
  void MaybeRebias(uint32_t slot);
  static void RefreshRebiasClock();
  /// Gives the calling thread its read-biased hold record (a free one, else a new one).
  static internal::BiasedReader* RegisterBiasedReader();
  static constexpr int64_t kNeverNs = INT64_MAX;
  /// reads += 1 by the record's owner: others only load it, so a plain increment (one
  /// instruction) is enough; TSan sees an atomic one.
  [[gnu::always_inline]] static void CountBiasedRead(internal::BiasedReader* r) {
#if defined(__x86_64__) && !defined(QR_SHARD_LOCK_TSAN)
    asm volatile("incq %0" : "+m"(*reinterpret_cast<uint64_t*>(&r->reads)));
#else
    r->reads.store(r->reads.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
#endif
  }
  /// Writer, holding writer_lock_ with the slots drained: lowers the bias (unless it was lowered
  /// ahead), makes every CPU pass a memory barrier unless one did since the lowering, then
  /// waits until no thread holds the lock read-biased ('wait'; the bias stays down for the
  /// inhibition), or, if one does, returns false (try_lock; the bias stays down, and the next
  /// writer waits for that reader without another barrier).
  bool RevokeBias(bool wait);
  /// Writer, holding writer_lock_, the lock read-biased: lowers the bias and notes when
  /// (lowered_at_, so that a writer knows whether a barrier has followed; lowered_ns_, 'now_ns',
  /// where the inhibition starts).
  void LowerBias(int64_t now_ns);
  /// ReadBiasBatch::Lower(): LowerBias() if the lock is read-biased and no writer holds it,
  /// with the inhibition counted from 'now_ns'; true if it lowered the bias.
  bool LowerReadBiasAhead(int64_t now_ns) QR_NO_THREAD_SAFETY_ANALYSIS;
  /// A membarrier() (counted in read_bias_fences()).
  static void Fence();
  /// CLOCK_MONOTONIC in ns.
  static int64_t NowNs();
  void WaitForReaders(uint32_t slot);
  void WakeWriterIfDrained(uint32_t slot);

  // The line lookups read: written only when the bias goes up or down, so it stays shared in
  // the readers' caches while writers come and go (the writers' own state is on the next one).
  /// 1 while read-biased. Raised by a slot reader (MaybeRebias), lowered by a writer; written
  /// once per bias period at most.
  alignas(64) std::atomic<uint32_t> bias_{0};
  const uint32_t slot_mask_;
  const std::unique_ptr<Slot[]> slots_;
  /// CLOCK_MONOTONIC ns before which readers must not re-bias: set by a revoking writer;
  /// kNeverNs without membarrier or with ReadBias::kNever.
  std::atomic<int64_t> rebias_after_ns_;

  /// Serializes writers; a reader that meets a writer waits on it. Its state and counters are
  /// written by every writer: on a line of its own, away from what lookups read.
  alignas(64) SpinLock writer_lock_;
  /// When the current bias was raised (written by the raising reader, read by the revoker).
  std::atomic<int64_t> biased_at_ns_{0};
  /// Doublings of the inhibition after a revocation (writers only, under writer_lock_).
  uint32_t inhibit_shift_ = 0;
  /// The process's barrier count (internal) when the bias was lowered and its read-biased
  /// readers not yet waited for, else kNotLowered (writers only, under writer_lock_).
  static constexpr uint64_t kNotLowered = UINT64_MAX;
  uint64_t lowered_at_ = kNotLowered;
  /// CLOCK_MONOTONIC ns of the last lowering (writers only, under writer_lock_).
  int64_t lowered_ns_ = 0;
  std::atomic<uint64_t> bias_revocations_{0};
  std::atomic<uint64_t> reader_waits_{0};
  /// Steps back of readers that met a writer (counted in 'exited' but not acquisitions).
  std::atomic<uint64_t> reader_backoffs_{0};
  /// The largest shared_acquisitions() reported, which keeps that counter monotonic.
  mutable std::atomic<uint64_t> max_reported_{0};
  std::atomic<uint64_t> writer_sleeps_{0};
};

/// Lowers the read biases of many ShardLocks for one membarrier(): for a writer about to take
/// them in turn (ShardedQueryMap::DoFuncForAllEntries). Lower() each, then Fence() once; each
/// lock() after that only waits for the read-biased readers still inside, instead of making a
/// membarrier() of its own (one system call per walk instead of one per biased lock;
/// docs/benchmarks.md, "One membarrier per walk"). Safe without the Fence() too: the lock() of
/// a lock lowered with no fence since makes one. Lowering is not counted in acquisitions().
/// Thread-safety: one thread's object; the locks are thread-safe.
class ReadBiasBatch {
 public:
  /// Reads the clock once for the batch: the locks' inhibitions start now.
  ReadBiasBatch() : now_ns_(ShardLock::NowNs()) {}
  ReadBiasBatch(const ReadBiasBatch&) = delete;
  ReadBiasBatch& operator=(const ReadBiasBatch&) = delete;

  /// Lowers 'lock''s bias if it is read-biased and no writer holds it (a writer that does
  /// revokes it itself); true if it lowered it.
  bool Lower(ShardLock* lock) {
    if (lock->bias_.load(std::memory_order_relaxed) == 0) return false;
    const bool lowered = lock->LowerReadBiasAhead(now_ns_);
    unfenced_ |= lowered;
    return lowered;
  }
  /// One membarrier() if Lower() lowered a bias since the last Fence(), else nothing.
  void Fence() {
    if (unfenced_) ShardLock::Fence();
    unfenced_ = false;
  }

 private:
  const int64_t now_ns_;
  bool unfenced_ = false;
};

/// RAII shared hold of a ShardLock, visible to the thread-safety analysis.
class QR_SCOPED_CAPABILITY ReaderLockGuard {
 public:
  [[gnu::always_inline]] explicit ReaderLockGuard(ShardLock* lock) QR_ACQUIRE_SHARED(lock)
      : lock_(lock), slot_(lock->lock_shared()) {}
  [[gnu::always_inline]] ~ReaderLockGuard() QR_RELEASE() { lock_->unlock_shared(slot_); }
  ReaderLockGuard(const ReaderLockGuard&) = delete;
  ReaderLockGuard& operator=(const ReaderLockGuard&) = delete;

 private:
  ShardLock* const lock_;
  const uint32_t slot_;
};

/// RAII exclusive hold of a ShardLock, visible to the thread-safety analysis.
class QR_SCOPED_CAPABILITY WriterLockGuard {
 public:
  explicit WriterLockGuard(ShardLock* lock) QR_ACQUIRE(lock) : lock_(lock) { lock_->lock(); }
  ~WriterLockGuard() QR_RELEASE() { lock_->unlock(); }
  WriterLockGuard(const WriterLockGuard&) = delete;
  WriterLockGuard& operator=(const WriterLockGuard&) = delete;

 private:
  ShardLock* const lock_;
};

}  // namespace qr
