#include "service/cluster-queries.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace qr {
namespace debug_pages {
namespace {

using Json = nlohmann::ordered_json;

/// A row and its position in the total order.
struct Positioned {
  QueryListCursor at;
  const Json* row;
};

/// True when 'a' comes before 'b' in the order 'params' asks for (SelectQueries()'s order).
bool Before(const QueryListParams& params, const QueryListCursor& a, const QueryListCursor& b) {
  if (a.key != b.key) return params.ascending ? a.key < b.key : a.key > b.key;
  return params.ascending ? a.id < b.id : b.id < a.id;
}

/// The rows of list 'name' of every page that answered, in order.
std::vector<Positioned> Collect(const QueryListParams& params,
                                const std::vector<MemberQueriesPage>& pages, const char* name) {
  std::vector<Positioned> rows;
  for (const MemberQueriesPage& p : pages) {
    if (!p.ok) continue;
    for (const Json& row : p.page[name]) {
      Positioned r{{}, &row};
      if (row.contains("cursor") && row["cursor"].is_string()) {
        DecodeCursor(row["cursor"].get<std::string>(), &r.at);
      }
      rows.push_back(r);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const Positioned& a, const Positioned& b) {
    return Before(params, a.at, b.at);
  });
  return rows;
}

Json RowsJson(const std::vector<Positioned>& rows) {
  Json out = Json::array();
  for (const Positioned& r : rows) {
    Json row = *r.row;
    row.erase("cursor");
    out.push_back(std::move(row));
  }
  return out;
}

int64_t Int(const Json& v) { return v.is_number() ? v.get<int64_t>() : 0; }

}  // namespace

std::vector<MemberQueriesPage> ParseMemberPages(std::vector<MemberAnswer> answers) {
  std::vector<MemberQueriesPage> pages;
  for (MemberAnswer& a : answers) {
    MemberQueriesPage p;
    p.member = std::move(a.member);
    p.self = a.self;
    p.ok = a.ok;
    p.error = std::move(a.error);
    if (p.ok) {
      p.page = Json::parse(a.response.body, nullptr, /*allow_exceptions=*/false);
      if (!p.page.is_object() || !p.page["in_flight"].is_array() ||
          !p.page["completed"].is_array()) {
        p.ok = false;
        p.error = "Coordinator member " + std::to_string(p.member.id) + " at " + p.member.uri +
                  " did not answer with a /queries?json page";
        p.page = Json();
      }
    }
    pages.push_back(std::move(p));
  }
  return pages;
}

Json MemberJson(const ClusterMember& member, bool self, bool ok, const std::string& error) {
  Json m;
  m["id"] = member.id;
  m["uri"] = member.uri;
  m["self"] = self;
  m["ok"] = ok;
  if (!ok) m["error"] = error;
  return m;
}

std::string MergeQueriesPages(const QueryListParams& params,
                              const std::vector<MemberQueriesPage>& pages) {
  const Json* first = nullptr;
  for (const MemberQueriesPage& p : pages) {
    if (p.ok && (first == nullptr || p.self)) first = &p.page;
  }
  Json out;
  out["generated_at"] = first != nullptr ? (*first)["generated_at"] : Json(nullptr);
  out["query_stmt_size"] = first != nullptr ? (*first)["query_stmt_size"] : Json(nullptr);
  out["limit"] = params.limit;
  out["scope"] = "cluster";

  // The summary and the counts: sums over the members that answered.
  Json summary = Json::object();
  int64_t in_flight_matched = 0, completed_matched = 0;
  bool partial = false;
  for (const MemberQueriesPage& p : pages) {
    if (!p.ok) continue;
    for (const auto& [name, value] : p.page["summary"].items()) {
      if (!value.is_number()) {
        if (!summary.contains(name)) summary[name] = nullptr;
        continue;
      }
      summary[name] = (summary.contains(name) ? Int(summary[name]) : 0) + Int(value);
    }
    in_flight_matched += Int(p.page["in_flight_matched"]);
    completed_matched += Int(p.page["completed_matched"]);
    partial = partial || (p.page["completed_partial"].is_boolean() &&
                          p.page["completed_partial"].get<bool>());
  }
  out["summary"] = std::move(summary);
  out["in_flight_matched"] = in_flight_matched;
  out["completed_matched"] = completed_matched;
  out["completed_partial"] = partial;

  // In flight: not paged, the first 'limit' of all.
  std::vector<Positioned> in_flight = Collect(params, pages, "in_flight");
  if (in_flight.size() > params.limit) in_flight.resize(params.limit);
  out["in_flight"] = RowsJson(in_flight);

  // Completed: no row past the earliest member that stopped early.
  std::optional<QueryListCursor> cut;
  for (const MemberQueriesPage& p : pages) {
    if (!p.ok || !p.page["next_cursor"].is_string()) continue;
    QueryListCursor c;
    if (!DecodeCursor(p.page["next_cursor"].get<std::string>(), &c)) continue;
    if (!cut || Before(params, c, *cut)) cut = c;
  }
  std::vector<Positioned> completed = Collect(params, pages, "completed");
  if (cut) {
    std::erase_if(completed, [&](const Positioned& r) { return Before(params, *cut, r.at); });
  }
  std::optional<QueryListCursor> next;
  if (completed.size() > params.limit) {
    completed.resize(params.limit);
    next = completed.back().at;
  } else if (cut) {
    next = cut;
  }
  out["completed"] = RowsJson(completed);
  out["next_cursor"] = next ? Json(EncodeCursor(*next)) : Json(nullptr);

  Json members = Json::array();
  for (const MemberQueriesPage& p : pages) members.push_back(MemberJson(p.member, p.self, p.ok, p.error));
  out["members"] = std::move(members);
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace debug_pages

namespace {

using Json = nlohmann::json;

}  // namespace

std::string RuntimeRowsToJson(const std::vector<RuntimeQueryRow>& rows) {
  Json out = Json::array();
  for (const RuntimeQueryRow& r : rows) {
    out.push_back(Json{{"query_id", r.query_id},         {"state", r.state},
                       {"user", r.user},                 {"source", r.source},
                       {"query", r.query ? *r.query : std::string()},
                       {"queued_time_ms", r.queued_time_ms},
                       {"created_ms", r.created_ms},     {"started_ms", r.started_ms},
                       {"last_heartbeat_ms", r.last_heartbeat_ms}, {"end_ms", r.end_ms},
                       {"error_type", r.error_type},     {"error_code", r.error_code},
                       {"error_message", r.error_message}, {"rows", r.rows},
                       {"bytes", r.bytes},               {"cpu_time_ms", r.cpu_time_ms},
                       {"vm_steps", r.vm_steps},         {"client_info", r.client_info},
                       {"client_tags", r.client_tags}});
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool RuntimeRowsFromJson(const std::string& json, std::vector<RuntimeQueryRow>* rows) {
  Json in = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!in.is_array()) return false;
  for (const Json& j : in) {
    if (!j.is_object() || !j.contains("query_id") || !j["query_id"].is_string()) return false;
    RuntimeQueryRow r;
    auto str = [&j](const char* name, std::string* out) {
      if (j.contains(name) && j[name].is_string()) *out = j[name].get<std::string>();
    };
    auto num = [&j](const char* name, int64_t* out) {
      if (j.contains(name) && j[name].is_number_integer()) *out = j[name].get<int64_t>();
    };
    str("query_id", &r.query_id);
    str("state", &r.state);
    str("user", &r.user);
    str("source", &r.source);
    std::string query;
    str("query", &query);
    r.query = std::make_shared<const std::string>(std::move(query));
    num("queued_time_ms", &r.queued_time_ms);
    num("created_ms", &r.created_ms);
    num("started_ms", &r.started_ms);
    num("last_heartbeat_ms", &r.last_heartbeat_ms);
    num("end_ms", &r.end_ms);
    str("error_type", &r.error_type);
    str("error_code", &r.error_code);
    str("error_message", &r.error_message);
    num("rows", &r.rows);
    num("bytes", &r.bytes);
    num("cpu_time_ms", &r.cpu_time_ms);
    num("vm_steps", &r.vm_steps);
    str("client_info", &r.client_info);
    str("client_tags", &r.client_tags);
    rows->push_back(std::move(r));
  }
  return true;
}

}  // namespace qr
