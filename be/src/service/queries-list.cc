// The filters, sort and paging of GET /queries?json (queries-list.h).

#include "service/queries-list.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>

#include "http/webserver.h"
#include "service/query-history-record.h"
#include "util/status.h"

namespace qr {
namespace debug_pages {
namespace {

/// Longest accepted 'q' (characters are bytes here: the bound only keeps a request cheap).
constexpr size_t kMaxTextBytes = 1000;

bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

/// Milliseconds since the epoch, or "YYYY-MM-DDTHH:MM[:SS[.mmm]]Z" (UTC), up to
/// kMaxNanosecondTimeMs.
bool ParseTime(std::string_view s, int64_t* ms) {
  if (ParseInt64(s, ms)) return *ms >= 0 && *ms <= kMaxNanosecondTimeMs;
  if (s.size() < 17 || s.size() > 24 || s.back() != 'Z') return false;
  std::string text(s);
  struct tm tm {};
  int sec = 0, millis = 0, consumed = 0;
  int n = sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                 &tm.tm_hour, &tm.tm_min, &consumed);
  if (n != 5) return false;
  std::string_view rest = std::string_view(text).substr(consumed);
  if (rest.size() >= 3 && rest[0] == ':') {
    if (!std::isdigit(static_cast<unsigned char>(rest[1])) ||
        !std::isdigit(static_cast<unsigned char>(rest[2]))) {
      return false;
    }
    sec = (rest[1] - '0') * 10 + (rest[2] - '0');
    rest.remove_prefix(3);
    if (rest.size() == 5 && rest[0] == '.') {
      for (int i = 1; i <= 3; ++i) {
        if (!std::isdigit(static_cast<unsigned char>(rest[i]))) return false;
        millis = millis * 10 + (rest[i] - '0');
      }
      rest.remove_prefix(4);
    }
  }
  if (rest != "Z") return false;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || sec > 60 || tm.tm_year < 1970) {
    return false;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  if (t < 0) return false;
  *ms = static_cast<int64_t>(t) * 1000 + millis;
  return *ms <= kMaxNanosecondTimeMs;
}

int64_t StartMs(const ClientRequestState& req) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             req.submit_wall_time().time_since_epoch())
      .count();
}

/// Nanoseconds: queries submitted within the same millisecond still sort by submission.
int64_t StartNs(const ClientRequestState& req) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             req.submit_wall_time().time_since_epoch())
      .count();
}

int64_t SortKeyOf(QuerySortKey sort, const ClientRequestState& req,
                  const ClientRequestState::Info& info) {
  switch (sort) {
    case QuerySortKey::kStart: return StartNs(req);
    case QuerySortKey::kDuration: return info.elapsed_ms;
    case QuerySortKey::kRows: return info.rows_delivered;
  }
  return 0;
}

/// The filters that need no counters (the state is checked by the caller).
bool Matches(const QueryListParams& p, const ClientRequestState& req) {
  if (p.user && req.user() != *p.user) return false;
  if (p.source && req.session().source != *p.source) return false;
  if (p.since_ms || p.until_ms) {
    int64_t start = StartMs(req);
    if (p.since_ms && start < *p.since_ms) return false;
    if (p.until_ms && start >= *p.until_ms) return false;
  }
  if (!p.text.empty()) {
    if (!req.statement() || !p.text.FoundIn(*req.statement())) return false;
  }
  return true;
}

}  // namespace

namespace {

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

IgnoreCaseSearch::IgnoreCaseSearch(std::string_view needle) : needle_(needle) {
  for (char& c : needle_) c = AsciiLower(c);
  fallback_.assign(needle_.size(), 0);
  uint32_t k = 0;
  for (size_t i = 1; i < needle_.size(); ++i) {
    while (k > 0 && needle_[i] != needle_[k]) k = fallback_[k - 1];
    if (needle_[i] == needle_[k]) ++k;
    fallback_[i] = k;
  }
}

bool IgnoreCaseSearch::FoundIn(std::string_view text) const {
  if (needle_.empty()) return true;
  // Each byte of 'text' is read once; 'k' (bytes of the needle matched) falls back along the
  // table, which it climbed at most once per byte: at most 2 * text.size() steps in all.
  size_t k = 0;
  for (char raw : text) {
    const char c = AsciiLower(raw);
    while (k > 0 && c != needle_[k]) k = fallback_[k - 1];
    if (c == needle_[k] && ++k == needle_.size()) return true;
  }
  return false;
}

std::string EncodeCursor(const QueryListCursor& cursor) {
  return std::to_string(cursor.key) + "." + PrintId(cursor.id);
}

bool DecodeCursor(std::string_view text, QueryListCursor* cursor) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  return ParseInt64(text.substr(0, dot), &cursor->key) &&
         ParseId(text.substr(dot + 1), &cursor->id).ok();
}

bool ParseQueryListParams(const HttpRequest& req, size_t max_limit, QueryListParams* out,
                          std::string* error) {
  *out = QueryListParams();
  out->limit = std::min(kDefaultQueryListLimit, max_limit);
  out->max_scan = max_limit;
  bool present = false;
  std::string value = req.QueryParam("state", &present);
  if (present) {
    std::string_view rest = value;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view s = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (s.empty()) continue;
      static constexpr const char* kStates[] = {"QUEUED", "RUNNING", "FINISHED", "FAILED",
                                                "CANCELED"};
      auto it = std::find_if(std::begin(kStates), std::end(kStates),
                             [&](const char* name) { return s == name; });
      if (it == std::end(kStates)) {
        *error = "Bad state " + QuoteForError(s, 40) +
                 ": use QUEUED, RUNNING, FINISHED, FAILED or CANCELED (comma-separated)";
        return false;
      }
      out->states.emplace_back(*it);
    }
  }
  value = req.QueryParam("user", &present);
  if (present) out->user = value;
  value = req.QueryParam("source", &present);
  if (present) out->source = value;
  value = req.QueryParam("q", &present);
  out->text = IgnoreCaseSearch(value);
  if (value.size() > kMaxTextBytes) {
    *error = "Bad q: the text to search for is longer than " + std::to_string(kMaxTextBytes) +
             " bytes";
    return false;
  }
  for (const char* name : {"since", "until"}) {
    value = req.QueryParam(name, &present);
    if (!present) continue;
    int64_t ms = 0;
    if (!ParseTime(value, &ms)) {
      *error = std::string("Bad ") + name + " " + QuoteForError(value, 40) +
               ": use milliseconds since the Unix epoch or YYYY-MM-DDTHH:MM[:SS[.mmm]]Z, "
                                "up to 2262-04-11";
      return false;
    }
    (std::string_view(name) == "since" ? out->since_ms : out->until_ms) = ms;
  }
  value = req.QueryParam("sort", &present);
  if (present) {
    if (value == "start") {
      out->sort = QuerySortKey::kStart;
    } else if (value == "duration") {
      out->sort = QuerySortKey::kDuration;
    } else if (value == "rows") {
      out->sort = QuerySortKey::kRows;
    } else {
      *error = "Bad sort " + QuoteForError(value, 40) + ": use start, duration or rows";
      return false;
    }
  }
  value = req.QueryParam("order", &present);
  if (present) {
    if (value != "asc" && value != "desc") {
      *error = "Bad order " + QuoteForError(value, 40) + ": use asc or desc";
      return false;
    }
    out->ascending = value == "asc";
  }
  value = req.QueryParam("limit", &present);
  if (present) {
    int64_t limit = 0;
    if (!ParseInt64(value, &limit) || limit < 1 || static_cast<uint64_t>(limit) > max_limit) {
      *error = "Bad limit " + QuoteForError(value, 40) + ": use 1 to " +
               std::to_string(max_limit) + " (--queries_max_limit)";
      return false;
    }
    out->limit = static_cast<size_t>(limit);
  }
  value = req.QueryParam("cursor", &present);
  if (present && !value.empty()) {
    QueryListCursor cursor;
    if (!DecodeCursor(value, &cursor)) {
      *error = "Bad cursor " + QuoteForError(value, 60) +
               ": pass back the next_cursor of a previous answer";
      return false;
    }
    out->cursor = cursor;
  }
  return true;
}

const char* DisplayState(const ClientRequestState& req, ClientRequestState::State state) {
  // Admitted but waiting for an executor thread is QUEUED (an admission slot is not a thread).
  if (state == ClientRequestState::State::kQueued && req.exec_elapsed_ms() >= 0) {
    return ClientRequestState::StateName(ClientRequestState::State::kRunning);
  }
  return ClientRequestState::StateName(state);
}

QueryListPage SelectQueries(const std::vector<ClientRequestStatePtr>& requests,
                            const QueryListParams& params, bool use_cursor,
                            const std::function<bool(const ClientRequestState&)>& visible) {
  // A candidate: the request and its sort key. The counters (a copy under the request's lock)
  // are read here only when the filter or the key needs them, and again for the kept rows.
  struct Candidate {
    const ClientRequestStatePtr* request;
    int64_t key;
  };
  const bool need_info = !params.states.empty() || params.sort != QuerySortKey::kStart;
  std::vector<Candidate> candidates;
  candidates.reserve(requests.size());
  for (const auto& req : requests) {
    if (visible && !visible(*req)) continue;
    if (!Matches(params, *req)) continue;
    int64_t key = 0;
    if (need_info) {
      ClientRequestState::Info info = req->GetInfo();
      if (!params.states.empty()) {
        const char* state = DisplayState(*req, info.state);
        if (std::find(params.states.begin(), params.states.end(), state) ==
            params.states.end()) {
          continue;
        }
      }
      key = SortKeyOf(params.sort, *req, info);
    } else {
      key = StartNs(*req);
    }
    candidates.push_back(Candidate{&req, key});
  }
  QueryListPage page;
  page.matched = candidates.size();
  auto id_of = [](const Candidate& c) -> const UniqueId& { return (*c.request)->query_id(); };
  auto before = [&](const Candidate& a, const Candidate& b) {
    if (a.key != b.key) return params.ascending ? a.key < b.key : a.key > b.key;
    return params.ascending ? id_of(a) < id_of(b) : id_of(b) < id_of(a);
  };
  if (use_cursor && params.cursor) {
    const QueryListCursor& c = *params.cursor;
    std::erase_if(candidates, [&](const Candidate& r) {
      if (r.key != c.key) return params.ascending ? r.key < c.key : r.key > c.key;
      return params.ascending ? !(c.id < id_of(r)) : !(id_of(r) < c.id);
    });
  }
  size_t keep = std::min(params.limit, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(keep),
                    candidates.end(), before);
  if (keep > 0 && candidates.size() > keep) {
    page.next = QueryListCursor{candidates[keep - 1].key, id_of(candidates[keep - 1])};
  }
  page.rows.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const ClientRequestStatePtr& req = *candidates[i].request;
    ClientRequestState::Info info = req->GetInfo();
    const char* state = DisplayState(*req, info.state);
    page.rows.push_back(ListedQuery{req, std::move(info), state, candidates[i].key});
  }
  return page;
}

}  // namespace debug_pages
}  // namespace qr
