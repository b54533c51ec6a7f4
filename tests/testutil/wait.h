#pragma once

// The one wait helper of the tests: for a condition with no event to wait on (a counter
// another thread raises, a connection the server closes), poll it, bounded.

#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

namespace qr {

/// Longer than any condition of a passing test takes, even under TSan on a loaded machine.
inline constexpr std::chrono::milliseconds kWaitForTimeout = std::chrono::seconds(60);

/// Re-checks 'pred' (yielding in between) until it holds or 'timeout' passes. Success, or a
/// failure naming 'what' and the timeout, for EXPECT_TRUE/ASSERT_TRUE; tests must not assert
/// how long it took. Prefer a condition variable or a long-poll where the code offers one.
template <typename Pred>
[[nodiscard]] ::testing::AssertionResult WaitFor(Pred&& pred,
                                                 std::chrono::milliseconds timeout = kWaitForTimeout,
                                                 std::string_view what = "the condition") {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return ::testing::AssertionFailure()
             << "timed out after " << timeout.count() << " ms waiting for " << what;
    }
    std::this_thread::yield();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace qr
