#include "util/shard-lock.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <mutex>
#include <thread>

#include "util/check.h"
#include "util/futex.h"
#include "util/shard-lock-testing.h"

namespace qr {
namespace internal {
// Their holds name no lock but are never null (a thread holding them takes slots).
constinit BiasedReader g_unregistered_reader{.hold{&g_unregistered_reader}};
constinit BiasedReader g_retired_reader{.hold{&g_retired_reader}};
constinit std::atomic<bool> g_shard_lock_force_mprotect_barrier{false};
}  // namespace internal

namespace {

using internal::CpuRelax;
using internal::Futex;

static_assert(std::endian::native == std::endian::little,
              "a writer sleeps on the low 32 bits of a 64-bit counter");

/// The low 32 bits of a slot's 'exited' counter: the futex word (it changes on every release).
std::atomic<uint32_t>* ExitedWord(std::atomic<uint64_t>* exited) {
  return reinterpret_cast<std::atomic<uint32_t>*>(exited);
}

using internal::BiasedReader;

int Membarrier(int cmd) { return static_cast<int>(syscall(__NR_membarrier, cmd, 0, 0)); }

/// Every thread's read-biased hold record, newest first; records are never freed.
std::atomic<BiasedReader*> g_biased_readers{nullptr};


/// Hands the exiting thread's record to the next thread that reads read-biased.
void ReleaseBiasedReader(void* record) {
  auto* r = static_cast<BiasedReader*>(record);
  // A thread cannot exit inside a lookup; a leaked ReaderLockGuard would make every writer of
  // its lock wait forever.
  QR_DCHECK(r->hold.load(std::memory_order_relaxed) == nullptr,
            "a thread exited holding a ShardLock read-biased");
  internal::tls_biased_reader = &internal::g_retired_reader;
  r->in_use.store(false, std::memory_order_release);
}

/// In the child of fork(), which has only the thread that forked: frees the records of the
/// parent's other threads, which no thread will release here. A record whose thread was inside
/// a read-biased lookup at the fork keeps its hold and stays in use: that lookup never ends in
/// the child, and its lock stays held shared there, as any lock held across fork() does.
void ReleaseOtherThreadsReadersAfterFork() {
  for (BiasedReader* r = g_biased_readers.load(std::memory_order_acquire); r != nullptr;
       r = r->next) {
    if (r != internal::tls_biased_reader && r->hold.load(std::memory_order_relaxed) == nullptr) {
      r->in_use.store(false, std::memory_order_release);
    }
  }
}

pthread_key_t BiasedReaderKey() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    QR_CHECK(pthread_key_create(&k, &ReleaseBiasedReader) == 0, "pthread_key_create");
    QR_CHECK(pthread_atfork(nullptr, nullptr, &ReleaseOtherThreadsReadersAfterFork) == 0,
             "pthread_atfork");
    return k;
  }();
  return key;
}

}  // namespace

size_t internal::BiasedReadersInUse() {
  size_t n = 0;
  for (const BiasedReader* r = g_biased_readers.load(std::memory_order_acquire); r != nullptr;
       r = r->next) {
    n += r->in_use.load(std::memory_order_acquire) ? 1 : 0;
  }
  return n;
}

BiasedReader* ShardLock::RegisterBiasedReader() {
  const pthread_key_t key = BiasedReaderKey();
  BiasedReader* r = g_biased_readers.load(std::memory_order_acquire);
  for (; r != nullptr; r = r->next) {
    bool free = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(free, true, std::memory_order_acquire)) {
      break;
    }
  }
  if (r == nullptr) {
    r = new BiasedReader;  // Never freed: a revoking writer may be reading it.
    r->in_use.store(true, std::memory_order_relaxed);
    BiasedReader* head = g_biased_readers.load(std::memory_order_relaxed);
    do {
      r->next = head;
    } while (!g_biased_readers.compare_exchange_weak(head, r, std::memory_order_release,
                                                     std::memory_order_relaxed));
  }
  QR_CHECK(pthread_setspecific(key, r) == 0, "pthread_setspecific");
  internal::tls_biased_reader = r;
  return r;
}

namespace {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// After a revocation a lock stays unbiased for kInhibitNs << shift, the shift growing by
/// kInhibitShiftStep (up to kMaxInhibitShift: ~1 s) each time the bias lasted less than
/// kShortBiasNs: a shard written every few ms reaches the longest inhibition in 3 revocations.
constexpr int64_t kInhibitNs = 1'000'000;
constexpr uint32_t kInhibitShiftStep = 3;
constexpr uint32_t kMaxInhibitShift = 10;
constexpr int64_t kShortBiasNs = 100'000'000;
/// A revoking writer waiting for a read-biased reader: yields this many times, then polls.
constexpr int kYieldRounds = 64;
constexpr long kHoldPollNs = 50'000;

/// Barriers started (each takes the next number) and the highest number of one that has
/// completed: a bias lowered when g_fences_started was N has had a barrier after it once
/// g_fences_done > N (a barrier numbered N + 1 or more started after the lowering).
std::atomic<uint64_t> g_fences_started{0};
std::atomic<uint64_t> g_fences_done{0};
/// Barriers made with MprotectBarrier() because membarrier() failed.
std::atomic<uint64_t> g_fallback_fences{0};

/// True if a barrier started after g_fences_started read 'started' and has completed.
bool FencedSince(uint64_t started) {
  return g_fences_done.load(std::memory_order_acquire) > started;
}

/// A full memory barrier on every CPU running a thread of this process without membarrier():
/// taking write access away from a page this thread has just written makes the kernel flush
/// its TLB entry on every CPU that may hold one (every CPU running a thread of this address
/// space) with an inter-processor interrupt, which serializes that CPU. The technique of
/// folly's asymmetricHeavyBarrier() fallback and of .NET's FlushProcessWriteBuffers(). x86
/// only: elsewhere (arm64) TLB flushes are broadcast by the hardware, with no interrupt.
/// False when it cannot be done.
bool MprotectBarrier() {
#if defined(__x86_64__)
  static const long page_size = sysconf(_SC_PAGESIZE);
  static char* const page = [] {
    void* p = mmap(nullptr, static_cast<size_t>(page_size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    // Locked, so that it is never paged out: an absent page would need no TLB flush.
    if (p == MAP_FAILED) return static_cast<char*>(nullptr);
    if (mlock(p, static_cast<size_t>(page_size)) != 0) {
      munmap(p, static_cast<size_t>(page_size));
      return static_cast<char*>(nullptr);
    }
    return static_cast<char*>(p);
  }();
  static std::mutex mu;  // One protection change at a time.
  if (page == nullptr) return false;
  std::lock_guard<std::mutex> l(mu);
  if (mprotect(page, static_cast<size_t>(page_size), PROT_READ | PROT_WRITE) != 0) return false;
  *reinterpret_cast<volatile char*>(page) = 0;  // A writable TLB entry, here at least.
  return mprotect(page, static_cast<size_t>(page_size), PROT_READ) == 0;
#else
  return false;
#endif
}

/// membarrier() on every CPU running a thread of this process, or abort.
void MembarrierOrDie() {
  if (!internal::g_shard_lock_force_mprotect_barrier.load(std::memory_order_relaxed)) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    // The registration is per address space (fork() copies it); should it be gone, register
    // again, else fall back to the global command (slower, needs no registration).
    if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
      return;
    }
    if (Membarrier(MEMBARRIER_CMD_GLOBAL) == 0) return;
  }
  // membarrier() was refused after start-up (a seccomp filter installed since): the page
  // protection barrier. Without any barrier a revocation cannot be made safe: abort rather
  // than let a writer in beside a reader.
  g_fallback_fences.fetch_add(1, std::memory_order_relaxed);
  QR_CHECK(MprotectBarrier(),
           "membarrier() and mprotect() failed while revoking a ShardLock's read bias");
}

/// Makes every CPU running a thread of this process pass a full memory barrier.
void HeavyBarrier() {
  const uint64_t n = g_fences_started.fetch_add(1, std::memory_order_seq_cst) + 1;
  MembarrierOrDie();
  uint64_t done = g_fences_done.load(std::memory_order_relaxed);
  while (done < n && !g_fences_done.compare_exchange_weak(done, n, std::memory_order_release,
                                                          std::memory_order_relaxed)) {
  }
}

uint32_t ComputeNumSlots() {
  const uint32_t cpus = std::max(1u, std::thread::hardware_concurrency());
  uint32_t n = 1;
  while (n < cpus && n < ShardLock::kMaxSlots) n <<= 1;
  return n;
}

}  // namespace

uint32_t ShardLock::NumSlots() {
  static const uint32_t n = ComputeNumSlots();
  return n;
}

ShardLock::ShardLock()
    : slot_mask_(NumSlots() - 1),
      slots_(new Slot[NumSlots()]),
      rebias_after_ns_(ReadBiasSupported() ? 0 : kNeverNs) {}

bool ShardLock::ReadBiasSupported() {
  static const bool supported = [] {
    const int cmds = Membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return supported;
}

uint64_t ShardLock::biased_reads() {
  uint64_t n = 0;
  for (const BiasedReader* r = g_biased_readers.load(std::memory_order_acquire); r != nullptr;
       r = r->next) {
    n += r->reads.load(std::memory_order_relaxed);
  }
  return n;
}

void ShardLock::RefreshRebiasClock() {
  internal::tls_rebias_clock_countdown = kClockRefreshEvery;
  internal::tls_rebias_clock_ns = MonotonicNs();
}

void ShardLock::MaybeRebias(uint32_t slot) {
  // Nested holds take slots while biased; a writer flagged now would revoke at once.
  if (bias_.load(std::memory_order_relaxed) != 0 ||
      slots_[slot].writer.load(std::memory_order_relaxed) != kNoWriter) {
    return;
  }
  const int64_t now = MonotonicNs();
  internal::tls_rebias_clock_ns = now;
  if (now < rebias_after_ns_.load(std::memory_order_relaxed)) return;
  // This thread holds the lock through a slot, so no writer is past its drain: the writer
  // that comes next reads the flag after this thread's exit and revokes it.
  biased_at_ns_.store(now, std::memory_order_relaxed);
  // Release: pairs with a read-biased reader's acquire check of the flag (this thread's hold
  // happens after the last writer's unlock).
  bias_.store(1, std::memory_order_release);
}

void ShardLock::Fence() { HeavyBarrier(); }

int64_t ShardLock::NowNs() { return MonotonicNs(); }

uint64_t ShardLock::read_bias_fences() {
  return g_fences_started.load(std::memory_order_relaxed);
}

uint64_t ShardLock::read_bias_fallback_fences() {
  return g_fallback_fences.load(std::memory_order_relaxed);
}

void ShardLock::LowerBias(int64_t now_ns) {
  lowered_ns_ = now_ns;
  // seq_cst: the store is visible to every CPU before the barrier count is read below, so a
  // barrier numbered after that count runs after the store on every CPU.
  bias_.store(0, std::memory_order_seq_cst);
  lowered_at_ = g_fences_started.load(std::memory_order_seq_cst);
}

bool ShardLock::LowerReadBiasAhead(int64_t now_ns) {
  // Not while a writer holds the lock: that writer's lock() revokes the bias itself.
  if (!writer_lock_.try_lock_uncounted()) return false;
  const bool biased = bias_.load(std::memory_order_relaxed) != 0;
  if (biased) {
    // The slots are not flagged: keep their readers from raising the bias again before the
    // writer comes (one that does anyway makes that writer revoke it in full, barrier and all).
    rebias_after_ns_.store(now_ns + (kInhibitNs << inhibit_shift_), std::memory_order_relaxed);
    LowerBias(now_ns);
  }
  writer_lock_.unlock();
  return biased;
}

bool ShardLock::RevokeBias(bool wait) {
  if (bias_.load(std::memory_order_relaxed) != 0) LowerBias(MonotonicNs());
  // The writer half of the asymmetric Dekker: a reader whose hold store this barrier did not
  // make visible runs its check of the flag after it, and sees the flag down. A barrier since
  // the lowering (a ReadBiasBatch's, another lock's revocation's) does as well.
  if (!FencedSince(lowered_at_)) HeavyBarrier();
  // Acquire (seq_cst under TSan): a reader's release of its hold happens before our changes.
  constexpr std::memory_order kScanOrder =
      kHoldOrder == std::memory_order_seq_cst ? std::memory_order_seq_cst
                                              : std::memory_order_acquire;
  for (const BiasedReader* r = g_biased_readers.load(std::memory_order_acquire); r != nullptr;
       r = r->next) {
    if (r->hold.load(kScanOrder) != this) continue;
    // try_lock fails. The bias stays down and lowered_at_ set: the next writer waits for
    // this reader (a barrier has followed the lowering, so it makes none).
    if (!wait) return false;
    // A read-biased hold is one lookup's copy-out or one short callback; its thread may have
    // been preempted, so spin a little, then give the CPU away until it lets go. It never
    // wakes anyone (its release is a plain store), so there is nothing to sleep on.
    for (int i = 0; r->hold.load(kScanOrder) == this; ++i) {
      if (i < SpinLock::kSpinRounds) {
        CpuRelax();
      } else if (i < SpinLock::kSpinRounds + kYieldRounds) {
        sched_yield();
      } else {
        const timespec pause{0, kHoldPollNs};
        nanosleep(&pause, nullptr);
      }
    }
  }
  lowered_at_ = kNotLowered;
  bias_revocations_.fetch_add(1, std::memory_order_relaxed);
  // The inhibition counts from the lowering (a batch reads the clock once for all its locks).
  const int64_t now = lowered_ns_;
  if (now - biased_at_ns_.load(std::memory_order_relaxed) < kShortBiasNs) {
    inhibit_shift_ = std::min(inhibit_shift_ + kInhibitShiftStep, kMaxInhibitShift);
  } else {
    inhibit_shift_ = 0;
  }
  rebias_after_ns_.store(now + (kInhibitNs << inhibit_shift_), std::memory_order_relaxed);
  return true;
}

uint32_t ShardLock::AssignThreadSlot() {
  static std::atomic<uint32_t> next{0};
  tls_slot_ = next.fetch_add(1, std::memory_order_relaxed) & (kMaxSlots - 1);
  return tls_slot_;
}

uint64_t ShardLock::shared_acquisitions() const {
  // Exits first, then back-offs: a step back is counted in the back-offs before its exit, and
  // the acquire loads of the exits make those back-offs visible to the load below. So every
  // step back summed here is also subtracted, and the difference never runs ahead of the true
  // count (it may lag: back-offs whose exits came after the sum, clamped at 0).
  uint64_t n = 0;
  for (uint32_t i = 0; i <= slot_mask_; ++i) n += slots_[i].exited.load(std::memory_order_acquire);
  const uint64_t backoffs = reader_backoffs_.load(std::memory_order_relaxed);
  const uint64_t value = n > backoffs ? n - backoffs : 0;
  // Report the largest value seen: a lagging read never makes the counter step back (a
  // Prometheus counter that decreases reads as a reset). Exact when no reader is stepping back.
  uint64_t seen = max_reported_.load(std::memory_order_relaxed);
  while (seen < value &&
         !max_reported_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
  return std::max(seen, value);
}

void ShardLock::LockSharedSlow(uint32_t slot) {
  reader_waits_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[slot];
  for (;;) {
    // Step back so the writer can proceed (waking it if it sleeps on this slot). Counted as a
    // back-off before the exit (see shared_acquisitions()).
    reader_backoffs_.fetch_add(1, std::memory_order_relaxed);
    unlock_shared_slot(slot);
    // Wait for the writer: spin on the flag a little, then queue on the writers' lock, which
    // sleeps in the kernel and is released when the writer is done.
    for (int i = 0; i < SpinLock::kSpinRounds &&
                    s.writer.load(std::memory_order_relaxed) != kNoWriter;
         ++i) {
      CpuRelax();
    }
    if (s.writer.load(std::memory_order_relaxed) != kNoWriter) {
      // Not counted as an exclusive acquisition or contention: reader_waits_ counted this wait.
      writer_lock_.WaitUntilFree();
    }
    s.entered.fetch_add(1, std::memory_order_seq_cst);
    if (s.writer.load(std::memory_order_seq_cst) == kNoWriter) return;
  }
}

void ShardLock::WaitForReaders(uint32_t slot) {
  Slot& s = slots_[slot];
  for (int i = 0; i < SpinLock::kSpinRounds; ++i) {
    if (Drained(s)) return;
    CpuRelax();
  }
  // A reader holds on: it may have been preempted, so sleep rather than burn the CPU it needs.
  for (;;) {
    s.writer.store(kWriterSleeping, std::memory_order_seq_cst);
    const uint64_t exited = s.exited.load(std::memory_order_seq_cst);
    if (s.entered.load(std::memory_order_seq_cst) == exited) break;
    // The release that empties the slot after the store above sees kWriterSleeping and wakes
    // us; one that came before it makes FUTEX_WAIT return at once (the word moved on).
    writer_sleeps_.fetch_add(1, std::memory_order_relaxed);
    Futex(ExitedWord(&s.exited), FUTEX_WAIT, static_cast<uint32_t>(exited));
  }
  // Readers' releases need not look for a sleeper any more.
  s.writer.store(kWriterActive, std::memory_order_seq_cst);
}

void ShardLock::WakeWriterIfDrained(uint32_t slot) {
  // Only the release that leaves the slot empty wakes the writer: the others would wake it
  // for nothing. Read after this thread's own increment, like the writer's Drained().
  if (Drained(slots_[slot])) Futex(ExitedWord(&slots_[slot].exited), FUTEX_WAKE, 1);
}

}  // namespace qr
