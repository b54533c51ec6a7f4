// A stalled disk never blocks a query: the history's writes and syncs go through
// HistoryFileOps, which these tests hold blocked while queries keep completing.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "service/debug-pages.h"
#include "service/query-history.h"
#include "service-test-util.h"
#include "testutil/log-capture.h"
#include "testutil/wait.h"
#include "util/mutex.h"

namespace qr::testing {
namespace {

/// The real calls, except that a stalled kind blocks until Release(), as on a hung disk.
class StallingFileOps : public HistoryFileOps {
 public:
  void Stall(bool writes, bool syncs) {
    MutexLock l(&mu_);
    stall_writes_ = writes;
    stall_syncs_ = syncs;
  }
  void Release() {
    {
      MutexLock l(&mu_);
      stall_writes_ = stall_syncs_ = false;
    }
    cv_.NotifyAll();
  }
  /// Calls blocked right now.
  int blocked() const {
    MutexLock l(&mu_);
    return blocked_;
  }
  ssize_t Write(int fd, const void* data, size_t size) override {
    WaitWhile(/*write=*/true);
    return HistoryFileOps::Write(fd, data, size);
  }
  int Fdatasync(int fd) override {
    WaitWhile(/*write=*/false);
    return HistoryFileOps::Fdatasync(fd);
  }

 private:
  void WaitWhile(bool write) {
    MutexLock l(&mu_);
    ++blocked_;
    while (write ? stall_writes_ : stall_syncs_) cv_.Wait(&mu_);
    --blocked_;
  }

  mutable Mutex mu_;
  CondVar cv_;
  bool stall_writes_ QR_GUARDED_BY(mu_) = false;
  bool stall_syncs_ QR_GUARDED_BY(mu_) = false;
  int blocked_ QR_GUARDED_BY(mu_) = 0;
};

class QueryHistoryStallTest : public ServiceTest {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-history-stall-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    history_dir_ = tmpl;
    ops_ = std::make_shared<StallingFileOps>();
  }
  void TearDown() override {
    ops_->Release();  // the server's writer must be able to finish
    if (server_) server_->Shutdown(0);
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(history_dir_, ec);
  }
  void Start(size_t queue_capacity) {
    CoordinatorServer::Options o = DefaultOptions();
    o.history.dir = history_dir_;
    o.history.sync = HistorySyncMode::kBatch;
    o.history.queue_capacity = queue_capacity;
    o.history.file_ops = ops_;
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
  }
  void RunQueries(int n) {
    for (int i = 0; i < n; ++i) {
      StatementResult r = RunStatement(server_->port(), "SELECT " + std::to_string(i));
      ASSERT_EQ(r.final_state, "FINISHED") << r.failure;
    }
  }
  QueryHistory::Stats Stats() const { return server_->history()->GetStats(); }

  std::string history_dir_;
  std::shared_ptr<StallingFileOps> ops_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(QueryHistoryStallTest, AHungSyncDelaysNoQueryAndNoWrite) {
  Start(/*queue_capacity=*/16);
  ops_->Stall(/*writes=*/false, /*syncs=*/true);
  RunQueries(1);
  // The sync thread is stuck in fdatasync(2) for the first record.
  ASSERT_TRUE(WaitFor([&] { return ops_->blocked() == 1; }));
  // Queries complete while it stays stuck, and the writer keeps writing them.
  RunQueries(40);
  ASSERT_TRUE(WaitFor([&] { return Stats().records == 41; }));
  EXPECT_EQ(ops_->blocked(), 1);
  EXPECT_EQ(Stats().dropped, 0);
  EXPECT_EQ(Stats().syncs, 0);
  ops_->Release();
  // After the release the syncs cover everything written meanwhile.
  ASSERT_TRUE(WaitFor([&] { return Stats().syncs >= 1 && ops_->blocked() == 0; }));
  EXPECT_EQ(Stats().dropped, 0);
  EXPECT_EQ(server_->history()->index().size(), 41u);
}

TEST_F(QueryHistoryStallTest, AHungWriteFillsTheQueueDropsWithAWarningAndRecovers) {
  constexpr size_t kCapacity = 8;
  LogCapture log;
  Start(kCapacity);
  ops_->Stall(/*writes=*/true, /*syncs=*/false);
  RunQueries(1);
  // The writer is stuck in write(2) with the first record's batch.
  ASSERT_TRUE(WaitFor([&] { return ops_->blocked() == 1; }));
  // Queries never wait for it: all complete; the queue fills and the rest are dropped.
  RunQueries(30);
  EXPECT_EQ(ops_->blocked(), 1);
  QueryHistory::Stats s = Stats();
  EXPECT_EQ(s.queue_length, static_cast<int64_t>(kCapacity));
  EXPECT_EQ(s.dropped, static_cast<int64_t>(30 - kCapacity));
  EXPECT_EQ(s.records, 0);
  // Never silently: counted, in /metrics, and a warning in the log.
  EXPECT_FALSE(log.Matching("records dropped so far").empty());
  EXPECT_NE(debug_pages::RenderMetrics(server_.get())
                .find("qr_history_dropped_records_total " + std::to_string(30 - kCapacity) + "\n"),
            std::string::npos);
  ops_->Release();
  // The writer writes the stuck batch and the queue, then keeps up again.
  ASSERT_TRUE(WaitFor([&] { return Stats().records == static_cast<int64_t>(1 + kCapacity); }));
  RunQueries(3);
  ASSERT_TRUE(WaitFor([&] { return Stats().records == static_cast<int64_t>(4 + kCapacity); }));
  EXPECT_EQ(Stats().dropped, static_cast<int64_t>(30 - kCapacity));
  EXPECT_EQ(Stats().queue_length, 0);
}

}  // namespace
}  // namespace qr::testing
