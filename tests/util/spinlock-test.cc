#include "util/spinlock.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/thread/lock_guard.hpp>
#include <gtest/gtest.h>

#include "testutil/wait.h"

namespace qr {
namespace {

// Balanced for the thread-safety analysis: true when the lock was free (and is free again).
bool TryLockAndRelease(SpinLock& lock) {
  if (!lock.try_lock()) return false;
  lock.unlock();
  return true;
}

void HammerCounter(int num_threads, int increments_per_thread) {
  SpinLock lock;
  int64_t counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < increments_per_thread; ++i) {
        std::lock_guard<SpinLock> l(lock);
        ++counter;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, int64_t{num_threads} * increments_per_thread);
  EXPECT_EQ(lock.acquisitions(), uint64_t(num_threads) * increments_per_thread);
  // Only a locker about to sleep marks the word "sleepers may exist", once per FUTEX_WAIT or
  // once when it finally takes the lock that way, and each unlock that finds the mark clears
  // it: so wake-ups never outnumber sleeps plus contended acquisitions (the previous protocol
  // woke on every unlock while anyone slept, far more often than that).
  EXPECT_LE(lock.wakes(), lock.sleeps() + lock.contended_acquisitions());
  EXPECT_LE(lock.contended_acquisitions(), lock.acquisitions());
}

TEST(SpinLockTest, EightThreadsMillionIncrementsEachAreExact) { HammerCounter(8, 1000000); }

TEST(SpinLockTest, ThirtyTwoThreadsOnTwoCoresFinish) {
  // Far more threads than cores: a holder is often preempted. A pure spinlock would still
  // finish, but slowly; the adaptive lock sleeps instead, and the test is bounded by ctest.
  HammerCounter(32, 100000);
}

TEST(SpinLockTest, TryLockFailsWhileHeld) {
  SpinLock lock;
  ASSERT_TRUE(TryLockAndRelease(lock));
  lock.lock();
  lock.DCheckLocked();
  std::thread other([&] { EXPECT_FALSE(TryLockAndRelease(lock)); });
  other.join();
  lock.unlock();
  EXPECT_TRUE(TryLockAndRelease(lock));
  EXPECT_EQ(lock.acquisitions(), 3u);
  EXPECT_EQ(lock.contended_acquisitions(), 0u);
}

TEST(SpinLockTest, WorksWithBoostLockGuard) {
  SpinLock lock;
  {
    boost::lock_guard<SpinLock> l(lock);
    EXPECT_FALSE(TryLockAndRelease(lock));
  }
  EXPECT_TRUE(TryLockAndRelease(lock));
}

TEST(SpinLockTest, ContendedLockerSleepsAndIsWokenByUnlock) {
  SpinLock lock;
  lock.lock();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    lock.lock();
    acquired.store(true);
    lock.unlock();
  });
  // The waiter must first count a contended acquisition, then give up spinning and sleep.
  EXPECT_TRUE(WaitFor([&] { return lock.contended_acquisitions() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return lock.sleeps() >= 1; }));
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(lock.acquisitions(), 2u);
}

// WaitUntilFree queues behind the holder (sleeping) and returns once it unlocks, leaving the
// lock free, without counting an acquisition or a contended one.
TEST(SpinLockTest, WaitUntilFreeWaitsForTheHolderAndIsNotAnAcquisition) {
  SpinLock lock;
  lock.WaitUntilFree();  // Free: returns at once.
  lock.lock();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    lock.WaitUntilFree();
    returned.store(true);
  });
  EXPECT_TRUE(WaitFor([&] { return lock.sleeps() >= 1; }));
  EXPECT_FALSE(returned.load()) << "returned while the lock was held";
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(lock.acquisitions(), 1u);
  EXPECT_EQ(lock.contended_acquisitions(), 0u);
  EXPECT_GE(lock.wakes(), 1u) << "the holder's unlock woke the sleeping waiter";
  EXPECT_TRUE(TryLockAndRelease(lock)) << "WaitUntilFree left the lock held";
}

TEST(SpinLockTest, UncontendedUseNeverSleeps) {
  SpinLock lock;
  for (int i = 0; i < 1000; ++i) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_EQ(lock.contended_acquisitions(), 0u);
  EXPECT_EQ(lock.sleeps(), 0u);
  EXPECT_EQ(lock.wakes(), 0u);
}

TEST(SpinLockTest, WokenHolderPassesTheWakeOnAndFastPathNeverWakes) {
  SpinLock lock;
  lock.lock();
  std::atomic<int> acquired{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&] {
      lock.lock();
      acquired.fetch_add(1);
      lock.unlock();
    });
  }
  // Both waiters give up spinning and sleep: two contended acquisitions, at least two sleeps.
  EXPECT_TRUE(WaitFor([&] { return lock.contended_acquisitions() == 2 && lock.sleeps() >= 2; }));
  EXPECT_EQ(acquired.load(), 0);
  // The holder saw the sleepers' mark: its unlock wakes one; that waiter took the lock still
  // marked (others may sleep), so its unlock wakes the next: no wake-up is lost.
  lock.unlock();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(acquired.load(), 2);
  EXPECT_GE(lock.wakes(), 2u);
  EXPECT_LE(lock.wakes(), lock.sleeps() + lock.contended_acquisitions());
  // Once nobody sleeps, taking the lock through the fast path never issues a wake-up.
  const uint64_t wakes = lock.wakes();
  for (int i = 0; i < 1000; ++i) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_EQ(lock.wakes(), wakes);
  EXPECT_EQ(lock.contended_acquisitions(), 2u);
}

}  // namespace
}  // namespace qr
