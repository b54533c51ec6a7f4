// ResultBuffer with spooling: pages beyond the memory buffer go to a spool file, in order,
// within the query's spill quota; the producer never waits until the quota is reached.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/memory-budget.h"
#include "runtime/result-buffer.h"
#include "runtime/spill-accounting.h"
#include "runtime/spool-file.h"
#include "runtime-test-util.h"

namespace qr {
namespace {

/// A page of 'n' rows whose text names the page, 'size' bytes long.
ResultPage NumberedPage(int i, size_t size) {
  std::string text = "[" + std::to_string(i) + "]";
  text.resize(std::max(size, text.size()), ' ');
  return ResultPage{std::make_shared<const std::string>(std::move(text)), 1, 8};
}

int PageNumber(const ResultPage& p) { return std::stoi(p.json_rows->substr(1)); }

class ResultSpoolTest : public ::testing::Test {
 protected:
  testing::ScopedTempDir dir_;
  SpillBudget budget_{int64_t{1} << 40};
};

TEST_F(ResultSpoolTest, ProducerNeverWaitsAndPagesComeBackInOrder) {
  constexpr int kPages = 200;
  constexpr size_t kPageBytes = 64 << 10;
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{1} << 30);
  MemoryBudget memory(int64_t{1} << 30);
  const int64_t writes_before = SpoolFile::stats().write_calls.load();
  {
    ResultBuffer buf(1000, 256 << 10);
    buf.EnableSpooling(dir_.path(), account, &memory);
    // No consumer runs: without the spool the fifth page would block this thread for ever.
    for (int i = 0; i < kPages; ++i) ASSERT_TRUE(buf.Put(NumberedPage(i, kPageBytes)));
    buf.Finish(std::nullopt);
    EXPECT_LE(buf.buffered_bytes(), 256 << 10) << "what does not fit is on disk, not in memory";
    EXPECT_GT(buf.spooled_bytes(), int64_t{150} * kPageBytes);
    EXPECT_EQ(account->used_bytes(), buf.spooled_bytes());
    // Written in batches of about 1 MiB (16 pages), not a write per page.
    EXPECT_LE(SpoolFile::stats().write_calls.load() - writes_before, kPages / 8);
    ResultPage p;
    std::optional<QueryError> err;
    for (int i = 0; i < kPages; ++i) {
      ASSERT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kPage) << "page " << i;
      ASSERT_EQ(PageNumber(p), i);
      ASSERT_EQ(p.json_rows->size(), kPageBytes);
    }
    EXPECT_EQ(buf.TryGet(&p, &err), ResultBuffer::Next::kEnd);
    EXPECT_FALSE(err.has_value());
  }
  EXPECT_EQ(account->used_bytes(), 0) << "the quota is given back with the buffer";
  EXPECT_EQ(memory.used_bytes(), 0) << "pages read back are charged until dropped";
}

TEST_F(ResultSpoolTest, QuotaReachedProducerWaitsForTheClient) {
  constexpr int kPages = 60;
  constexpr size_t kPageBytes = 16 << 10;
  // Room for the memory buffer (4 pages) and 10 spooled pages: the rest must wait.
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{10} * kPageBytes);
  ResultBuffer buf(1000, 4 * kPageBytes);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::atomic<int> put{0};
  std::thread producer([&] {
    for (int i = 0; i < kPages; ++i) {
      if (!buf.Put(NumberedPage(i, kPageBytes))) return;
      put.fetch_add(1);
    }
    buf.Finish(std::nullopt);
  });
  ASSERT_TRUE(WaitFor([&] { return buf.spool_quota_waits() > 0; }));
  EXPECT_EQ(put.load(), 14) << "4 in memory and 10 spooled, then the quota stops it";
  EXPECT_LE(account->used_bytes(), account->limit_bytes());
  // The query says why it waits, and which flag to change.
  EXPECT_NE(buf.blocked_reason().find("--query_max_spill_mb"), std::string::npos)
      << buf.blocked_reason();
  ResultPage p;
  std::optional<QueryError> err;
  int next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    ResultBuffer::Next n = buf.TryGet(&p, &err);
    if (n == ResultBuffer::Next::kEnd) break;
    if (n == ResultBuffer::Next::kNotYet) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(PageNumber(p), next++);
  }
  producer.join();
  EXPECT_EQ(next, kPages);
  EXPECT_FALSE(err.has_value());
  EXPECT_EQ(buf.blocked_reason(), "");
}

/// Whether 'dir''s file system can punch holes (tmpfs, ext4 and xfs can).
bool CanPunchHoles(const std::string& dir) {
  std::unique_ptr<SpoolFile> file;
  if (!SpoolFile::Create(dir, &file).ok()) return false;
  auto page = std::make_shared<const std::string>(8192, 'x');
  return file->WriteAt(0, {page}).ok() && file->PunchHole(0, 4096).ok();
}

// A client that reads keeps the producer going past its quota: what has been read is punched
// out of the file and its quota given back (before, the quota was held until the query ended,
// and the producer fell back to the 4-page memory buffer once the quota was full).
TEST_F(ResultSpoolTest, ReadSpoolIsPunchedAndItsQuotaReused) {
  if (!CanPunchHoles(dir_.path())) GTEST_SKIP() << dir_.path() << " cannot punch holes";
  constexpr int kPages = 400;
  constexpr size_t kPageBytes = 16 << 10;
  constexpr int64_t kQuota = int64_t{2} << 20;  // 128 pages
  auto account = std::make_shared<SpillAccount>(&budget_, kQuota);
  const int64_t punched_before = SpoolFile::stats().bytes_punched.load();
  ResultBuffer buf(1000, 4 * kPageBytes);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::atomic<bool> produced{false};
  std::thread producer([&] {
    for (int i = 0; i < kPages; ++i) {
      if (!buf.Put(NumberedPage(i, kPageBytes))) return;
    }
    buf.Finish(std::nullopt);
    produced.store(true);
  });
  // A slow client: it reads a page each time the producer has filled the quota again, so the
  // pages it reads are those written to the file (a fast one would take the newest pages from
  // memory before they are written).
  ResultPage p;
  std::optional<QueryError> err;
  int next = 0;
  int64_t max_used = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(
        WaitFor([&] { return produced.load() || !buf.blocked_reason().empty(); }));
    max_used = std::max(max_used, account->used_bytes());
    ResultBuffer::Next n = buf.TryGet(&p, &err);
    if (n == ResultBuffer::Next::kEnd) break;
    if (n == ResultBuffer::Next::kNotYet) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(PageNumber(p), next++);
  }
  producer.join();
  EXPECT_EQ(next, kPages);
  EXPECT_FALSE(err.has_value());
  EXPECT_LE(max_used, kQuota);
  // Most of the result went through the file, more than the quota could hold at once.
  EXPECT_GT(buf.spool_file_bytes(), 2 * kQuota);
  EXPECT_GE(SpoolFile::stats().bytes_punched.load() - punched_before,
            buf.spool_file_bytes() - kQuota);
  EXPECT_LT(buf.spooled_bytes(), kQuota);
}

// Two consumers read concurrently (the coordinator's I/O threads may): no range is punched
// while another read of the file runs, every page arrives exactly once and intact.
TEST_F(ResultSpoolTest, ConcurrentReadersNeverLoseAPunchedPage) {
  if (!CanPunchHoles(dir_.path())) GTEST_SKIP() << dir_.path() << " cannot punch holes";
  constexpr int kPages = 600;
  constexpr size_t kPageBytes = 8 << 10;
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{1} << 20);
  ResultBuffer buf(1000, 2 * kPageBytes);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::thread producer([&] {
    for (int i = 0; i < kPages; ++i) {
      if (!buf.Put(NumberedPage(i, kPageBytes))) return;
    }
    buf.Finish(std::nullopt);
  });
  std::vector<std::atomic<int>> seen(kPages);
  std::atomic<int> bad{0};
  auto consume = [&] {
    ResultPage p;
    std::optional<QueryError> err;
    for (;;) {
      ResultBuffer::Next n = buf.TryGet(&p, &err);
      if (n == ResultBuffer::Next::kEnd) return;
      if (n == ResultBuffer::Next::kNotYet) {
        std::this_thread::yield();
        continue;
      }
      // A page read from a punched range would come back as zeros.
      if (p.json_rows->empty() || (*p.json_rows)[0] != '[') {
        bad.fetch_add(1);
        continue;
      }
      const int i = PageNumber(p);
      if (i < 0 || i >= kPages || p.json_rows->size() != kPageBytes) {
        bad.fetch_add(1);
        continue;
      }
      seen[i].fetch_add(1);
    }
  };
  std::thread a(consume), b(consume);
  a.join();
  b.join();
  producer.join();
  EXPECT_EQ(bad.load(), 0);
  for (int i = 0; i < kPages; ++i) ASSERT_EQ(seen[i].load(), 1) << "page " << i;
  EXPECT_LE(account->used_bytes(), account->limit_bytes());
}

TEST_F(ResultSpoolTest, FullTotalBudgetIsNamedWhileTheProducerWaits) {
  SpillBudget small(int64_t{64} << 10);
  auto account = std::make_shared<SpillAccount>(&small, int64_t{1} << 30);
  ResultBuffer buf(1000, 16 << 10);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      if (!buf.Put(NumberedPage(i, 16 << 10))) return;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return buf.spool_quota_waits() > 0; }));
  EXPECT_NE(buf.blocked_reason().find("--max_spill_mb"), std::string::npos)
      << buf.blocked_reason();
  buf.Close();
  producer.join();
}

TEST_F(ResultSpoolTest, CloseDropsTheSpoolAndUnblocksTheProducer) {
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{64} << 10);
  ResultBuffer buf(1000, 16 << 10);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::atomic<bool> refused{false};
  std::thread producer([&] {
    for (int i = 0; i < 1000 && !refused.load(); ++i) {
      if (!buf.Put(NumberedPage(i, 16 << 10))) refused.store(true);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return buf.spool_quota_waits() > 0; }));
  buf.Close();
  producer.join();
  EXPECT_TRUE(refused.load());
  EXPECT_EQ(account->used_bytes(), 0);
  EXPECT_EQ(budget_.used_bytes(), 0);
}

/// The descriptors of this process's open files under 'dir' (a spool file has no name there,
/// but /proc/self/fd shows its directory).
std::vector<int> OpenFilesUnder(const std::string& dir) {
  std::vector<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().starts_with(dir + "/")) {
      fds.push_back(std::stoi(entry.path().filename().string()));
    }
  }
  return fds;
}

// A page that cannot be read back (here the file lost its data; on a real disk, EIO) ends the
// query with an error, and the producer waiting for its quota is let go: before, the buffer
// stayed open and the executor waited for room that no consumer would make, until shutdown.
TEST_F(ResultSpoolTest, AFailedReadEndsTheQueryAndLetsTheProducerGo) {
  constexpr size_t kPageBytes = 64 << 10;
  // One page in memory, 64 on disk (written in 1 MiB batches), then the quota stops it.
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{64} * kPageBytes);
  ResultBuffer buf(1000, kPageBytes);
  buf.EnableSpooling(dir_.path(), account, nullptr);
  std::atomic<bool> refused{false};
  std::thread producer([&] {
    for (int i = 0; i < 100000 && !refused.load(); ++i) {
      if (!buf.Put(NumberedPage(i, kPageBytes))) refused.store(true);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return buf.spool_quota_waits() > 0; }));
  const std::vector<int> fds = OpenFilesUnder(dir_.path());
  ASSERT_EQ(fds.size(), 1u);
  ASSERT_EQ(ftruncate(fds[0], 0), 0);
  ResultPage p;
  std::optional<QueryError> err;
  ResultBuffer::Next n;
  int pages = 0;
  while ((n = buf.TryGet(&p, &err)) == ResultBuffer::Next::kPage) ++pages;
  EXPECT_EQ(n, ResultBuffer::Next::kEnd);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->message.find("could not be read back"), std::string::npos) << err->message;
  EXPECT_LT(pages, 20) << "the pages on disk are gone";
  EXPECT_TRUE(WaitFor([&] { return refused.load(); })) << "the producer still waits";
  EXPECT_EQ(account->used_bytes(), 0) << "the quota is given back";
  buf.Close();  // lets the producer go on the old code too, so that the test ends
  producer.join();
}

TEST_F(ResultSpoolTest, UnusableDirectoryFallsBackToBackpressure) {
  auto account = std::make_shared<SpillAccount>(&budget_, int64_t{1} << 30);
  ResultBuffer buf(1000, 16 << 10);
  buf.EnableSpooling(dir_.path() + "/missing", account, nullptr);
  std::atomic<int> put{0};
  std::thread producer([&] {
    for (int i = 0; i < 8; ++i) {
      if (!buf.Put(NumberedPage(i, 16 << 10))) return;
      put.fetch_add(1);
    }
    buf.Finish(std::nullopt);
  });
  ResultPage p;
  std::optional<QueryError> err;
  int next = 0;
  // The spool directory is unusable: the producer waits on the memory buffer, and says so.
  ASSERT_TRUE(WaitFor([&] { return !buf.blocked_reason().empty(); }));
  EXPECT_NE(buf.blocked_reason().find("not spooled"), std::string::npos) << buf.blocked_reason();
  while (next < 8) {
    ResultBuffer::Next n = buf.TryGet(&p, &err);
    ASSERT_NE(n, ResultBuffer::Next::kEnd);
    if (n == ResultBuffer::Next::kPage) ASSERT_EQ(PageNumber(p), next++);
    else std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(buf.spooled_bytes(), 0);
}

}  // namespace
}  // namespace qr
