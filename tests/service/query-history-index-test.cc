// The query history's index: what the writer and start-up add, what retention drops, and
// Select() against a brute-force model; records read back through it.

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "history-dir-test-util.h"
#include "service/query-history-index.h"
#include "service/query-history.h"

namespace qr {
namespace {

namespace fs = std::filesystem;

QueryHistoryRecord Record(uint64_t n, std::mt19937_64* rng) {
  QueryHistoryRecord r;
  r.query_id = UniqueId{(*rng)(), n};
  r.user = "user" + std::to_string((*rng)() % 4);
  r.source = (*rng)() % 2 ? "cli" : "jdbc";
  r.statement = std::make_shared<const std::string>("SELECT " + std::to_string(n));
  r.state = static_cast<uint8_t>(2 + (*rng)() % 3);
  // Some submissions share a millisecond; some share the whole key.
  r.submit_time_ms = 1700000000000 + static_cast<int64_t>((*rng)() % 50);
  r.submit_time_extra_ns = static_cast<int32_t>((*rng)() % 3) * 1000;
  r.end_time_ms = r.submit_time_ms + 3;
  r.elapsed_ms = static_cast<int64_t>((*rng)() % 10);
  r.rows_delivered = static_cast<int64_t>((*rng)() % 5);
  return r;
}

using QueryHistoryIndexTest = HistoryDirTest;

TEST_F(QueryHistoryIndexTest, SelectMatchesABruteForceModelAndPagesWithoutGapsOrRepeats) {
  std::mt19937_64 rng(42);
  std::vector<QueryHistoryRecord> records;
  QueryHistory::Options o;
  o.segment_bytes = 1500;
  {
    std::unique_ptr<QueryHistory> h = Open(o);
    for (uint64_t n = 0; n < 300; ++n) {
      records.push_back(Record(n, &rng));
      ASSERT_TRUE(h->Append(records.back()));
      if (n % 50 == 0) h->Flush();
    }
    h->Flush();
    EXPECT_EQ(h->index().size(), records.size());
  }
  // Indexed again at start-up: the same answers.
  std::unique_ptr<QueryHistory> h = Open(o);
  ASSERT_EQ(h->index().size(), records.size());
  EXPECT_GE(h->index_stats().segments, 3);

  for (int round = 0; round < 40; ++round) {
    HistorySelectParams p;
    if (round % 3 == 1) p.user = "user" + std::to_string(round % 4);
    if (round % 5 == 2) p.source = "cli";
    if (round % 4 == 3) p.states = {3, 4};
    if (round % 7 == 5) p.since_ms = 1700000000020;
    if (round % 6 == 4) p.until_ms = 1700000000030;
    p.sort = static_cast<HistorySelectParams::Sort>(round % 3);
    p.ascending = round % 2 == 0;
    p.limit = 1 + round % 13;
    if (round % 8 == 7) p.visible = [](std::string_view user) { return user != "user1"; };
    SCOPED_TRACE("round " + std::to_string(round));
    // The model: every match, sorted by (key, id) in the order.
    auto key = [&p](const QueryHistoryRecord& r) -> int64_t {
      switch (p.sort) {
        case HistorySelectParams::Sort::kStart:
          return r.submit_time_ms * 1000000 + r.submit_time_extra_ns;
        case HistorySelectParams::Sort::kDuration: return r.elapsed_ms;
        case HistorySelectParams::Sort::kRows: return r.rows_delivered;
      }
      return 0;
    };
    std::vector<const QueryHistoryRecord*> expected;
    for (const QueryHistoryRecord& r : records) {
      if (p.user && r.user != *p.user) continue;
      if (p.source && r.source != *p.source) continue;
      if (!p.states.empty() &&
          std::find(p.states.begin(), p.states.end(), r.state) == p.states.end()) {
        continue;
      }
      if (p.since_ms && r.submit_time_ms < *p.since_ms) continue;
      if (p.until_ms && r.submit_time_ms >= *p.until_ms) continue;
      if (p.visible && !p.visible(r.user)) continue;
      expected.push_back(&r);
    }
    std::sort(expected.begin(), expected.end(), [&](auto* a, auto* b) {
      if (key(*a) != key(*b)) return p.ascending ? key(*a) < key(*b) : key(*a) > key(*b);
      return p.ascending ? a->query_id < b->query_id : b->query_id < a->query_id;
    });
    std::vector<UniqueId> paged;
    for (int page = 0; page < 400; ++page) {
      HistorySelection s = h->index().Select(p);
      EXPECT_EQ(s.matched, expected.size());
      for (const auto& [k, e] : s.rows) paged.push_back(e.query_id);
      if (s.rows.size() < p.limit) break;
      p.after = std::make_pair(s.rows.back().first, s.rows.back().second.query_id);
    }
    ASSERT_EQ(paged.size(), expected.size());
    for (size_t i = 0; i < paged.size(); ++i) EXPECT_EQ(paged[i], expected[i]->query_id);
  }

  // Records read back through the index, from every segment, in the order asked.
  std::vector<HistoryIndexEntry> entries = h->index().Newest(records.size());
  std::shuffle(entries.begin(), entries.end(), rng);
  entries.resize(120);
  std::vector<std::optional<QueryHistoryRecord>> read;
  h->ReadRecords(entries, &read);
  ASSERT_EQ(read.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSERT_TRUE(read[i].has_value());
    EXPECT_EQ(read[i]->query_id, entries[i].query_id);
    const QueryHistoryRecord& original = records[entries[i].query_id.lo];
    EXPECT_EQ(*read[i]->statement, *original.statement);
    EXPECT_EQ(read[i]->submit_time_extra_ns, original.submit_time_extra_ns);
  }
  ASSERT_TRUE(h->index().Find(records[7].query_id).has_value());
  EXPECT_EQ(h->index().Find(records[7].query_id)->query_id, records[7].query_id);
  EXPECT_FALSE(h->index().Find(UniqueId{1, 2}).has_value());
}

TEST_F(QueryHistoryIndexTest, RetentionDropsTheEntriesOfDeletedSegments) {
  std::mt19937_64 rng(7);
  QueryHistory::Options o;
  o.segment_bytes = 500;
  o.max_segments = 3;
  std::unique_ptr<QueryHistory> h = Open(o);
  std::vector<QueryHistoryRecord> records;
  for (uint64_t n = 0; n < 100; ++n) {
    records.push_back(Record(n, &rng));
    ASSERT_TRUE(h->Append(records.back()));
    h->Flush();  // one batch each: rotation after every few records
  }
  ASSERT_GT(h->GetStats().segments_deleted, 0);
  // What is indexed is exactly what the retained segments hold, in submit order.
  HistoryReadStats stats;
  std::vector<QueryHistoryRecord> on_disk;
  ASSERT_TRUE(ReadQueryHistory(dir_, 1 << 20, &on_disk, &stats).ok());
  std::vector<HistoryIndexEntry> indexed = h->index().Newest(1 << 20);
  ASSERT_EQ(indexed.size(), on_disk.size());
  ASSERT_LT(indexed.size(), records.size());
  std::vector<std::pair<int64_t, UniqueId>> expected;
  for (const QueryHistoryRecord& r : on_disk) {
    expected.emplace_back(r.submit_time_ms * 1000000 + r.submit_time_extra_ns, r.query_id);
  }
  std::sort(expected.begin(), expected.end());
  for (size_t i = 0; i < indexed.size(); ++i) {
    EXPECT_EQ(indexed[i].submit_ns, expected[i].first);
    EXPECT_EQ(indexed[i].query_id, expected[i].second);
  }
  // Find() sees exactly the retained records.
  size_t found = 0;
  for (const QueryHistoryRecord& r : records) {
    const bool retained =
        std::binary_search(expected.begin(), expected.end(),
                           std::make_pair(r.submit_time_ms * 1000000 + r.submit_time_extra_ns,
                                          r.query_id));
    std::optional<HistoryIndexEntry> e = h->index().Find(r.query_id);
    ASSERT_EQ(e.has_value(), retained) << r.query_id.lo;
    if (e) {
      ++found;
      EXPECT_EQ(e->query_id, r.query_id);
    }
  }
  EXPECT_EQ(found, indexed.size());
  // A scan reads every entry once, in batches of at most 7, or (a budget of 1 byte) of one
  // entry and those of the same submit ns.
  for (const size_t max_bytes : {SIZE_MAX, size_t{1}}) {
    std::vector<UniqueId> scanned;
    uint64_t position = 0;
    for (;;) {
      std::vector<HistoryIndexEntry> batch;
      const uint64_t next = h->index().Scan(
          position, 7, max_bytes, [&](const HistoryIndexEntry& e) { batch.push_back(e); });
      if (next == position) break;
      ASSERT_FALSE(batch.empty());
      if (max_bytes == 1) {
        for (const HistoryIndexEntry& e : batch) EXPECT_EQ(e.submit_ns, batch[0].submit_ns);
      } else {
        // 7, and then only the others of the 7th one's submit ns.
        for (size_t i = 7; i < batch.size(); ++i) {
          EXPECT_EQ(batch[i].submit_ns, batch[6].submit_ns);
        }
      }
      for (const HistoryIndexEntry& e : batch) scanned.push_back(e.query_id);
      position = next;
    }
    ASSERT_EQ(scanned.size(), indexed.size());
    for (size_t i = 0; i < indexed.size(); ++i) EXPECT_EQ(scanned[i], indexed[i].query_id);
  }
  // Records of a segment deleted after the index was read are reported missing, not wrong.
  std::vector<HistoryIndexEntry> first = {indexed.front()};
  fs::remove(fs::path(dir_) / HistorySegmentName(indexed.front().segment));
  std::vector<std::optional<QueryHistoryRecord>> read;
  h->ReadRecords(first, &read);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_FALSE(read[0].has_value());
}

// Find() against the entries (a scan from the newest): every id found with its own entry
// (also far out of order, and among equal submit times), an id recorded twice as its newest
// submission, nothing after its segment is dropped.
TEST(HistoryIndexFindTest, FindsEachEntryByIdUntilItsSegmentIsDropped) {
  std::mt19937_64 rng(11);
  HistoryIndex index;
  struct Added {
    UniqueId id;
    int64_t submit_ns;
    uint32_t segment;
    uint32_t offset;
  };
  std::vector<Added> added;
  const std::string user = "u", source = "s";
  for (uint32_t n = 0; n < 5000; ++n) {
    HistoryRecordSummary r;
    r.query_id = UniqueId{rng(), n};
    r.user = user;
    r.source = source;
    // Mostly in order; every 50th submitted long before (a long query), many share a time.
    r.submit_time_ms = n % 50 == 0 ? static_cast<int64_t>(rng() % 1000) : 1000 + n / 4;
    const uint32_t segment = n / 500;
    index.Add(r, segment, n * 10, 10);
    added.push_back({r.query_id, r.submit_time_ms * 1000000, segment, n * 10});
  }
  auto check = [&](uint32_t first_kept_segment) {
    for (const Added& a : added) {
      std::optional<HistoryIndexEntry> e = index.Find(a.id);
      ASSERT_EQ(e.has_value(), a.segment >= first_kept_segment) << a.id.lo;
      if (!e) continue;
      EXPECT_EQ(e->query_id, a.id);
      EXPECT_EQ(e->submit_ns, a.submit_ns);
      EXPECT_EQ(e->segment, a.segment);
      EXPECT_EQ(e->offset, a.offset);
    }
  };
  check(0);
  EXPECT_FALSE(index.Find(UniqueId{1, 2}).has_value());
  index.DropSegment(0);
  index.DropSegment(1);
  check(2);
  EXPECT_EQ(index.size(), 4000u);

  // The same id recorded again, later, in a newer segment: Find() gives the newer entry; with
  // the older one's segment dropped, still the newer.
  HistoryRecordSummary again;
  again.query_id = added[2500].id;
  again.user = user;
  again.source = source;
  again.submit_time_ms = 9000;
  index.Add(again, 20, 0, 10);
  ASSERT_TRUE(index.Find(again.query_id).has_value());
  EXPECT_EQ(index.Find(again.query_id)->segment, 20u);
  index.DropSegment(5);
  ASSERT_TRUE(index.Find(again.query_id).has_value());
  EXPECT_EQ(index.Find(again.query_id)->segment, 20u);
  index.DropSegment(20);
  EXPECT_FALSE(index.Find(again.query_id).has_value());
}

// Retention frees the names of users and sources no entry refers to any more: a client that
// sends a new X-Trino-Source with each query grew the name table for good.
TEST(HistoryIndexNamesTest, DroppedEntriesFreeTheirNamesForReuse) {
  HistoryIndex index;
  std::vector<std::string> sources;
  auto add = [&](uint32_t n, uint32_t segment, const std::string& user) {
    char source[16];
    snprintf(source, sizeof(source), "source-%06u", n);  // every one the same length
    sources.emplace_back(source);
    HistoryRecordSummary r;
    r.query_id = UniqueId{n + 1, n};
    r.user = user;
    r.source = sources.back();
    r.submit_time_ms = 1000 + n;
    index.Add(r, segment, n * 10, 10);
  };
  sources.reserve(3000);  // the summaries' views stay valid
  for (uint32_t n = 0; n < 1000; ++n) add(n, n / 100, n % 2 ? "alice" : "bob");
  const size_t full = index.MemoryBytes();
  for (uint32_t segment = 0; segment < 10; ++segment) index.DropSegment(segment);
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.MemoryBytes(), 0u) << "every name freed";
  // New names take the freed numbers: the table does not grow.
  for (uint32_t n = 1000; n < 2000; ++n) add(n, 10 + (n - 1000) / 100, n % 2 ? "alice" : "cat");
  EXPECT_EQ(index.MemoryBytes(), full);
  const std::vector<HistoryIndexEntry> entries = index.Newest(2000);
  ASSERT_EQ(entries.size(), 1000u);
  for (const HistoryIndexEntry& e : entries) {
    const uint64_t n = e.query_id.lo;
    char source[16];
    snprintf(source, sizeof(source), "source-%06u", static_cast<unsigned>(n));
    EXPECT_EQ(index.Name(e.source), source);
    EXPECT_EQ(index.Name(e.user), n % 2 ? "alice" : "cat");
  }
  // A list filtered by visibility asks about live names only, and finds cat's.
  HistorySelectParams p;
  p.limit = 5000;
  std::vector<std::string> asked;
  p.visible = [&asked](std::string_view user) {
    asked.emplace_back(user);
    return user == "cat";
  };
  HistorySelection s = index.Select(p);
  EXPECT_EQ(s.matched, 500u);
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "bob"), 0);
  EXPECT_EQ(std::count(asked.begin(), asked.end(), ""), 0);
}

}  // namespace
}  // namespace qr
