#pragma once

// The fixture of the query history's tests that write segments: a fresh directory per test.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "service/query-history.h"

namespace qr {

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
