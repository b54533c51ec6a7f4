// ShardLock: exclusion between writers, writers against readers, readers in parallel, no lost
// wake-ups when oversubscribed. Run under TSan in CI.

#include "util/shard-lock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testutil/wait.h"

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

TEST(ShardLockTest, WriterWaitsForReadersAndReadersForWriter) {
  ShardLock lock;
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

}  // namespace
}  // namespace qr
