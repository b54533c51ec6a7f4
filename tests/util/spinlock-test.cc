#include "util/spinlock.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/thread/lock_guard.hpp>
#include <gtest/gtest.h>

namespace qr {
namespace {

// Spins (yielding) until 'pred' holds; the ctest timeout bounds a bug that never lets it.
template <typename Pred>
void WaitFor(Pred pred) {
  while (!pred()) std::this_thread::yield();
}

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
  WaitFor([&] { return lock.contended_acquisitions() == 1; });
  WaitFor([&] { return lock.sleeps() >= 1; });
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(lock.acquisitions(), 2u);
}

TEST(SpinLockTest, UncontendedUseNeverSleeps) {
  SpinLock lock;
  for (int i = 0; i < 1000; ++i) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_EQ(lock.contended_acquisitions(), 0u);
  EXPECT_EQ(lock.sleeps(), 0u);
}

}  // namespace
}  // namespace qr
