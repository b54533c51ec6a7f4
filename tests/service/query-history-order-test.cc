// The query history index's submit order: records added in completion order (a query
// submitted earlier may complete later), equal timestamps, the binary-search page against a
// brute-force model, cursors across appends, retention of segments whose entries interleave,
// and scans in batches.

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "service/query-history-index.h"

namespace qr {
namespace {

using Key = std::pair<int64_t, UniqueId>;

/// One added record, as the model sees it.
struct Added {
  Key key;
  uint64_t segment = 0;
};

class HistoryOrderTest : public ::testing::Test {
 protected:
  /// Adds a record submitted at 'submit_ns' (ms and extra ns, as the writer does) to
  /// 'segment'.
  void Add(int64_t submit_ns, uint64_t segment, const std::string& user = "u") {
    HistoryRecordSummary s;
    s.query_id = UniqueId{rng_(), ++serial_};
    s.user = user;
    s.source = "cli";
    s.state = 2;
    s.submit_time_ms = submit_ns / 1000000;
    s.submit_time_extra_ns = static_cast<int32_t>(submit_ns % 1000000);
    index_.Add(s, segment, offsets_++ * 100, 100);
    added_.push_back(Added{{submit_ns, s.query_id}, segment});
  }
  std::vector<Key> Sorted() const {
    std::vector<Key> keys;
    for (const Added& a : added_) keys.push_back(a.key);
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  std::vector<Key> Indexed() const {
    std::vector<Key> keys;
    for (const HistoryIndexEntry& e : index_.Newest(1 << 30)) {
      keys.emplace_back(e.submit_ns, e.query_id);
    }
    return keys;
  }
  /// Completion order: submissions in order, each running 0-'max_run_ns' (some much longer),
  /// added when they complete; some share a submit time.
  void AddCompleting(int n, int64_t max_run_ns, uint64_t records_per_segment) {
    std::vector<std::pair<int64_t, int64_t>> done;  // (end, submit)
    int64_t t = 1700000000000000000;
    for (int i = 0; i < n; ++i) {
      if (rng_() % 4 != 0) t += static_cast<int64_t>(rng_() % 5000);  // else: the same ns
      int64_t run = static_cast<int64_t>(rng_() % static_cast<uint64_t>(max_run_ns));
      if (rng_() % 50 == 0) run *= 100;  // a long query: many complete before it
      done.emplace_back(t + run, t);
    }
    std::stable_sort(done.begin(), done.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < done.size(); ++i) Add(done[i].second, 1 + i / records_per_segment);
  }

  std::mt19937_64 rng_{1234};
  uint64_t serial_ = 0;
  uint64_t offsets_ = 0;
  HistoryIndex index_;
  std::vector<Added> added_;
};

TEST_F(HistoryOrderTest, OutOfOrderCompletionsAreKeptInSubmitOrder) {
  AddCompleting(5000, 20000, 1000);
  EXPECT_EQ(Indexed(), Sorted());
  // In reverse too: every add an insertion at the front.
  HistoryIndex reverse;
  std::vector<Key> keys = Sorted();
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
    HistoryRecordSummary s;
    s.query_id = it->second;
    s.submit_time_ms = it->first / 1000000;
    s.submit_time_extra_ns = static_cast<int32_t>(it->first % 1000000);
    reverse.Add(s, 1, 0, 10);
  }
  std::vector<Key> got;
  for (const HistoryIndexEntry& e : reverse.Newest(1 << 30)) {
    got.emplace_back(e.submit_ns, e.query_id);
  }
  EXPECT_EQ(got, keys);
}

TEST_F(HistoryOrderTest, StartUpLoadsInReadOrderAndSortsOnce) {
  // As start-up reads them: in completion order, here many with one submit time.
  std::vector<Key> keys;
  HistoryIndex loaded;
  for (int i = 0; i < 2000; ++i) {
    HistoryRecordSummary s;
    s.query_id = UniqueId{rng_(), rng_()};
    s.submit_time_ms = 1700000000000 + (i % 3 == 0 ? 0 : i / 10);
    loaded.Load(s, 1 + static_cast<uint64_t>(i / 500), static_cast<uint64_t>(i) * 10, 10);
    keys.emplace_back(s.submit_time_ms * 1000000, s.query_id);
  }
  loaded.FinishLoad();
  std::sort(keys.begin(), keys.end());
  std::vector<Key> got;
  for (const HistoryIndexEntry& e : loaded.Newest(1 << 30)) {
    got.emplace_back(e.submit_ns, e.query_id);
  }
  EXPECT_EQ(got, keys);
  // Retention after a load finds each segment's entries.
  loaded.DropSegment(1);
  EXPECT_EQ(loaded.size(), 1500u);
  for (const HistoryIndexEntry& e : loaded.Newest(1 << 30)) EXPECT_NE(e.segment, 1u);
}

TEST_F(HistoryOrderTest, StartPagesMatchABruteForceModel) {
  AddCompleting(3000, 20000, 500);
  const std::vector<Key> all = Sorted();
  const int64_t first_ms = all.front().first / 1000000;
  const int64_t last_ms = all.back().first / 1000000;
  for (int round = 0; round < 24; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    HistorySelectParams p;
    p.ascending = round % 2 == 0;
    p.limit = 1 + static_cast<size_t>(round * 7 % 60);
    if (round % 3 == 1) p.since_ms = first_ms + (last_ms - first_ms) / 3;
    if (round % 4 == 2) p.until_ms = first_ms + (last_ms - first_ms) * 2 / 3;
    if (round % 5 == 3) p.since_ms = p.until_ms = first_ms + (last_ms - first_ms) / 2;  // empty
    // Every user visible: the binary-search path still.
    if (round % 6 == 5) p.visible = [](std::string_view) { return true; };
    // Some queries listed elsewhere (the log), some of them unknown to the index.
    std::set<UniqueId> excluded;
    for (size_t i = static_cast<size_t>(round); i < all.size(); i += 97) {
      p.exclude.push_back(all[i]);
      excluded.insert(all[i].second);
    }
    p.exclude.emplace_back(all.back().first, UniqueId{1, 1});
    std::vector<Key> expected;
    for (const Key& k : all) {
      if (p.since_ms && k.first < *p.since_ms * 1000000) continue;
      if (p.until_ms && k.first >= *p.until_ms * 1000000) continue;
      if (!excluded.contains(k.second)) expected.push_back(k);
    }
    if (!p.ascending) std::reverse(expected.begin(), expected.end());
    std::vector<Key> paged;
    for (int page = 0; page < 4000; ++page) {
      HistorySelection s = index_.Select(p);
      EXPECT_EQ(s.matched, expected.size());
      for (const auto& [k, e] : s.rows) {
        EXPECT_EQ(k, e.submit_ns);
        paged.emplace_back(k, e.query_id);
      }
      if (s.rows.size() < p.limit) break;
      p.after = std::make_pair(s.rows.back().first, s.rows.back().second.query_id);
    }
    EXPECT_EQ(paged, expected);
  }
}

TEST_F(HistoryOrderTest, CursorIsStableWhileQueriesKeepCompleting) {
  AddCompleting(400, 20000, 100);
  const std::vector<Key> before = Sorted();
  HistorySelectParams p;  // newest first, the page's default
  p.limit = 25;
  std::vector<Key> paged;
  int64_t t = before.back().first;
  for (int page = 0; page < 100; ++page) {
    HistorySelection s = index_.Select(p);
    for (const auto& [k, e] : s.rows) paged.emplace_back(k, e.query_id);
    if (s.rows.size() < p.limit) break;
    p.after = std::make_pair(s.rows.back().first, s.rows.back().second.query_id);
    // Between pages: new queries (they sort before the cursor) and one that was submitted
    // long ago and completes now, and one at exactly the cursor's time.
    Add(t += 1000, 50);
    Add(before.front().first - 1000 * page, 50);
    Add(s.rows.back().first, 50);
  }
  // No row twice; every row present at the start is listed, in order.
  std::set<Key> seen(paged.begin(), paged.end());
  EXPECT_EQ(seen.size(), paged.size());
  for (const Key& k : before) EXPECT_TRUE(seen.contains(k));
  EXPECT_TRUE(std::is_sorted(paged.rbegin(), paged.rend()));
}

TEST_F(HistoryOrderTest, DroppingSegmentsKeepsTheOthersInOrder) {
  AddCompleting(2000, 50000, 200);  // segments 1-10, long queries straddling them
  std::vector<Added> kept = added_;
  for (uint64_t segment : {1, 2, 5, 3, 10}) {  // 5 out of order (an earlier deletion failed)
    index_.DropSegment(segment);
    std::erase_if(kept, [&](const Added& a) { return a.segment == segment; });
    std::vector<Key> expected;
    for (const Added& a : kept) expected.push_back(a.key);
    std::sort(expected.begin(), expected.end());
    ASSERT_EQ(Indexed(), expected) << "after segment " << segment;
  }
  index_.DropSegment(3);  // again: nothing left of it
  index_.DropSegment(99);  // never written
  EXPECT_EQ(index_.size(), kept.size());
  // Added after the drops: still in order.
  Add(added_.front().key.first, 11);
  Add(added_.back().key.first + 5, 11);
  std::vector<Key> got = Indexed();
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.size(), kept.size() + 2);
}

TEST_F(HistoryOrderTest, ScanReadsEveryEntryOnceAcrossEqualSubmitTimes) {
  // Runs of equal submit times longer than a batch.
  for (int i = 0; i < 300; ++i) Add(1700000000000000000 + (i / 40) * 7, 1);
  AddCompleting(300, 1000, 100);
  for (const size_t max_bytes : {SIZE_MAX, size_t{1}}) {
    std::vector<Key> scanned;
    uint64_t position = 0;
    for (int batch = 0; batch < 1000; ++batch) {
      const uint64_t next = index_.Scan(position, 16, max_bytes, [&](const HistoryIndexEntry& e) {
        scanned.emplace_back(e.submit_ns, e.query_id);
      });
      if (next == position) break;
      EXPECT_GT(next, position);
      position = next;
    }
    EXPECT_EQ(scanned, Sorted()) << max_bytes;
  }
}

}  // namespace
}  // namespace qr
