#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "service/query-history-record.h"
#include "util/mutex.h"
#include "util/status.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace qr {

/// Where one record of the history is, and what the lists filter and sort it by: 64 bytes
/// per record (docs/architecture.md#query-history). The user and source are numbers of the
/// index's name table.
struct HistoryIndexEntry {
  UniqueId query_id;
  /// Submission, ns since the Unix epoch: the list's "start" sort key.
  int64_t submit_ns = 0;
  int64_t elapsed_ms = 0;
  int64_t rows_delivered = 0;
  /// The segment's sequence number, the frame's offset in it and its size.
  uint32_t segment = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  uint32_t user = 0;
  uint32_t source = 0;
  /// ClientRequestState::State of the terminal state.
  uint8_t state = 0;
};

/// What HistoryIndex::Select() picks: the filters, order and page of a list of completed
/// queries (as /queries?json's, less the text search, which needs the statements).
struct HistorySelectParams {
  enum class Sort { kStart, kDuration, kRows };
  /// ClientRequestState::State values to keep; empty: all.
  std::vector<uint8_t> states;
  std::optional<std::string> user;
  std::optional<std::string> source;
  /// Submission in [since_ms, until_ms).
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;
  Sort sort = Sort::kStart;
  bool ascending = false;
  size_t limit = 100;
  /// Only rows strictly after (key, id) in the order.
  std::optional<std::pair<int64_t, UniqueId>> after;
  /// Users whose queries the caller may see (null: all).
  std::function<bool(std::string_view user)> visible;
  /// Queries listed from elsewhere (the in-memory log), by (submit ns, id): neither counted
  /// nor kept.
  std::vector<std::pair<int64_t, UniqueId>> exclude;
};

/// The rows Select() kept, in order, each with its sort key.
struct HistorySelection {
  std::vector<std::pair<int64_t, HistoryIndexEntry>> rows;
  /// Rows that matched the filters (before 'after' and 'limit').
  size_t matched = 0;
};

/// The in-memory index of every record in the retained history: built from the segments at
/// start-up, appended by the writer after each write, trimmed when retention deletes a
/// segment. Lists and SQL scans filter and sort here and read only the records they show,
/// from the segments (ReadHistoryRecords()).
/// The entries are kept in submit order, (submit ns, id): records arrive in completion order,
/// nearly sorted, so an add is an append or an insertion near the end. A list by start time
/// (the default, newest first) with at most a time range is a binary search and a walk of its
/// page; other filters and sorts are one pass over the entries
/// (docs/architecture.md#query-history).
/// Thread-safety: all methods are thread-safe; its lock is a leaf.
class HistoryIndex {
 public:
  /// Adds the record framed at 'offset' of segment 'segment' ('length' bytes). A record past
  /// 4 GiB into a segment is not indexed (segments rotate at --query_history_segment_bytes).
  void Add(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
           size_t length);
  /// As Add(), at start-up before anything reads the index, then FinishLoad() once: an
  /// entry far out of submit order (a long query's; or equal timestamps) is kept aside and
  /// merged in at the end, so a load costs O(n + k log k) for k such entries rather than an
  /// insertion each.
  void Load(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
            size_t length);
  void FinishLoad();
  /// Forgets the records of a segment retention deleted.
  void DropSegment(uint64_t segment);

  /// Filters and sorts the entries. By start time with no user, source or state filter (and
  /// every user visible): a binary search and a walk of the page, O(log n + limit + excluded);
  /// otherwise one pass under the lock, keeping the best 'limit'.
  HistorySelection Select(const HistorySelectParams& params) const;
  /// Calls 'fn' for the entries from 'position' on (oldest submission first): 'max' of them,
  /// or fewer once their records' lengths add up to 'max_bytes' (at least one), unless the
  /// index ends first, and more only to finish the entries of the last one's submit ns;
  /// returns the position after the last one (unchanged when there is none). A
  /// position is a submit time (0: the start), so a scan continues at the right place while
  /// entries are added and retention trims; an entry added behind a running scan's position
  /// is not seen by it.
  uint64_t Scan(uint64_t position, size_t max, size_t max_bytes,
                const std::function<void(const HistoryIndexEntry&)>& fn) const;
  /// The 'n' newest submissions, oldest first.
  std::vector<HistoryIndexEntry> Newest(size_t n) const;
  /// The entry of 'id', newest first; nullopt if none.
  std::optional<HistoryIndexEntry> Find(const UniqueId& id) const;
  /// The user or source of a number in an entry.
  std::string Name(uint32_t number) const;

  size_t size() const;
  /// Bytes the entries and the name table take (for the metrics).
  size_t MemoryBytes() const;

 private:
  /// The number of 'name', with one more reference to it.
  uint32_t InternLocked(std::string_view name) QR_REQUIRES(lock_);
  /// Drops a reference to name 'number'; the last one frees it (retention drops the entries
  /// of users and sources that are gone: a source per query would otherwise grow the table
  /// for good).
  void ReleaseNameLocked(uint32_t number) QR_REQUIRES(lock_);
  /// The entry of a record; false if it lies beyond what an entry can address.
  bool MakeEntryLocked(const HistoryRecordSummary& record, uint64_t segment, uint64_t offset,
                       size_t length, HistoryIndexEntry* e) QR_REQUIRES(lock_);
  HistorySelection SelectByStartLocked(const HistorySelectParams& params) const
      QR_REQUIRES(lock_);
  HistorySelection SelectByPassLocked(const HistorySelectParams& params,
                                      const std::vector<int8_t>& visible) const
      QR_REQUIRES(lock_);

  mutable Mutex lock_;
  /// Sorted by (submit_ns, query_id).
  std::deque<HistoryIndexEntry> entries_ QR_GUARDED_BY(lock_);
  /// The latest submission of each segment's entries: DropSegment() looks for them only
  /// up to it.
  std::unordered_map<uint32_t, int64_t> segment_last_submit_ QR_GUARDED_BY(lock_);
  /// Entries Load() found far out of order, merged in by FinishLoad().
  std::vector<HistoryIndexEntry> late_ QR_GUARDED_BY(lock_);
  std::vector<std::string> names_ QR_GUARDED_BY(lock_);
  /// Entries referring to each name (as user or source); 0: the number is free.
  std::vector<uint32_t> name_refs_ QR_GUARDED_BY(lock_);
  std::vector<uint32_t> free_names_ QR_GUARDED_BY(lock_);
  std::unordered_map<std::string, uint32_t> name_numbers_ QR_GUARDED_BY(lock_);
  size_t name_bytes_ QR_GUARDED_BY(lock_) = 0;
};

/// Reads the records of 'entries' from the segments in 'dir': the entries of one segment in
/// as few pread(2)s as their offsets allow (ranges less than 64 KiB apart are read as one).
/// '(*out)[i]' is entries[i]'s record, or nullopt if its segment is gone (retention) or the
/// bytes no longer match.
void ReadHistoryRecords(const std::string& dir, const std::vector<HistoryIndexEntry>& entries,
                        std::vector<std::optional<QueryHistoryRecord>>* out);

/// "history-<sequence>.log", 20 digits.
std::string HistorySegmentName(uint64_t sequence);

}  // namespace qr
