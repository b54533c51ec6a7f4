// The completed list of GET /queries?json: the in-memory query log merged with the durable
// history's index, which holds every retained record (queries-list.h).

#include <algorithm>
#include <chrono>
#include <string_view>

#include "service/queries-list.h"
#include "service/query-coordinator.h"
#include "service/query-history-convert.h"
#include "service/query-history.h"

namespace qr {
namespace debug_pages {
namespace {

using State = ClientRequestState::State;

/// The history's version of 'params'; false if no completed query can match (a state filter
/// of live states only).
bool ToHistoryParams(const QueryListParams& params, HistorySelectParams* out) {
  for (const std::string& s : params.states) {
    for (State st : {State::kFinished, State::kFailed, State::kCanceled}) {
      if (s == ClientRequestState::StateName(st)) out->states.push_back(static_cast<uint8_t>(st));
    }
  }
  if (!params.states.empty() && out->states.empty()) return false;
  out->user = params.user;
  out->source = params.source;
  out->since_ms = params.since_ms;
  out->until_ms = params.until_ms;
  switch (params.sort) {
    case QuerySortKey::kStart: out->sort = HistorySelectParams::Sort::kStart; break;
    case QuerySortKey::kDuration: out->sort = HistorySelectParams::Sort::kDuration; break;
    case QuerySortKey::kRows: out->sort = HistorySelectParams::Sort::kRows; break;
  }
  out->ascending = params.ascending;
  if (params.cursor) out->after = std::make_pair(params.cursor->key, params.cursor->id);
  return true;
}

}  // namespace

QueryListPage SelectCompleted(const QueryCoordinator& coordinator, const QueryListParams& params,
                              const std::function<bool(std::string_view user)>& visible,
                              bool* partial) {
  *partial = false;
  std::function<bool(const ClientRequestState&)> visible_request;
  if (visible) visible_request = [&visible](const ClientRequestState& q) { return visible(q.user()); };
  const std::vector<ClientRequestStatePtr> log = coordinator.Completed();
  QueryListPage page = SelectQueries(log, params, /*use_cursor=*/true, visible_request);
  const QueryHistory* history = coordinator.options().history;
  HistorySelectParams hp;
  if (history == nullptr || !ToHistoryParams(params, &hp)) return page;

  // The log's queries are listed from the log (no disk read); the history adds the rest.
  hp.exclude.reserve(log.size());
  for (const auto& q : log) {
    const int64_t submit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  q->submit_wall_time().time_since_epoch()).count();
    hp.exclude.emplace_back(submit_ns, q->query_id());
  }
  hp.visible = visible;
  // A text search needs the statements: it reads at most 'max_scan' records per request,
  // and one more than a page is enough to know that another page follows.
  const bool text = !params.text.empty();
  hp.limit = text ? std::max(params.limit + 1, params.max_scan) : params.limit + 1;
  HistorySelection selection = history->index().Select(hp);
  const bool history_more_unread = selection.rows.size() == hp.limit;

  // Read the records in pages of 'limit' (one pread per nearby range of a segment), keeping
  // the ones the text matches, until a page's worth is found or 'max_scan_bytes' are read.
  std::vector<ListedQuery> rows;
  size_t examined = 0;
  size_t text_matched = 0;
  size_t bytes_left = params.max_scan_bytes;
  std::vector<std::optional<QueryHistoryRecord>> records;
  while (examined < selection.rows.size() && rows.size() < params.limit && bytes_left > 0) {
    const size_t want = std::min(params.limit - rows.size(), selection.rows.size() - examined);
    size_t n = 0;
    while (n < want) {
      const size_t length = selection.rows[examined + n].second.length;
      if (length > bytes_left && examined + n > 0) break;  // the very first one always
      bytes_left -= std::min(length, bytes_left);
      ++n;
    }
    if (n == 0) break;
    std::vector<HistoryIndexEntry> entries;
    for (size_t i = examined; i < examined + n; ++i) entries.push_back(selection.rows[i].second);
    history->ReadRecords(entries, &records);
    for (size_t i = 0; i < n; ++i) {
      if (!records[i]) continue;  // deleted by retention meanwhile
      if (text && (!records[i]->statement ||
                   !params.text.FoundIn(*records[i]->statement))) {
        continue;
      }
      ++text_matched;
      ClientRequestStatePtr req = RestoreFromHistory(std::move(*records[i]));
      ClientRequestState::Info info = req->GetInfo();
      const char* state = DisplayState(*req, info.state);
      rows.push_back(ListedQuery{std::move(req), std::move(info), state,
                                 selection.rows[examined + i].first});
    }
    examined += n;
  }
  // A scan that stopped before the history's end (a text search's record budget, or the
  // byte budget, not a full page) covers the order only up to the last record it examined.
  const bool history_more = history_more_unread || examined < selection.rows.size();
  std::optional<QueryListCursor> scanned_to;
  if (examined > 0 && rows.size() < params.limit &&
      (examined < selection.rows.size() || (text && history_more_unread))) {
    *partial = true;
    scanned_to = QueryListCursor{selection.rows[examined - 1].first,
                                 selection.rows[examined - 1].second.query_id};
  }

  // Merge the two sorted lists.
  auto before = [&params](int64_t ka, const UniqueId& ia, int64_t kb, const UniqueId& ib) {
    if (ka != kb) return params.ascending ? ka < kb : ka > kb;
    return params.ascending ? ia < ib : ib < ia;
  };
  std::vector<ListedQuery> merged;
  merged.reserve(page.rows.size() + rows.size());
  std::merge(std::make_move_iterator(page.rows.begin()), std::make_move_iterator(page.rows.end()),
             std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()),
             std::back_inserter(merged), [&](const ListedQuery& a, const ListedQuery& b) {
               return before(a.key, a.request->query_id(), b.key, b.request->query_id());
             });
  bool more = page.next.has_value() || history_more || merged.size() > params.limit;
  if (scanned_to) {
    // Nothing beyond what the history's scan covered: the next page starts there.
    std::erase_if(merged, [&](const ListedQuery& r) {
      return before(scanned_to->key, scanned_to->id, r.key, r.request->query_id());
    });
    more = true;
  }
  if (merged.size() > params.limit) merged.resize(params.limit);
  page.matched += text ? text_matched : selection.matched;
  page.rows = std::move(merged);
  page.next.reset();
  if (more) {
    if (scanned_to && page.rows.size() < params.limit) {
      page.next = *scanned_to;
    } else if (!page.rows.empty()) {
      page.next = QueryListCursor{page.rows.back().key, page.rows.back().request->query_id()};
    }
  }
  return page;
}

}  // namespace debug_pages
}  // namespace qr
