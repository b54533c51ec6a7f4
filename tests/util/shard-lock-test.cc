// ShardLock: exclusion between writers, writers against readers, readers in parallel, no lost
// wake-ups when oversubscribed. Run under TSan in CI.

#include "util/shard-lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testutil/wait.h"
#include "util/shard-lock-testing.h"

namespace qr {
namespace {

TEST(ShardLockTest, WritersExcludeEachOther) {
  ShardLock lock;
  uint64_t counter = 0;  // Plain: only ever touched under the exclusive lock.
  constexpr int kThreads = 8, kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        WriterLockGuard l(&lock);
        ++counter;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, static_cast<uint64_t>(kThreads) * kIncrements);
  EXPECT_EQ(lock.acquisitions(), static_cast<uint64_t>(kThreads) * kIncrements);
}

// Writers keep a == b (changing both under the exclusive lock); readers under the shared lock
// must never see them differ. 32 threads on a 2-core machine also exercise the sleeping paths
// (a writer waiting for a preempted reader, readers behind writers): a lost wake-up hangs here.
TEST(ShardLockTest, ReadersNeverSeeAHalfDoneWriteEvenOversubscribed) {
  ShardLock lock;
  uint64_t a = 0, b = 0;
  std::atomic<uint64_t> torn{0}, reads{0};
  constexpr int kWriters = 8, kReaders = 24, kWrites = 3000, kReads = 30000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kWrites; ++i) {
        WriterLockGuard l(&lock);
        ++a;
        ++b;
      }
    });
  }
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReads; ++i) {
        ReaderLockGuard l(&lock);
        if (a != b) torn.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(a, static_cast<uint64_t>(kWriters) * kWrites);
  EXPECT_EQ(b, a);
  EXPECT_EQ(reads.load(), static_cast<uint64_t>(kReaders) * kReads);
}

TEST(ShardLockTest, ReadersHoldTheLockTogether) {
  ShardLock lock;
  std::atomic<int> inside{0};
  std::atomic<bool> both_seen{false};
  auto reader = [&] {
    ReaderLockGuard l(&lock);
    inside.fetch_add(1);
    // Each reader stays until the other is inside too: only a shared lock lets both in.
    if (WaitFor([&] { return inside.load() == 2; })) both_seen.store(true);
  };
  std::thread r1(reader), r2(reader);
  r1.join();
  r2.join();
  EXPECT_TRUE(both_seen.load()) << "the second reader could not enter while the first held it";
}

// Through the reader slots (ReadBias::kNever): the writer sleeps on a slot.
TEST(ShardLockTest, WriterWaitsForReadersAndReadersForWriter) {
  ShardLock lock;
  lock.set_read_bias(ReadBias::kNever);
  std::atomic<bool> release_reader{false}, writer_in{false};
  std::atomic<bool> reader_in{false};
  std::thread reader([&] {
    ReaderLockGuard l(&lock);
    reader_in.store(true);
    ASSERT_TRUE(WaitFor([&] { return release_reader.load(); }));
  });
  // EXPECT, not ASSERT, while threads are joinable: an early return would terminate the binary.
  EXPECT_TRUE(WaitFor([&] { return reader_in.load(); }));
  if (lock.try_lock()) {
    lock.unlock();
    ADD_FAILURE() << "try_lock succeeded while a reader is inside";
  }
  std::thread writer([&] {
    lock.lock();
    writer_in.store(true);
    lock.unlock();
  });
  // The writer cannot be in while the reader holds the lock; it spins, then sleeps in the
  // kernel until the reader's release wakes it.
  EXPECT_TRUE(WaitFor([&] { return lock.sleeps() >= 1; }));
  EXPECT_FALSE(writer_in.load());
  release_reader.store(true);
  reader.join();
  EXPECT_TRUE(WaitFor([&] { return writer_in.load(); }));
  writer.join();

  // A reader meets a writer: it waits until the writer is done.
  lock.lock();
  std::atomic<bool> late_reader_in{false};
  std::thread late_reader([&] {
    ReaderLockGuard l(&lock);
    late_reader_in.store(true);
  });
  // EXPECT, not ASSERT: returning here would leave the lock held (and the thread unjoined).
  EXPECT_TRUE(WaitFor([&] { return lock.contended_acquisitions() >= 1; }))
      << "the late reader meets the writer's flag";
  EXPECT_FALSE(late_reader_in.load());
  lock.unlock();
  EXPECT_TRUE(WaitFor([&] { return late_reader_in.load(); }));
  late_reader.join();
  if (lock.try_lock()) {
    lock.unlock();
  } else {
    ADD_FAILURE() << "try_lock failed on a free lock";
  }
  // Two reads completed; the late reader's steps back before the writer are not acquisitions.
  EXPECT_EQ(lock.shared_acquisitions(), 2u);
}

// Readers and writers contend while a third party polls the shared-acquisition count, as a
// metrics scrape does: it must never decrease (a decreasing counter reads as a reset), and once
// everyone is done it is exact.
TEST(ShardLockTest, SharedAcquisitionCountIsMonotonicAndExact) {
  constexpr int kReaders = 3;
  constexpr int kReads = 20000;
  ShardLock lock;
  lock.set_read_bias(ReadBias::kNever);  // Every read counted per lock.
  std::atomic<int> readers_running{kReaders};
  std::atomic<bool> writer_done{false};
  uint64_t writes = 0;  // Written by the writer thread, read after it is joined.
  std::vector<std::thread> threads;
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReads; ++i) ReaderLockGuard l(&lock);
      readers_running.fetch_sub(1);
    });
  }
  // Writes for as long as the readers read, so that readers keep stepping back for it.
  threads.emplace_back([&] {
    while (readers_running.load() > 0) {
      WriterLockGuard l(&lock);
      ++writes;
    }
    writer_done.store(true);
  });
  uint64_t last = 0, decreases = 0, polls = 0;
  while (!writer_done.load()) {
    const uint64_t now = lock.shared_acquisitions();
    if (now < last) ++decreases;
    last = now;
    ++polls;
  }
  for (auto& th : threads) th.join();
  const std::string context = "over " + std::to_string(polls) + " polls, " +
                              std::to_string(lock.contended_acquisitions()) + " reader waits";
  EXPECT_EQ(decreases, 0u) << context;
  EXPECT_GE(lock.shared_acquisitions(), last) << context;
  EXPECT_EQ(lock.shared_acquisitions(), uint64_t{kReaders} * kReads) << context;
  EXPECT_EQ(lock.acquisitions(), writes) << "readers waiting are not exclusive; " << context;
}

TEST(ShardLockTest, CountsSharedAndExclusiveAcquisitions) {
  ShardLock lock;
  lock.set_read_bias(ReadBias::kNever);
  for (int i = 0; i < 5; ++i) {
    ReaderLockGuard l(&lock);
  }
  for (int i = 0; i < 3; ++i) {
    WriterLockGuard l(&lock);
  }
  EXPECT_EQ(lock.shared_acquisitions(), 5u);
  EXPECT_EQ(lock.acquisitions(), 3u);
  EXPECT_EQ(lock.contended_acquisitions(), 0u);
  EXPECT_GE(ShardLock::NumSlots(), 1u);
  EXPECT_LE(ShardLock::NumSlots(), ShardLock::kMaxSlots);
  EXPECT_EQ(ShardLock::NumSlots() & (ShardLock::NumSlots() - 1), 0u) << "a power of two";
}

/// Reads 'lock' shared until it is read-biased (a slot read re-biases a lock that no writer
/// has revoked lately), then once more: a thread's first read of a read-biased lock takes a
/// slot and registers the thread.
::testing::AssertionResult ReadUntilBiased(ShardLock* lock) {
  ::testing::AssertionResult biased = WaitFor(
      [&] {
        ReaderLockGuard l(lock);
        return lock->read_biased();
      },
      kWaitForTimeout, "the lock to turn read-biased");
  { ReaderLockGuard l(lock); }
  return biased;
}

TEST(ShardLockTest, ReadBiasComesWithoutWritersAndAWriterRevokesIt) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  ShardLock lock;
  ASSERT_TRUE(ReadUntilBiased(&lock));
  const uint64_t slot_reads = lock.shared_acquisitions();
  const uint64_t biased_before = ShardLock::biased_reads();
  for (int i = 0; i < 10; ++i) {
    const uint32_t slot = lock.lock_shared();
    EXPECT_EQ(slot, ShardLock::kBiasedSlot);
    lock.unlock_shared(slot);
  }
  EXPECT_EQ(lock.shared_acquisitions(), slot_reads) << "biased reads take no slot";
  EXPECT_GE(ShardLock::biased_reads(), biased_before + 10);
  {
    WriterLockGuard l(&lock);
    EXPECT_FALSE(lock.read_biased());
  }
  EXPECT_EQ(lock.bias_revocations(), 1u);
  // Only after the inhibition (a few ms) does the lock turn read-biased again.
  EXPECT_TRUE(ReadUntilBiased(&lock));

  // A lock that must count every read never turns read-biased.
  ShardLock counted;
  counted.set_read_bias(ReadBias::kNever);
  for (int i = 0; i < 1000; ++i) ReaderLockGuard l(&counted);
  EXPECT_FALSE(counted.read_biased());
  EXPECT_EQ(counted.shared_acquisitions(), 1000u);
}

// The two halves of lock_shared() that ShardedQueryMap's lookups use: a read-biased lock gives
// a read-biased hold (a writer cannot get in beside it), a second lock read meanwhile gets no
// read-biased hold but a slot, and after the release a writer gets in.
TEST(ShardLockTest, TheTwoHalvesOfASharedHold) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  ShardLock lock, other;
  ASSERT_TRUE(ReadUntilBiased(&lock));
  ASSERT_TRUE(ReadUntilBiased(&other));
  const auto try_write = [&] {
    bool got = false;
    std::thread([&] {
      if (lock.try_lock()) {
        lock.unlock();
        got = true;
      }
    }).join();
    return got;
  };
  if (internal::BiasedReader* hold = lock.try_lock_shared_biased()) {
    EXPECT_FALSE(try_write()) << "a writer got in beside a read-biased hold";
    if (internal::BiasedReader* nested = other.try_lock_shared_biased()) {
      other.unlock_shared_biased(nested);
      ADD_FAILURE() << "a second read-biased hold on one thread";
    }
    const uint64_t slot_reads = other.shared_acquisitions();
    const uint32_t slot = other.lock_shared_slot();
    other.unlock_shared_slot(slot);
    EXPECT_EQ(other.shared_acquisitions(), slot_reads + 1);
    lock.unlock_shared_biased(hold);
  } else {
    ADD_FAILURE() << "a read-biased lock gave no read-biased hold";
  }
  EXPECT_TRUE(try_write());
  EXPECT_EQ(lock.bias_revocations(), 1u);
}

// A read-biased reader holds the lock with nothing but its thread's hold word: try_lock fails
// (and leaves the reader's hold valid for the next writer), a writer waits until it leaves,
// and a second lock read meanwhile (nested) takes a slot.
TEST(ShardLockTest, WriterWaitsForAReadBiasedReader) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  ShardLock lock, other;
  ASSERT_TRUE(ReadUntilBiased(&lock));
  ASSERT_TRUE(ReadUntilBiased(&other));
  std::atomic<bool> reader_in{false}, release_reader{false}, writer_in{false};
  std::atomic<uint32_t> reader_slot{0}, nested_slot{0};
  std::thread reader([&] {
    // A thread's first read of a read-biased lock takes a slot and registers the thread.
    { ReaderLockGuard first(&lock); }
    const uint32_t slot = lock.lock_shared();
    reader_slot.store(slot);
    const uint32_t nested = other.lock_shared();  // One biased hold per thread: a slot.
    nested_slot.store(nested);
    other.unlock_shared(nested);
    reader_in.store(true);
    EXPECT_TRUE(WaitFor([&] { return release_reader.load(); }));
    lock.unlock_shared(slot);
  });
  EXPECT_TRUE(WaitFor([&] { return reader_in.load(); }));
  EXPECT_EQ(reader_slot.load(), ShardLock::kBiasedSlot);
  EXPECT_NE(nested_slot.load(), ShardLock::kBiasedSlot);
  if (lock.try_lock()) {
    lock.unlock();
    ADD_FAILURE() << "try_lock succeeded while a read-biased reader is inside";
  }
  EXPECT_EQ(lock.bias_revocations(), 0u) << "a failed try_lock revokes nothing";
  std::thread writer([&] {
    lock.lock();
    writer_in.store(true);
    lock.unlock();
  });
  // The writer revokes the bias, then waits for the reader's hold to go.
  EXPECT_TRUE(WaitFor([&] { return !lock.read_biased(); }));
  EXPECT_FALSE(writer_in.load());
  release_reader.store(true);
  reader.join();
  EXPECT_TRUE(WaitFor([&] { return writer_in.load(); }));
  writer.join();
  EXPECT_EQ(lock.bias_revocations(), 1u);
}

// fork() copies only the thread that calls it. In the child the hold records of the parent's
// other threads are free for the child's threads, except one whose thread was inside a
// read-biased lookup at the fork: that lock stays held shared in the child.
TEST(ShardLockTest, AForkedChildFreesTheRecordsOfThreadsItDoesNotHave) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  ShardLock lock;
  ASSERT_TRUE(ReadUntilBiased(&lock));
  std::atomic<int> ready{0};
  std::atomic<bool> release{false};
  std::thread idle([&] {
    { ReaderLockGuard first(&lock); }  // Registers the thread.
    ready.fetch_add(1);
    EXPECT_TRUE(WaitFor([&] { return release.load(); }));
  });
  std::thread inside([&] {
    { ReaderLockGuard first(&lock); }
    const uint32_t slot = lock.lock_shared();
    EXPECT_EQ(slot, ShardLock::kBiasedSlot);
    ready.fetch_add(1);
    EXPECT_TRUE(WaitFor([&] { return release.load(); }));
    lock.unlock_shared(slot);
  });
  EXPECT_TRUE(WaitFor([&] { return ready.load() == 2; }));
  const size_t in_use = internal::BiasedReadersInUse();
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: no allocation, no gtest, an exit code.
    int code = 0;
    if (internal::BiasedReadersInUse() != in_use - 1) code |= 1;
    if (lock.try_lock()) {
      lock.unlock();
      code |= 2;
    }
    _exit(code);
  }
  ASSERT_GT(pid, 0) << "fork";
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(internal::BiasedReadersInUse(), in_use) << "the parent's records changed";
  release.store(true);
  idle.join();
  inside.join();
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit: " << status;
  EXPECT_EQ(WEXITSTATUS(status) & 1, 0)
      << "the child's records in use are not the parent's less the idle thread's";
  EXPECT_EQ(WEXITSTATUS(status) & 2, 0)
      << "a lock held read-biased by another thread at the fork is not held in the child";
}

// Writers keep a == b; readers, read-biased whenever the lock is, must never see them differ.
// The writer waits until the readers have re-biased the lock before each write, so every
// write revokes a bias with readers inside or arriving (each bias lasts a few ms: the
// inhibition grows x8 each round up to ~1 s: 8 + 64 + 512 + 5 x 1024 ms, ~5.7 s in all).
TEST(ShardLockTest, ReadBiasedReadersNeverSeeAHalfDoneWrite) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  constexpr int kReaders = 3, kRounds = 8;
  ShardLock lock;
  uint64_t a = 0, b = 0;
  std::atomic<uint64_t> torn{0}, reads{0};
  std::atomic<bool> stop{false};
  const uint64_t biased_before = ShardLock::biased_reads();
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        ReaderLockGuard l(&lock);
        // A hold long enough that a writer usually arrives while some reader is inside.
        const uint64_t a_seen = a;
        for (int i = 0; i < 200; ++i) reads.fetch_add(1, std::memory_order_relaxed);
        if (a_seen != b) torn.fetch_add(1);
      }
    });
  }
  int rounds = 0;
  for (; rounds < kRounds; ++rounds) {
    // EXPECT, not ASSERT, while threads are joinable.
    if (!WaitFor([&] { return lock.read_biased(); })) {
      ADD_FAILURE() << "the readers never re-biased the lock in round " << rounds;
      break;
    }
    WriterLockGuard l(&lock);
    ++a;
    ++b;
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(a, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(lock.bias_revocations(), static_cast<uint64_t>(kRounds));
  EXPECT_GT(ShardLock::biased_reads(), biased_before) << "some reads were read-biased";
  EXPECT_GT(reads.load(), 0u);
}

// When membarrier() is refused after start-up (a seccomp filter installed since), a revocation
// falls back to the page-protection barrier instead of aborting: readers, read-biased
// whenever the lock is, still never see a write half done, and the fallback is counted.
TEST(ShardLockTest, RevocationsWithoutMembarrierUseThePageProtectionBarrier) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
#if !defined(__x86_64__)
  GTEST_SKIP() << "the page-protection barrier is x86 only";
#endif
  struct Restore {
    ~Restore() { internal::g_shard_lock_force_mprotect_barrier.store(false); }
  } restore;
  internal::g_shard_lock_force_mprotect_barrier.store(true);
  constexpr int kReaders = 2, kRounds = 3;
  ShardLock lock;
  uint64_t a = 0, b = 0;
  std::atomic<uint64_t> torn{0};
  std::atomic<bool> stop{false};
  const uint64_t fallbacks = ShardLock::read_bias_fallback_fences();
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        ReaderLockGuard l(&lock);
        const uint64_t a_seen = a;
        if (a_seen != b) torn.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < kRounds; ++round) {
    // EXPECT, not ASSERT, while threads are joinable.
    if (!WaitFor([&] { return lock.read_biased(); })) {
      ADD_FAILURE() << "the readers never re-biased the lock in round " << round;
      break;
    }
    WriterLockGuard l(&lock);
    ++a;
    ++b;
  }
  stop.store(true);
  for (auto& th : readers) th.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(a, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(lock.bias_revocations(), static_cast<uint64_t>(kRounds));
  EXPECT_EQ(ShardLock::read_bias_fallback_fences(), fallbacks + kRounds);
}

// A walk's ReadBiasBatch: Lower() every lock, one Fence(), then each lock() waits only for
// the read-biased readers still inside, with no membarrier() of its own. A lock lowered ahead
// with no fence since makes its own. Only the try_lock_shared_biased() half is used
// after the lowering: a slot read could raise a bias again once the inhibition (1 ms) is over.
TEST(ShardLockTest, BiasesLoweredAheadShareOneFence) {
  if (!ShardLock::ReadBiasSupported()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here";
  constexpr int kLocks = 4;
  ShardLock locks[kLocks];
  for (ShardLock& lock : locks) ASSERT_TRUE(ReadUntilBiased(&lock));
  std::atomic<bool> reader_in{false}, release_reader{false};
  std::atomic<uint32_t> reader_slot{0};
  std::thread reader([&] {
    { ReaderLockGuard first(&locks[0]); }  // Registers the thread.
    const uint32_t slot = locks[0].lock_shared();
    reader_slot.store(slot);
    reader_in.store(true);
    EXPECT_TRUE(WaitFor([&] { return release_reader.load(); }));
    locks[0].unlock_shared(slot);
  });
  ASSERT_TRUE(WaitFor([&] { return reader_in.load(); }));
  EXPECT_EQ(reader_slot.load(), ShardLock::kBiasedSlot);

  const uint64_t fences = ShardLock::read_bias_fences();
  ReadBiasBatch batch;
  for (ShardLock& lock : locks) {
    EXPECT_TRUE(batch.Lower(&lock));
    EXPECT_FALSE(lock.read_biased());
    EXPECT_FALSE(batch.Lower(&lock)) << "nothing left to lower";
  }
  EXPECT_EQ(ShardLock::read_bias_fences(), fences) << "lowering makes no system call";
  batch.Fence();
  EXPECT_EQ(ShardLock::read_bias_fences(), fences + 1);
  batch.Fence();
  EXPECT_EQ(ShardLock::read_bias_fences(), fences + 1) << "nothing lowered since the fence";
  // A new reader gets no read-biased hold any more.
  if (internal::BiasedReader* hold = locks[1].try_lock_shared_biased()) {
    locks[1].unlock_shared_biased(hold);
    ADD_FAILURE() << "a read-biased hold after the bias was lowered";
  }
  // The reader of locks[0] is still inside: no writer gets in, and none makes a fence.
  if (locks[0].try_lock()) {
    locks[0].unlock();
    ADD_FAILURE() << "try_lock succeeded beside a read-biased reader of a lowered bias";
  }
  for (int i = 1; i < kLocks; ++i) {
    WriterLockGuard l(&locks[i]);
  }
  EXPECT_EQ(ShardLock::read_bias_fences(), fences + 1) << "the writers shared the one fence";
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    WriterLockGuard l(&locks[0]);
    writer_in.store(true);
  });
  release_reader.store(true);
  reader.join();
  EXPECT_TRUE(WaitFor([&] { return writer_in.load(); }));
  writer.join();
  EXPECT_EQ(ShardLock::read_bias_fences(), fences + 1);
  for (int i = 0; i < kLocks; ++i) {
    EXPECT_EQ(locks[i].bias_revocations(), 1u);
    // locks[0]: the failed try_lock counts, as it always did.
    EXPECT_EQ(locks[i].acquisitions(), i == 0 ? 2u : 1u)
        << "lowering ahead is not an exclusive acquisition";
  }

  // Lowered ahead with no fence after it: the writer makes the fence itself.
  ShardLock alone;
  ASSERT_TRUE(ReadUntilBiased(&alone));
  ASSERT_TRUE(ReadBiasBatch().Lower(&alone));
  const uint64_t before = ShardLock::read_bias_fences();
  { WriterLockGuard l(&alone); }
  EXPECT_EQ(ShardLock::read_bias_fences(), before + 1);
  EXPECT_EQ(alone.bias_revocations(), 1u);
}

}  // namespace
}  // namespace qr
