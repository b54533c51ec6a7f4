#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "service/client-request-state.h"
#include "util/unique-id.h"

namespace qr {

struct HttpRequest;
class QueryCoordinator;

namespace debug_pages {

/// What /queries?json sorts by (docs/operations.md#queries-and-queriesjson).
enum class QuerySortKey {
  kStart,     // submit time (wall clock, ns)
  kDuration,  // elapsed ms (so far, for an in-flight query)
  kRows,      // rows handed to the client
};

/// Where a page of the completed list ends: the sort key and id of its last row. The next
/// page holds the rows strictly after it in the sort order (key, then id). Completed queries
/// never change, so paging with a cursor neither repeats nor skips a row while queries keep
/// completing (they sort before the cursor in the default newest-first order).
struct QueryListCursor {
  int64_t key = 0;
  UniqueId id;
};
/// "<key>.<id>" (url-safe); clients treat it as opaque.
std::string EncodeCursor(const QueryListCursor& cursor);
bool DecodeCursor(std::string_view text, QueryListCursor* cursor);

/// A substring to look for, ASCII letters compared case-insensitively, in time linear in the
/// text searched (Knuth-Morris-Pratt). A naive search costs up to the text's length times
/// the needle's: a client's 1,000-byte needle against megabyte statements was 10^9
/// comparisons per statement, on an HTTP I/O thread.
class IgnoreCaseSearch {
 public:
  IgnoreCaseSearch() = default;
  explicit IgnoreCaseSearch(std::string_view needle);
  /// For tests and callers that assign the needle.
  IgnoreCaseSearch& operator=(std::string_view needle) { return *this = IgnoreCaseSearch(needle); }

  bool empty() const { return needle_.empty(); }
  size_t size() const { return needle_.size(); }
  /// Whether 'text' contains the needle (an empty needle is in every text).
  bool FoundIn(std::string_view text) const;

 private:
  std::string needle_;  // ASCII letters in lower case
  /// fallback_[i]: the length of the longest proper prefix of needle_[0..i] that is also its
  /// suffix.
  std::vector<uint32_t> fallback_;
};

/// QueryListParams::max_scan_bytes' default.
constexpr size_t kMaxHistoryScanBytes = 64 << 20;

/// The filters, order and page of one GET /queries?json. Defaults: everything, newest first.
struct QueryListParams {
  /// Display states (QUEUED, RUNNING, FINISHED, FAILED, CANCELED) to keep; empty: all.
  std::vector<std::string> states;
  /// Exact user / source; nullopt: any.
  std::optional<std::string> user;
  std::optional<std::string> source;
  /// A substring of the statement, ASCII case-insensitive; empty: any.
  IgnoreCaseSearch text;
  /// Submit time in [since_ms, until_ms), ms since the Unix epoch; nullopt: unbounded.
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;
  QuerySortKey sort = QuerySortKey::kStart;
  bool ascending = false;
  /// Rows of each list at most.
  size_t limit = 100;
  /// Continue the completed list after this row.
  std::optional<QueryListCursor> cursor;
  /// A text search reads at most this many records of the on-disk history per request
  /// (--queries_max_limit); beyond, the answer is partial and its cursor continues the scan.
  size_t max_scan = 1000;
  /// Any list reads at most this many bytes of history records per request (at least one
  /// record): a page of 1,000 records of 1 MiB statements read, decoded and held 1 GB per
  /// request. Beyond, the answer is partial and its cursor continues the scan.
  size_t max_scan_bytes = kMaxHistoryScanBytes;
};

/// The default of 'limit' when the request names none (capped by the maximum).
constexpr size_t kDefaultQueryListLimit = 100;

/// Reads the parameters of 'req' (state, user, source, q, since, until, sort, order, limit,
/// cursor). 'limit' must be within [1, max_limit]. On a bad value returns false with
/// '*error' naming the parameter and what it accepts.
bool ParseQueryListParams(const HttpRequest& req, size_t max_limit, QueryListParams* out,
                          std::string* error);

/// One listed query: the request and one snapshot of its counters (read once, so the row's
/// fields agree with each other; a running query's duration or rows may have moved on since
/// it was sorted).
struct ListedQuery {
  ClientRequestStatePtr request;
  ClientRequestState::Info info;
  const char* display_state = "";
  int64_t key = 0;
};

/// One list after filtering, sorting and paging.
struct QueryListPage {
  std::vector<ListedQuery> rows;
  /// Rows that matched the filters (before the cursor and the limit).
  size_t matched = 0;
  /// Set when rows beyond this page match: pass it as 'cursor' for the next page.
  std::optional<QueryListCursor> next;
};

/// The protocol state, except that a request whose client has not polled since an executor
/// thread started it shows as RUNNING (what the server is doing).
const char* DisplayState(const ClientRequestState& req, ClientRequestState::State state);

/// Filters 'requests' by 'params' (and 'visible', when set), sorts them, skips to the cursor
/// when 'use_cursor', and keeps 'params.limit' rows. Only the kept rows are snapshotted
/// (GetInfo()), plus every candidate when a state filter or a counter sort needs it.
QueryListPage SelectQueries(const std::vector<ClientRequestStatePtr>& requests,
                            const QueryListParams& params, bool use_cursor,
                            const std::function<bool(const ClientRequestState&)>& visible);

/// The completed list: the completed-query log and, when the query history is on, every
/// other retained record of it (its index filters and sorts; only the page's records are read
/// from the segments). 'visible' (null: everything) says whose queries the caller may see.
/// '*partial' is set when a text search stopped at 'params.max_scan' records of the history,
/// or any list at 'params.max_scan_bytes' of its records, before filling the page: 'next'
/// then continues from the last record it read.
QueryListPage SelectCompleted(const QueryCoordinator& coordinator, const QueryListParams& params,
                              const std::function<bool(std::string_view user)>& visible,
                              bool* partial);

}  // namespace debug_pages
}  // namespace qr
