// The query history under faults: failed writes and syncs (a full or failing disk), files in
// its directory that it did not write, empty segments, records too large for a frame, and
// limits too large for the clock's arithmetic.

#include <errno.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "history-dir-test-util.h"
#include "service/query-history-record.h"
#include "service/query-history.h"
#include "testutil/wait.h"
#include "util/mutex.h"

namespace qr {
namespace {

namespace fs = std::filesystem;

QueryHistoryRecord SmallRecord(uint64_t n) {
  QueryHistoryRecord r;
  r.query_id = UniqueId{0xfa0170000000000ull + n, n};
  r.user = "alice";
  r.source = "test";
  r.statement = std::make_shared<const std::string>("SELECT " + std::to_string(n));
  r.state = 2;
  r.submit_time_ms = 1700000000000 + static_cast<int64_t>(n);
  r.end_time_ms = r.submit_time_ms + 1;
  return r;
}

/// The real calls, except for the failures a test asks for.
class FailingFileOps : public HistoryFileOps {
 public:
  /// The next 'n' writes fail with ENOSPC; with 'partial', the first of them writes half of
  /// its bytes first (a write that filled the disk midway).
  void FailWrites(int n, bool partial) {
    MutexLock l(&mu_);
    failing_writes_ = n;
    partial_ = partial;
  }
  /// The next 'n' syncs fail with EIO.
  void FailSyncs(int n) {
    MutexLock l(&mu_);
    failing_syncs_ = n;
  }
  /// Reads of files whose name is 'name' fail with EIO.
  void FailReadsOf(std::string name) {
    MutexLock l(&mu_);
    unreadable_ = std::move(name);
  }

  bool ReadFile(const std::string& path, std::string* data, std::string* error) override {
    {
      MutexLock l(&mu_);
      if (!unreadable_.empty() && fs::path(path).filename() == unreadable_) {
        *error = strerror(EIO);
        return false;
      }
    }
    return HistoryFileOps::ReadFile(path, data, error);
  }

  /// The largest write asked for so far.
  size_t largest_write() {
    MutexLock l(&mu_);
    return largest_write_;
  }

  ssize_t Write(int fd, const void* data, size_t size) override {
    {
      MutexLock l(&mu_);
      largest_write_ = std::max(largest_write_, size);
      if (failing_writes_ > 0) {
        if (partial_ && size > 1) {
          partial_ = false;  // the rest of this batch's write fails next
          return HistoryFileOps::Write(fd, data, size / 2);
        }
        --failing_writes_;
        errno = ENOSPC;
        return -1;
      }
    }
    return HistoryFileOps::Write(fd, data, size);
  }
  int Fdatasync(int fd) override {
    {
      MutexLock l(&mu_);
      if (failing_syncs_ > 0) {
        --failing_syncs_;
        errno = EIO;
        return -1;
      }
    }
    return HistoryFileOps::Fdatasync(fd);
  }

 private:
  Mutex mu_;
  int failing_writes_ QR_GUARDED_BY(mu_) = 0;
  bool partial_ QR_GUARDED_BY(mu_) = false;
  int failing_syncs_ QR_GUARDED_BY(mu_) = 0;
  std::string unreadable_ QR_GUARDED_BY(mu_);
  size_t largest_write_ QR_GUARDED_BY(mu_) = 0;
};

class QueryHistoryFaultsTest : public HistoryDirTest {
 protected:
  QueryHistory::Options Options() {
    QueryHistory::Options o;
    o.file_ops = ops_;
    return o;
  }
  /// Appends SmallRecord(n) and waits until it is written and synced (or failed).
  static void Write(QueryHistory* h, uint64_t n) {
    ASSERT_TRUE(h->Append(SmallRecord(n)));
    h->Flush();
  }
  std::vector<fs::path> Segments() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().starts_with("history-")) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The directory holds 'segments' segments, whose records are SmallRecord(n) for 'ids'.
  void ExpectSegmentsHolding(size_t segments, const std::vector<uint64_t>& ids) {
    EXPECT_EQ(Segments().size(), segments);
    HistoryReadStats stats;
    EXPECT_EQ(ReadBack(&stats), ids);
  }
  /// The query ids' 'lo' of every record read back, oldest first; 'stats' what was found.
  std::vector<uint64_t> ReadBack(HistoryReadStats* stats) {
    std::vector<QueryHistoryRecord> records;
    Status s = ReadQueryHistory(dir_, 1 << 20, &records, stats);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<uint64_t> out;
    for (const QueryHistoryRecord& r : records) out.push_back(r.query_id.lo);
    return out;
  }

  std::shared_ptr<FailingFileOps> ops_ = std::make_shared<FailingFileOps>();
};

TEST_F(QueryHistoryFaultsTest, AWriteThatFailsMidwayIsCutOffAndTheSegmentGoesOn) {
  auto h = Open(Options());
  Write(h.get(), 1);
  ops_->FailWrites(1, /*partial=*/true);
  Write(h.get(), 2);  // half written, then ENOSPC: dropped
  Write(h.get(), 3);
  QueryHistory::Stats s = h->GetStats();
  EXPECT_EQ(s.write_errors, 1);
  EXPECT_EQ(s.dropped, 1);
  EXPECT_EQ(s.records, 2);
  EXPECT_EQ(s.segments_created, 1);
  EXPECT_EQ(h->index().size(), 2u);
  h.reset();
  // One segment, whole: the half record was cut off before record 3 followed it.
  EXPECT_EQ(Segments().size(), 1u);
  HistoryReadStats stats;
  EXPECT_EQ(ReadBack(&stats), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(stats.torn_tails, 0);
  EXPECT_EQ(stats.corrupt_segments, 0);
}

TEST_F(QueryHistoryFaultsTest, AFullDiskNeitherMultipliesSegmentsNorCostsTheHistory) {
  QueryHistory::Options o = Options();
  o.max_segments = 3;
  {
    auto h = Open(o);
    for (uint64_t n = 0; n < 5; ++n) Write(h.get(), n);
  }
  {
    auto h = Open(o);
    ops_->FailWrites(40, /*partial=*/false);
    for (uint64_t n = 100; n < 140; ++n) Write(h.get(), n);  // each batch fails
    EXPECT_EQ(h->GetStats().write_errors, 40);
    EXPECT_EQ(h->GetStats().dropped, 40);
    EXPECT_EQ(h->GetStats().segments_created, 1);
    Write(h.get(), 200);  // the disk has room again
  }
  // A restart applies retention by count (3): the first run's records are still there.
  auto h = Open(o);
  EXPECT_EQ(h->index().size(), 6u);
  h.reset();
  HistoryReadStats stats;
  EXPECT_EQ(ReadBack(&stats), (std::vector<uint64_t>{0, 1, 2, 3, 4, 200}));
  EXPECT_EQ(stats.torn_tails + stats.corrupt_segments, 0);
}

TEST_F(QueryHistoryFaultsTest, AFailedSyncMovesTheWriterToANewSegment) {
  auto h = Open(Options());
  ops_->FailSyncs(1);
  Write(h.get(), 1);  // written; its sync fails
  EXPECT_EQ(h->GetStats().write_errors, 1);
  Write(h.get(), 2);  // written after it, then the writer rotates
  Write(h.get(), 3);  // in the new segment
  EXPECT_EQ(h->GetStats().segments_created, 2);
  h.reset();
  ExpectSegmentsHolding(2, {1, 2, 3});
}

// A failed sync of a segment that is also full rotates once: the failure is not left to
// rotate the fresh segment after its first batch as well.
TEST_F(QueryHistoryFaultsTest, AFailedSyncOfAFullSegmentRotatesOnce) {
  // The size of one record, written alone.
  {
    auto h = Open(Options());
    Write(h.get(), 1);
  }
  ASSERT_EQ(Segments().size(), 1u);
  const auto record_bytes = static_cast<int64_t>(fs::file_size(Segments()[0]));
  ASSERT_GT(record_bytes, 0);
  fs::remove(Segments()[0]);

  QueryHistory::Options o = Options();
  o.segment_bytes = record_bytes + record_bytes / 2;  // full at two records, not at one
  auto h = Open(o);
  ops_->FailSyncs(1);
  Write(h.get(), 1);  // the sync thread's sync of it fails (after the writer's check)
  Write(h.get(), 2);  // the segment is full too: one rotation, for both reasons
  Write(h.get(), 3);  // the second segment is not full: no rotation
  EXPECT_EQ(h->GetStats().segments_created, 2);
  h.reset();
  ExpectSegmentsHolding(2, {1, 2, 3});
}

// A large batch (the queue after a stall) is written in pieces of about kMaxWriteBytes, each
// indexed where it went: one write of the whole batch took and kept its size in memory.
TEST_F(QueryHistoryFaultsTest, ALargeBatchIsWrittenInPieces) {
  WriteGate gate;
  QueryHistory::Options o = Options();
  o.before_write_for_testing = gate.Hook();
  auto h = Open(o);
  ASSERT_TRUE(h->Append(SmallRecord(0)));
  ASSERT_TRUE(gate.WaitStalled());
  // 40 MB queued behind the stalled write: one batch for the writer.
  const auto statement = std::make_shared<const std::string>(1 << 20, 'x');
  for (uint64_t n = 1; n <= 40; ++n) {
    QueryHistoryRecord r = SmallRecord(n);
    r.statement = statement;
    ASSERT_TRUE(h->Append(std::move(r)));
  }
  gate.Release();
  h->Flush();
  EXPECT_LE(ops_->largest_write(), QueryHistory::kMaxWriteBytes + (2 << 20));
  EXPECT_GE(h->GetStats().batches, 4) << "the stalled record, and 40 MB in pieces of 16";
  ASSERT_EQ(h->index().size(), 41u);
  std::vector<std::optional<QueryHistoryRecord>> read;
  h->ReadRecords(h->index().Newest(41), &read);
  ASSERT_EQ(read.size(), 41u);
  for (size_t i = 0; i < read.size(); ++i) {
    ASSERT_TRUE(read[i].has_value()) << i;
    EXPECT_EQ(read[i]->query_id.lo, i);
    EXPECT_EQ(read[i]->statement->size(), i == 0 ? 8u : size_t{1} << 20);
  }
}

// A segment that cannot be read at start-up (EIO) costs its records, not the start.
TEST_F(QueryHistoryFaultsTest, AnUnreadableSegmentIsSkippedAtStartUp) {
  for (uint64_t n = 1; n <= 3; ++n) {
    auto h = Open(Options());  // each start writes its own segment
    Write(h.get(), n);
  }
  const std::vector<fs::path> segments = Segments();
  ASSERT_EQ(segments.size(), 3u);
  ops_->FailReadsOf(segments[1].filename().string());
  auto h = Open(Options());
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->index_stats().unreadable_segments, 1);
  EXPECT_EQ(h->index_stats().segments, 2);
  EXPECT_EQ(h->index_stats().records, 2);
  ASSERT_EQ(h->index().size(), 2u);
  const std::vector<HistoryIndexEntry> entries = h->index().Newest(10);
  EXPECT_EQ(entries[0].query_id.lo, 1u);
  EXPECT_EQ(entries[1].query_id.lo, 3u);
}

TEST_F(QueryHistoryFaultsTest, EmptySegmentsAreDeletedAndNeverCountAgainstTheOthers) {
  QueryHistory::Options o = Options();
  o.max_segments = 2;
  {
    auto h = Open(o);
    Write(h.get(), 7);
  }
  // Starts that write nothing (a crash loop) leave only empty segments.
  for (int i = 0; i < 5; ++i) Open(o).reset();
  EXPECT_LE(Segments().size(), 2u);  // the one with the record, and the last start's
  auto h = Open(o);
  EXPECT_EQ(h->index().size(), 1u);
  EXPECT_EQ(h->GetStats().segments_deleted, 1);  // the previous start's
  h.reset();
  HistoryReadStats stats;
  EXPECT_EQ(ReadBack(&stats), (std::vector<uint64_t>{7}));
}

TEST_F(QueryHistoryFaultsTest, FilesNamedLikeSegmentsThatItDidNotWriteAreLeftAlone) {
  // A number above 2^64, one above what the index holds, and a directory.
  const fs::path huge = fs::path(dir_) / "history-99999999999999999999.log";
  const fs::path wide = fs::path(dir_) / "history-00000000004294967296.log";
  const fs::path subdir = fs::path(dir_) / "history-00000000000000000005.log";
  std::string frame;
  EncodeHistoryRecord(SmallRecord(50), &frame);
  for (const fs::path& p : {huge, wide}) {
    FILE* f = fopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    fwrite(frame.data(), 1, frame.size(), f);
    fclose(f);
  }
  fs::create_directory(subdir);
  QueryHistory::Options o = Options();
  o.max_segments = 1;
  {
    auto h = Open(o);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->index().size(), 0u);
    Write(h.get(), 1);
    Write(h.get(), 2);
    EXPECT_EQ(h->index().size(), 2u);  // indexed: the new segment's number is small
  }
  auto h = Open(o);  // retention by count ignores them too
  EXPECT_EQ(h->index().size(), 2u);
  h.reset();
  EXPECT_TRUE(fs::exists(huge));
  EXPECT_TRUE(fs::exists(wide));
  EXPECT_TRUE(fs::is_directory(subdir));
  HistoryReadStats stats;
  EXPECT_EQ(ReadBack(&stats), (std::vector<uint64_t>{1, 2}));
}

TEST_F(QueryHistoryFaultsTest, AnAgeLimitBeyondTheClocksRangeKeepsEverything) {
  QueryHistory::Options o = Options();
  o.max_age_s = INT64_MAX;
  {
    auto h = Open(o);
    Write(h.get(), 1);
  }
  auto h = Open(o);
  EXPECT_EQ(h->GetStats().segments_deleted, 0);
  EXPECT_EQ(h->index().size(), 1u);
}

TEST_F(QueryHistoryFaultsTest, ARecordTooLargeForAFrameIsWrittenCutToFit) {
  QueryHistoryRecord big = SmallRecord(2);
  // 70 MiB (more than a record holds) of two-byte characters, shifted by one byte so that
  // the 32 MiB limit falls inside a character.
  std::string statement = "x";
  statement.reserve(70u << 20);
  while (statement.size() < (70u << 20)) statement += "\xc3\xa9";
  big.statement = std::make_shared<const std::string>(statement);
  big.client_info = std::string(100 << 10, 'i');
  for (int i = 0; i < 100; ++i) big.client_tags.push_back("tag" + std::to_string(i));
  {
    std::string frame;
    EXPECT_FALSE(EncodeHistoryRecord(big, &frame));
    size_t consumed = 0;
    QueryHistoryRecord back;
    ASSERT_EQ(DecodeHistoryFrame(frame, &back, &consumed), HistoryFrameResult::kOk);
    EXPECT_EQ(consumed, frame.size());
    EXPECT_EQ(back.statement->size(), kMaxHistoryStatementBytes - 1);  // a whole character
    EXPECT_EQ(statement.compare(0, back.statement->size(), *back.statement), 0);
    EXPECT_EQ(back.client_info.size(), kMaxHistoryTextBytes);
    EXPECT_EQ(back.client_tags.size(), kMaxHistoryTags);
    EXPECT_EQ(back.client_tags.back(), "tag63");
    EXPECT_EQ(back.query_id, big.query_id);
    std::string small;
    EXPECT_TRUE(EncodeHistoryRecord(SmallRecord(1), &small));
  }
  // Written between two small records: all three are indexed and read back after a
  // restart, and the segment has nothing corrupt.
  {
    auto h = Open(Options());
    ASSERT_TRUE(h->Append(SmallRecord(1)));
    ASSERT_TRUE(h->Append(big));
    ASSERT_TRUE(h->Append(SmallRecord(3)));
    h->Flush();
    EXPECT_EQ(h->GetStats().cut_records, 1);
  }
  auto h = Open(Options());
  EXPECT_EQ(h->index().size(), 3u);
  EXPECT_EQ(h->index_stats().corrupt_segments, 0);
  h.reset();
  HistoryReadStats stats;
  EXPECT_EQ(ReadBack(&stats), (std::vector<uint64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace qr
