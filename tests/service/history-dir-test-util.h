#pragma once

// The fixture of the query history's tests that write segments: a fresh directory per test.

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "service/query-history.h"
#include "testutil/wait.h"
#include "util/mutex.h"

namespace qr {

/// Holds the history's writer before each write (Options::before_write_for_testing = Hook())
/// until Release(): what is appended meanwhile queues up behind the stalled batch.
class WriteGate {
 public:
  std::function<void()> Hook() {
    return [this] {
      stalled_.fetch_add(1);
      MutexLock l(&mu_);
      while (!released_) cv_.Wait(&mu_);
    };
  }
  /// Waits until the writer is stalled on its first batch.
  ::testing::AssertionResult WaitStalled() {
    return WaitFor([this] { return stalled_.load() >= 1; }, kWaitForTimeout,
                   "the writer to stall");
  }
  void Release() {
    {
      MutexLock l(&mu_);
      released_ = true;
    }
    cv_.NotifyAll();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool released_ QR_GUARDED_BY(mu_) = false;
  std::atomic<int> stalled_{0};
};

/// A fresh temporary directory for a history ('dir_'), removed after the test.
class HistoryDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-history-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  /// Opens a history of 'o' in 'dir_', expecting success (null otherwise).
  std::unique_ptr<QueryHistory> Open(QueryHistory::Options o) {
    o.dir = dir_;
    std::unique_ptr<QueryHistory> h;
    Status s = QueryHistory::Open(std::move(o), &h);
    EXPECT_TRUE(s.ok()) << s.message();
    return h;
  }

  std::string dir_;
};

}  // namespace qr
