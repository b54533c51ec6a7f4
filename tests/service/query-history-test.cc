#include "service/query-history.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "history-dir-test-util.h"
#include "service/query-history-record.h"
#include "testutil/log-capture.h"
#include "testutil/wait.h"
#include "util/mutex.h"

namespace qr {
namespace {

namespace fs = std::filesystem;

QueryHistoryRecord MakeRecord(uint64_t n) {
  QueryHistoryRecord r;
  r.query_id = UniqueId{0x1234567800000000ull + n, n << 32};
  r.user = "user" + std::to_string(n % 7);
  r.source = "trino-cli";
  r.client_info = "info \xc3\xa9 " + std::to_string(n);
  r.client_tags = {"a", "tag " + std::to_string(n)};
  r.statement = std::make_shared<const std::string>("SELECT " + std::to_string(n));
  r.state = static_cast<uint8_t>(2 + n % 3);
  r.submit_time_ms = 1700000000000 + static_cast<int64_t>(n);
  r.end_time_ms = r.submit_time_ms + 5;
  r.queued_ms = 1;
  r.elapsed_ms = 5;
  r.rows_delivered = static_cast<int64_t>(n) * 3;
  r.bytes_delivered = -1;  // any int64 survives
  r.rows_produced = static_cast<int64_t>(n) * 3;
  r.cpu_time_ns = int64_t{1} << 40;
  if (n % 2 == 1) {
    QueryError e = QueryError::Syntax("line 1:8: mismatched input", 1, 8);
    r.error = e;
  }
  r.submit_time_extra_ns = static_cast<int32_t>(n % 1000000);
  r.exec_start_ms = r.submit_time_ms + 1;
  r.first_row_ms = n % 3 == 0 ? -1 : r.submit_time_ms + 2;
  if (n % 5 == 0) {
    r.canceled_by = "user 'bob' (/cancel_query)";
    r.canceled_time_ms = r.end_time_ms;
  }
  return r;
}

/// A record as version 1 of the format wrote it (before the executor start, the first row,
/// who canceled and the exact submission were kept): the old encoder, field by field.
std::string EncodeVersion1(const QueryHistoryRecord& r) {
  std::string p;
  auto u32 = [&p](uint32_t v) {
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto i64 = [&p](int64_t v) {
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
  };
  auto str = [&](std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    p.append(s);
  };
  p.push_back(1);
  i64(static_cast<int64_t>(r.query_id.hi));
  i64(static_cast<int64_t>(r.query_id.lo));
  str(r.user);
  str(r.source);
  str(r.client_info);
  u32(static_cast<uint32_t>(r.client_tags.size()));
  for (const std::string& tag : r.client_tags) str(tag);
  str(*r.statement);
  p.push_back(static_cast<char>(r.state));
  for (int64_t v : {r.submit_time_ms, r.end_time_ms, r.queued_ms, r.elapsed_ms, r.rows_delivered,
                    r.bytes_delivered, r.rows_produced, r.cpu_time_ns}) {
    i64(v);
  }
  p.push_back(r.error ? 1 : 0);
  if (r.error) {
    u32(static_cast<uint32_t>(r.error->code));
    str(r.error->name);
    p.push_back(static_cast<char>(r.error->type));
    str(r.error->message);
    u32(static_cast<uint32_t>(r.error->line));
    u32(static_cast<uint32_t>(r.error->column));
  }
  std::string frame;
  AppendHistoryFrame(p, &frame);
  return frame;
}

void ExpectSameRecord(const QueryHistoryRecord& a, const QueryHistoryRecord& b) {
  EXPECT_EQ(a.query_id, b.query_id);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.client_info, b.client_info);
  EXPECT_EQ(a.client_tags, b.client_tags);
  ASSERT_TRUE(a.statement && b.statement);
  EXPECT_EQ(*a.statement, *b.statement);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.submit_time_ms, b.submit_time_ms);
  EXPECT_EQ(a.end_time_ms, b.end_time_ms);
  EXPECT_EQ(a.queued_ms, b.queued_ms);
  EXPECT_EQ(a.elapsed_ms, b.elapsed_ms);
  EXPECT_EQ(a.rows_delivered, b.rows_delivered);
  EXPECT_EQ(a.bytes_delivered, b.bytes_delivered);
  EXPECT_EQ(a.rows_produced, b.rows_produced);
  EXPECT_EQ(a.cpu_time_ns, b.cpu_time_ns);
  EXPECT_EQ(a.submit_time_extra_ns, b.submit_time_extra_ns);
  EXPECT_EQ(a.exec_start_ms, b.exec_start_ms);
  EXPECT_EQ(a.first_row_ms, b.first_row_ms);
  EXPECT_EQ(a.canceled_by, b.canceled_by);
  EXPECT_EQ(a.canceled_time_ms, b.canceled_time_ms);
  ASSERT_EQ(a.error.has_value(), b.error.has_value());
  if (a.error) {
    EXPECT_EQ(a.error->code, b.error->code);
    EXPECT_EQ(a.error->name, b.error->name);
    EXPECT_EQ(a.error->type, b.error->type);
    EXPECT_EQ(a.error->message, b.error->message);
    EXPECT_EQ(a.error->line, b.error->line);
    EXPECT_EQ(a.error->column, b.error->column);
  }
}

class QueryHistoryTest : public HistoryDirTest {
 protected:
  QueryHistory::Options Options() const { return QueryHistory::Options(); }
  std::vector<QueryHistoryRecord> ReadAll(HistoryReadStats* stats) {
    std::vector<QueryHistoryRecord> out;
    Status s = ReadQueryHistory(dir_, 1 << 30, &out, stats);
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }
  std::vector<fs::path> Segments() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().starts_with("history-")) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  void WriteFile(const fs::path& path, std::string_view data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
};

TEST(QueryHistoryRecordTest, EncodeDecodeRoundTrip) {
  for (uint64_t n : {0, 1, 2, 3, 1000}) {
    QueryHistoryRecord in = MakeRecord(n);
    std::string buf;
    EncodeHistoryRecord(in, &buf);
    QueryHistoryRecord out;
    size_t consumed = 0;
    ASSERT_EQ(DecodeHistoryFrame(buf, &out, &consumed), HistoryFrameResult::kOk);
    EXPECT_EQ(consumed, buf.size());
    ExpectSameRecord(in, out);
  }
}

TEST(QueryHistoryRecordTest, Version1RecordsDecodeWithoutTheNewFields) {
  for (uint64_t n : {0, 1, 5}) {
    QueryHistoryRecord in = MakeRecord(n);
    const std::string buf = EncodeVersion1(in);
    QueryHistoryRecord out;
    size_t consumed = 0;
    ASSERT_EQ(DecodeHistoryFrame(buf, &out, &consumed), HistoryFrameResult::kOk);
    EXPECT_EQ(consumed, buf.size());
    // What version 1 did not keep reads back as "unknown".
    in.submit_time_extra_ns = 0;
    in.exec_start_ms = -1;
    in.first_row_ms = -1;
    in.canceled_by.clear();
    in.canceled_time_ms = -1;
    ExpectSameRecord(in, out);
  }
}

TEST(QueryHistoryRecordTest, SummaryMatchesTheRecordInBothVersions) {
  for (uint64_t n : {0, 1, 5, 999999}) {
    const QueryHistoryRecord r = MakeRecord(n);
    for (int version : {1, 2}) {
      std::string buf;
      if (version == 1) {
        buf = EncodeVersion1(r);
      } else {
        EncodeHistoryRecord(r, &buf);
      }
      HistoryRecordSummary s;
      ASSERT_TRUE(SummarizeHistoryFrame(buf, buf.size(), &s));
      EXPECT_EQ(s.query_id, r.query_id);
      EXPECT_EQ(s.user, r.user);
      EXPECT_EQ(s.source, r.source);
      EXPECT_EQ(s.state, r.state);
      EXPECT_EQ(s.submit_time_ms, r.submit_time_ms);
      EXPECT_EQ(s.submit_time_extra_ns, version == 1 ? 0 : r.submit_time_extra_ns);
      EXPECT_EQ(s.elapsed_ms, r.elapsed_ms);
      EXPECT_EQ(s.rows_delivered, r.rows_delivered);
    }
  }
}

TEST(QueryHistoryRecordTest, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xe3069283u);
}

TEST(QueryHistoryRecordTest, Crc32cMatchesABitwiseReferenceAtEveryLengthAndAlignment) {
  auto reference = [](std::string_view data) {
    uint32_t crc = ~0u;
    for (unsigned char c : data) {
      crc ^= c;
      for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
    }
    return ~crc;
  };
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 131 + 7));
  for (size_t start = 0; start < 9; ++start) {
    for (size_t length = 0; start + length <= data.size(); length += 7) {
      std::string_view part = std::string_view(data).substr(start, length);
      EXPECT_EQ(Crc32c(part), reference(part)) << start << "+" << length;
      // Continued in two pieces, the same.
      const size_t half = length / 2;
      EXPECT_EQ(Crc32c(part.substr(half), Crc32c(part.substr(0, half))), reference(part));
    }
  }
}

TEST(QueryHistoryRecordTest, EveryFlippedByteIsCorrupt) {
  std::string buf;
  EncodeHistoryRecord(MakeRecord(3), &buf);
  for (size_t i = 0; i < buf.size(); ++i) {
    std::string bad = buf;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    QueryHistoryRecord out;
    size_t consumed = 0;
    EXPECT_EQ(DecodeHistoryFrame(bad, &out, &consumed), HistoryFrameResult::kCorrupt)
        << "byte " << i;
  }
}

TEST_F(QueryHistoryTest, TornTailAtEveryOffsetOfTheLastRecordIsSkipped) {
  std::string data;
  for (uint64_t n = 0; n < 3; ++n) EncodeHistoryRecord(MakeRecord(n), &data);
  std::string two;
  for (uint64_t n = 0; n < 2; ++n) EncodeHistoryRecord(MakeRecord(n), &two);
  const fs::path path = fs::path(dir_) / "history-00000000000000000001.log";
  for (size_t cut = two.size(); cut < data.size(); ++cut) {
    WriteFile(path, std::string_view(data).substr(0, cut));
    HistoryReadStats stats;
    std::vector<QueryHistoryRecord> records = ReadAll(&stats);
    ASSERT_EQ(records.size(), 2u) << "cut at " << cut;
    ExpectSameRecord(records[1], MakeRecord(1));
    EXPECT_EQ(stats.torn_tails, cut == two.size() ? 0 : 1) << "cut at " << cut;
    EXPECT_EQ(stats.corrupt_segments, 0) << "cut at " << cut;
  }
}

TEST_F(QueryHistoryTest, ChecksumMismatchEndsTheSegmentAndIsCounted) {
  std::string first, data;
  EncodeHistoryRecord(MakeRecord(0), &first);
  data = first;
  EncodeHistoryRecord(MakeRecord(1), &data);
  EncodeHistoryRecord(MakeRecord(2), &data);
  data[first.size() + kHistoryFrameHeaderBytes + 5] ^= 1;  // inside record 1's payload
  WriteFile(fs::path(dir_) / "history-00000000000000000001.log", data);
  // A later segment is still read.
  std::string later;
  EncodeHistoryRecord(MakeRecord(9), &later);
  WriteFile(fs::path(dir_) / "history-00000000000000000002.log", later);
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_EQ(records.size(), 2u);
  ExpectSameRecord(records[0], MakeRecord(0));
  ExpectSameRecord(records[1], MakeRecord(9));
  EXPECT_EQ(stats.corrupt_segments, 1);
  EXPECT_EQ(stats.segments, 2);
}

TEST_F(QueryHistoryTest, WrittenRecordsReadBackInOrderAcrossRestarts) {
  for (int run = 0; run < 2; ++run) {
    auto h = Open(Options());
    ASSERT_NE(h, nullptr);
    for (uint64_t n = 0; n < 100; ++n) ASSERT_TRUE(h->Append(MakeRecord(run * 100 + n)));
    h->Flush();
    QueryHistory::Stats s = h->GetStats();
    EXPECT_EQ(s.records, 100);
    EXPECT_GE(s.batches, 1);
    EXPECT_LE(s.batches, 100);
    // --query_history_sync=batch: one sync covers every batch written before it started.
    EXPECT_GE(s.syncs, 1);
    EXPECT_LE(s.syncs, s.batches);
    EXPECT_EQ(s.dropped, 0);
  }
  EXPECT_EQ(Segments().size(), 2u);  // each start opens its own segment
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_EQ(records.size(), 200u);
  for (uint64_t n = 0; n < 200; ++n) ExpectSameRecord(records[n], MakeRecord(n));
  // The newest N only.
  std::vector<QueryHistoryRecord> newest;
  HistoryReadStats newest_stats;
  ASSERT_TRUE(ReadQueryHistory(dir_, 30, &newest, &newest_stats).ok());
  ASSERT_EQ(newest.size(), 30u);
  ExpectSameRecord(newest.front(), MakeRecord(170));
  ExpectSameRecord(newest.back(), MakeRecord(199));
  EXPECT_EQ(newest_stats.segments, 1);  // the older segment was not needed
}

// A second history on a directory in use is refused: it took the first one's open (still
// empty) segment for a closed one, and its retention deleted it under the first one's writer,
// whose records then went to an unlinked file.
TEST_F(QueryHistoryTest, ADirectoryInUseIsRefusedAndFreedOnClose) {
  auto first = Open(Options());
  ASSERT_NE(first, nullptr);
  QueryHistory::Options o = Options();
  o.dir = dir_;
  std::unique_ptr<QueryHistory> second;
  const Status s = QueryHistory::Open(o, &second);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(s.message().find("in use by another coordinator"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--query_history_dir"), std::string::npos) << s.message();
  ASSERT_EQ(Segments().size(), 1u) << "the refused one deleted nothing";
  ASSERT_TRUE(first->Append(MakeRecord(1)));
  first->Flush();
  first.reset();
  // Closed: the directory is free, and the record is there.
  auto again = Open(Options());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->index().size(), 1u);
}

TEST_F(QueryHistoryTest, ASegmentOfVersion1RecordsReadsBackBeforeNewOnes) {
  // A history written by the previous version, then this one appends to it.
  std::string old_segment;
  for (uint64_t n = 0; n < 3; ++n) old_segment += EncodeVersion1(MakeRecord(n));
  WriteFile(fs::path(dir_) / "history-00000000000000000001.log", old_segment);
  {
    std::unique_ptr<QueryHistory> h = Open(Options());
    ASSERT_TRUE(h->Append(MakeRecord(10)));
    h->Flush();
  }
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(stats.corrupt_segments, 0);
  for (uint64_t n = 0; n < 3; ++n) {
    EXPECT_EQ(records[n].query_id, MakeRecord(n).query_id);
    EXPECT_EQ(records[n].exec_start_ms, -1);
    EXPECT_TRUE(records[n].canceled_by.empty());
  }
  ExpectSameRecord(records[3], MakeRecord(10));
}

TEST_F(QueryHistoryTest, SegmentsRotateBySize) {
  QueryHistory::Options o = Options();
  o.segment_bytes = 1024;
  o.max_segments = 0;
  o.max_total_bytes = 0;
  auto h = Open(o);
  for (uint64_t n = 0; n < 200; ++n) {
    ASSERT_TRUE(h->Append(MakeRecord(n)));
    if (n % 10 == 9) h->Flush();
  }
  h.reset();
  const size_t segments = Segments().size();
  EXPECT_GE(segments, 10u);
  // A segment closes once it passes the size, so it is at most one batch (of at most the 10
  // records between two flushes) larger; how the writer splits them into batches is timing.
  size_t largest_frame = 0;
  for (uint64_t n = 0; n < 200; ++n) {
    std::string frame;
    EncodeHistoryRecord(MakeRecord(n), &frame);
    largest_frame = std::max(largest_frame, frame.size());
  }
  for (const fs::path& p : Segments()) {
    EXPECT_LT(fs::file_size(p), 1024u + 10 * largest_frame) << p;
  }
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_EQ(records.size(), 200u);
  for (uint64_t n = 0; n < 200; ++n) ExpectSameRecord(records[n], MakeRecord(n));
  EXPECT_EQ(stats.torn_tails + stats.corrupt_segments, 0);
}

TEST_F(QueryHistoryTest, RetentionByCountAndBytesKeepsTheNewest) {
  QueryHistory::Options o = Options();
  o.segment_bytes = 1024;
  o.max_segments = 3;
  o.max_total_bytes = 0;
  auto h = Open(o);
  for (uint64_t n = 0; n < 300; ++n) {
    ASSERT_TRUE(h->Append(MakeRecord(n)));
    if (n % 10 == 9) h->Flush();
  }
  h->Flush();
  EXPECT_LE(Segments().size(), 4u);  // 3 closed, 1 open
  EXPECT_GT(h->GetStats().segments_deleted, 0);
  h.reset();
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_FALSE(records.empty());
  ExpectSameRecord(records.back(), MakeRecord(299));

  o.max_segments = 0;
  o.max_total_bytes = 2048;
  h = Open(o);  // retention applies at start-up too
  int64_t closed = 0;
  for (const fs::path& p : Segments()) closed += static_cast<int64_t>(fs::file_size(p));
  EXPECT_LE(closed, 2048);
}

TEST_F(QueryHistoryTest, RetentionByAgeDeletesOldSegmentsAtStart) {
  std::string data;
  EncodeHistoryRecord(MakeRecord(1), &data);
  const fs::path old_path = fs::path(dir_) / "history-00000000000000000001.log";
  const fs::path new_path = fs::path(dir_) / "history-00000000000000000002.log";
  WriteFile(old_path, data);
  WriteFile(new_path, data);
  fs::last_write_time(old_path, fs::file_time_type::clock::now() - std::chrono::hours(48));
  WriteFile(fs::path(dir_) / "unrelated.txt", "kept");
  QueryHistory::Options o = Options();
  o.max_age_s = 24 * 3600;
  auto h = Open(o);
  EXPECT_FALSE(fs::exists(old_path));
  EXPECT_TRUE(fs::exists(new_path));
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "unrelated.txt"));
  EXPECT_EQ(h->GetStats().segments_deleted, 1);
}

// Age retention runs while the daemon runs, not only at start-up and rotation: on a quiet
// daemon a segment could take months to fill, and its records stayed past the limit.
TEST_F(QueryHistoryTest, RetentionByAgeRunsWhileOpenAndClosesAnOldSegment) {
  QueryHistory::Options o = Options();
  o.max_age_s = 1;
  auto h = Open(o);
  ASSERT_TRUE(h->Append(MakeRecord(1)));
  h->Flush();
  ASSERT_EQ(h->index().size(), 1u);
  // The open segment is closed once a second old, and deleted once its record is older than
  // a second (by its modification time, in whole seconds).
  // Then: the old one deleted, a new one open.
  EXPECT_TRUE(WaitFor(
      [&] {
        const QueryHistory::Stats s = h->GetStats();
        return h->index().size() == 0 && s.segments_deleted == 1 && s.segments_created == 2;
      },
      kWaitForTimeout, "the record to age out"));
  // The history goes on in the new segment.
  ASSERT_TRUE(h->Append(MakeRecord(2)));
  h->Flush();
  EXPECT_EQ(h->index().size(), 1u);
}

TEST_F(QueryHistoryTest, FullQueueDropsAndCountsWithAWarning) {
  WriteGate gate;
  QueryHistory::Options o = Options();
  o.queue_capacity = 2;
  o.before_write_for_testing = gate.Hook();
  testing::LogCapture log;
  auto h = Open(o);
  ASSERT_TRUE(h->Append(MakeRecord(0)));
  // The writer took record 0 and is stuck "writing" it: the queue has room for two more.
  ASSERT_TRUE(gate.WaitStalled());
  EXPECT_TRUE(h->Append(MakeRecord(1)));
  EXPECT_TRUE(h->Append(MakeRecord(2)));
  EXPECT_FALSE(h->Append(MakeRecord(3)));
  EXPECT_FALSE(h->Append(MakeRecord(4)));
  EXPECT_EQ(h->GetStats().dropped, 2);
  EXPECT_EQ(h->GetStats().queue_length, 2);
  EXPECT_EQ(log.Matching("records dropped so far").size(), 1u);  // the first drop warns
  gate.Release();
  h->Flush();
  EXPECT_EQ(h->GetStats().records, 3);
  h.reset();
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> records = ReadAll(&stats);
  ASSERT_EQ(records.size(), 3u);
  ExpectSameRecord(records[2], MakeRecord(2));
}

TEST_F(QueryHistoryTest, SyncModes) {
  QueryHistory::Options o = Options();
  o.sync = HistorySyncMode::kNone;
  // Long enough that the 20 appends below arrive within one interval on a loaded machine.
  o.sync_interval_ms = 1000;
  auto h = Open(o);
  for (uint64_t n = 0; n < 20; ++n) h->Append(MakeRecord(n));
  // Written by the writer's timer although nothing else arrives, grouped.
  EXPECT_TRUE(WaitFor([&] { return h->GetStats().records == 20; }));
  EXPECT_LE(h->GetStats().batches, 2);
  EXPECT_EQ(h->GetStats().syncs, 0);
  h.reset();

  o.sync = HistorySyncMode::kInterval;
  h = Open(o);
  for (uint64_t n = 0; n < 20; ++n) h->Append(MakeRecord(n));
  // Written and synced within the interval, once for all of them.
  EXPECT_TRUE(WaitFor([&] { return h->GetStats().syncs >= 1; }));
  h->Flush();
  const QueryHistory::Stats s = h->GetStats();
  EXPECT_EQ(s.records, 20);
  EXPECT_LE(s.batches, 2);
  EXPECT_LE(s.syncs, s.batches);
  EXPECT_EQ(s.sync_buckets.back(), s.syncs);
  EXPECT_GE(s.sync_seconds_sum, 0);
}

TEST(QueryHistorySyncModeTest, Parse) {
  HistorySyncMode m;
  EXPECT_TRUE(ParseHistorySyncMode("batch", &m));
  EXPECT_EQ(m, HistorySyncMode::kBatch);
  EXPECT_TRUE(ParseHistorySyncMode("interval", &m));
  EXPECT_EQ(m, HistorySyncMode::kInterval);
  EXPECT_TRUE(ParseHistorySyncMode("none", &m));
  EXPECT_EQ(m, HistorySyncMode::kNone);
  EXPECT_FALSE(ParseHistorySyncMode("Batch", &m));
  EXPECT_FALSE(ParseHistorySyncMode("", &m));
}

}  // namespace
}  // namespace qr
