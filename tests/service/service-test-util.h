#pragma once

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <gtest/gtest.h>

#include "runtime/sample-db.h"
#include "service/coordinator-server.h"
#include "test-client.h"

/// The fixture of the service tests: one sample database per test suite (generated in
/// SetUpTestSuite into a private temporary directory, removed in TearDownTestSuite) and
/// in-process CoordinatorServers on free ports over it.

#if defined(__SANITIZE_THREAD__)
#define QR_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QR_TEST_UNDER_TSAN 1
#endif
#endif
#ifndef QR_TEST_UNDER_TSAN
#define QR_TEST_UNDER_TSAN 0
#endif

namespace qr::testing {

using namespace std::chrono_literals;

/// A query that runs until it is canceled (or hits a time limit).
inline constexpr const char* kEndlessQuery =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

/// Row counts of the sample database at scale factor 0.01.
inline constexpr int kNationRows = 25;
inline constexpr int kRegionRows = 5;
inline constexpr int kCustomerRows = 1500;
inline constexpr int kOrdersRows = 15000;
/// lineitem's row count depends on generated order sizes (~4 per order).
inline constexpr int kLineitemRows = 59693;

/// Holds every task of the listing threads (--queries_list_threads) on entry until Release():
/// Install() it into a server's options, then wait for entered(). Released when destroyed, so
/// that a failed assertion does not leave a thread held at shutdown. The hook shares its state,
/// so it stays valid should a task start after this object is gone.
class HeldPageWorkers {
 public:
  HeldPageWorkers() : state_(std::make_shared<State>()) {
    state_->released = state_->release.get_future().share();
  }
  ~HeldPageWorkers() { Release(); }
  HeldPageWorkers(const HeldPageWorkers&) = delete;
  HeldPageWorkers& operator=(const HeldPageWorkers&) = delete;

  void Install(CoordinatorServer::Options* options) const {
    options->queries_list.before_task = [state = state_] {
      state->entered.fetch_add(1);
      state->released.wait();
    };
  }
  /// Tasks that have started (and, before Release(), are held).
  int entered() const { return state_->entered.load(); }
  void Release() {
    if (!std::exchange(state_->done, true)) state_->release.set_value();
  }

 private:
  struct State {
    std::promise<void> release;
    std::shared_future<void> released;
    std::atomic<int> entered{0};
    bool done = false;  // the test's thread only
  };
  const std::shared_ptr<State> state_;
};

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // glog timestamps every LOG line through mktime(), which re-reads an unset TZ under a
    // glibc lock TSan cannot see (a false race report); naming the zone avoids the re-read.
    setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-service-test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << "mkdtemp failed for " << tmpl;
    data_dir_ = tmpl;
    std::string path;
    Status s = EnsureSampleDatabase(data_dir_, 0.01, &path);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  static void TearDownTestSuite() {
    std::error_code ec;
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_, ec);
    data_dir_.clear();
  }

  /// A server on a free port over the suite's sample database.
  static CoordinatorServer::Options DefaultOptions() {
    CoordinatorServer::Options o;
    o.data_dir = data_dir_;
    o.sample_scale_factor = 0.01;
    o.num_query_threads = 2;
    o.http.port = 0;
    o.http.num_threads = 2;
    return o;
  }

  /// Starts a server with 'options'; the test fails (returning nullptr) if it cannot.
  static std::unique_ptr<CoordinatorServer> StartServer(CoordinatorServer::Options options) {
    auto server = std::make_unique<CoordinatorServer>(std::move(options));
    Status s = server->Start();
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return nullptr;
    EXPECT_GT(server->port(), 0);
    return server;
  }

  static inline std::string data_dir_;
};

/// A ServiceTest with one default server per test, started in SetUp().
class DefaultServerTest : public ServiceTest {
 protected:
  void SetUp() override {
    server_ = StartServer(DefaultOptions());
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Shutdown(0);
    server_.reset();
  }

  /// "http://127.0.0.1:<port>".
  std::string Base() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

}  // namespace qr::testing
