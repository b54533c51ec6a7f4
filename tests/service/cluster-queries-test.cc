// The cluster view's merge of the members' /queries?json pages (issue 19 item 3): order,
// limit, the cursor across members, a member that stops early, members that did not answer.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/cluster-view.h"
#include "service/cluster-queries.h"
#include "util/unique-id.h"

namespace qr::debug_pages {
namespace {

using Json = nlohmann::ordered_json;

struct Row {
  int64_t key;
  UniqueId id;
};

bool Before(const QueryListParams& p, const Row& a, const Row& b) {
  if (a.key != b.key) return p.ascending ? a.key < b.key : a.key > b.key;
  return p.ascending ? a.id < b.id : b.id < a.id;
}

/// What one member answers for 'params': its rows after the cursor in order, at most
/// 'limit', with next_cursor when more remain; 'scan' (>0, < limit) stops after that many
/// records read past the cursor as a text search at its bound does: fewer rows than 'limit'
/// though more remain (partial, the cursor at the last record read).
Json MemberPage(std::vector<Row> rows, const QueryListParams& params, size_t scan = 0) {
  std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) { return Before(params, a, b); });
  if (params.cursor) {
    const Row c{params.cursor->key, params.cursor->id};
    std::erase_if(rows, [&](const Row& r) { return !Before(params, c, r); });
  }
  Json page;
  page["generated_at"] = "2026-11-26T00:00:00.000Z";
  page["query_stmt_size"] = 250;
  page["limit"] = params.limit;
  page["scope"] = "member";
  page["summary"] = Json{{"in_flight", 1}, {"completed_in_history", nullptr}};
  page["in_flight_matched"] = 1;
  page["completed_matched"] = rows.size();
  bool partial = false;
  size_t take = std::min(rows.size(), params.limit);
  std::optional<Row> next;
  if (scan > 0 && scan < rows.size() && scan < params.limit) {
    take = scan;
    next = rows[scan - 1];
    partial = true;
  } else if (rows.size() > take) {
    next = rows[take - 1];
  }
  page["completed_partial"] = partial;
  page["in_flight"] = Json::array();
  page["completed"] = Json::array();
  for (size_t i = 0; i < take; ++i) {
    page["completed"].push_back(Json{{"query_id", PrintId(rows[i].id)},
                                     {"cursor", EncodeCursor({rows[i].key, rows[i].id})}});
  }
  page["next_cursor"] = next ? Json(EncodeCursor({next->key, next->id})) : Json(nullptr);
  return page;
}

MemberQueriesPage Answered(uint32_t id, Json page) {
  MemberQueriesPage p;
  p.member.id = id;
  p.member.uri = "http://127.0.0.1:" + std::to_string(9000 + id);
  p.ok = true;
  p.page = std::move(page);
  return p;
}

/// Three members' rows; keys collide across members (ties broken by id).
std::map<uint32_t, std::vector<Row>> ClusterRows() {
  std::map<uint32_t, std::vector<Row>> rows;
  for (uint32_t m = 1; m <= 3; ++m) {
    for (int i = 0; i < 7 * static_cast<int>(m); ++i) {
      rows[m].push_back(Row{(i * 3 + m) % 11, UniqueId{uint64_t{m} * 1000 + i, uint64_t{m} << 48}});
    }
  }
  return rows;
}

/// Walks every page of the merged list; returns the query ids in the order shown.
std::vector<std::string> Walk(QueryListParams params, size_t scan_member2 = 0) {
  const auto rows = ClusterRows();
  std::vector<std::string> seen;
  for (int pages = 0; pages < 200; ++pages) {
    std::vector<MemberQueriesPage> parts;
    for (const auto& [m, r] : rows) {
      parts.push_back(Answered(m, MemberPage(r, params, m == 2 ? scan_member2 : 0)));
    }
    Json merged = Json::parse(MergeQueriesPages(params, parts));
    EXPECT_LE(merged["completed"].size(), params.limit);
    for (const Json& row : merged["completed"]) {
      EXPECT_FALSE(row.contains("cursor"));
      seen.push_back(row["query_id"]);
    }
    if (merged["next_cursor"].is_null()) return seen;
    QueryListCursor c;
    EXPECT_TRUE(DecodeCursor(merged["next_cursor"].get<std::string>(), &c));
    params.cursor = c;
  }
  ADD_FAILURE() << "paging did not end";
  return seen;
}

std::vector<std::string> Expected(const QueryListParams& params) {
  std::vector<Row> all;
  for (const auto& [m, r] : ClusterRows()) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end(), [&](const Row& a, const Row& b) { return Before(params, a, b); });
  std::vector<std::string> ids;
  for (const Row& r : all) ids.push_back(PrintId(r.id));
  return ids;
}

TEST(ClusterQueriesTest, PagingWalksEveryMembersRowsOnceInOrder) {
  for (bool ascending : {false, true}) {
    for (size_t limit : {1, 2, 5, 7, 100}) {
      QueryListParams params;
      params.ascending = ascending;
      params.limit = limit;
      EXPECT_EQ(Walk(params), Expected(params)) << "limit " << limit << " asc " << ascending;
    }
  }
}

TEST(ClusterQueriesTest, AMemberThatStopsEarlyHoldsTheOthersBack) {
  // Member 2's text search stops after 3 rows each time: rows of the others past its position
  // wait for the next page instead of being skipped over member 2's unread ones.
  for (size_t limit : {4, 10}) {
    QueryListParams params;
    params.limit = limit;
    EXPECT_EQ(Walk(params, /*scan_member2=*/3), Expected(params)) << "limit " << limit;
  }
}

TEST(ClusterQueriesTest, SumsCountsAndMarksMembersThatDidNotAnswer) {
  QueryListParams params;
  params.limit = 5;
  const auto rows = ClusterRows();
  std::vector<MemberQueriesPage> parts;
  parts.push_back(Answered(1, MemberPage(rows.at(1), params)));
  parts.back().self = true;
  MemberQueriesPage silent;
  silent.member = ClusterMember{2, "http://127.0.0.1:9002", "v", 0};
  silent.error = "did not answer within 2000 ms";
  parts.push_back(silent);
  parts.push_back(Answered(3, MemberPage(rows.at(3), params)));
  Json merged = Json::parse(MergeQueriesPages(params, parts));
  EXPECT_EQ(merged["scope"], "cluster");
  EXPECT_EQ(merged["completed_matched"], rows.at(1).size() + rows.at(3).size());
  EXPECT_EQ(merged["in_flight_matched"], 2);
  EXPECT_EQ(merged["summary"]["in_flight"], 2);
  EXPECT_TRUE(merged["summary"]["completed_in_history"].is_null());
  ASSERT_EQ(merged["members"].size(), 3u);
  EXPECT_EQ(merged["members"][0]["self"], true);
  EXPECT_EQ(merged["members"][0]["ok"], true);
  EXPECT_FALSE(merged["members"][0].contains("error"));
  EXPECT_EQ(merged["members"][1]["id"], 2);
  EXPECT_EQ(merged["members"][1]["ok"], false);
  EXPECT_EQ(merged["members"][1]["error"], "did not answer within 2000 ms");
  std::set<std::string> ids;
  for (const Json& row : merged["completed"]) ids.insert(row["query_id"].get<std::string>());
  EXPECT_EQ(ids.size(), 5u);
  for (const std::string& id : ids) EXPECT_EQ(id.find("00000000000007d"), std::string::npos);
}

TEST(ClusterQueriesTest, AnAnswerThatIsNotAPageIsAFailure) {
  std::vector<MemberAnswer> answers(2);
  answers[0].member.id = 1;
  answers[0].ok = true;
  answers[0].response.body = "{\"in_flight\":[],\"completed\":[]}";
  answers[1].member.id = 2;
  answers[1].ok = true;
  answers[1].response.body = "<html>not json";
  std::vector<MemberQueriesPage> pages = ParseMemberPages(std::move(answers));
  EXPECT_TRUE(pages[0].ok);
  EXPECT_FALSE(pages[1].ok);
  EXPECT_NE(pages[1].error.find("did not answer with a /queries?json page"), std::string::npos);
}

TEST(ClusterQueriesTest, RuntimeRowsRoundTrip) {
  RuntimeQueryRow r;
  r.query_id = "0000000000000001:0001000000000000";
  r.state = "FAILED";
  r.user = "bob";
  r.query = std::make_shared<const std::string>("SELECT 'ü'");
  r.created_ms = 1790000000000;
  r.end_ms = -1;
  r.error_code = "USER_CANCELED";
  r.rows = 7;
  r.client_tags = "[\"a\"]";
  std::vector<RuntimeQueryRow> back;
  ASSERT_TRUE(RuntimeRowsFromJson(RuntimeRowsToJson({r, r}), &back));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].query_id, r.query_id);
  EXPECT_EQ(back[1].user, "bob");
  ASSERT_NE(back[1].query, nullptr);
  EXPECT_EQ(*back[1].query, *r.query);
  EXPECT_EQ(back[1].created_ms, r.created_ms);
  EXPECT_EQ(back[1].end_ms, -1);
  EXPECT_EQ(back[1].error_code, "USER_CANCELED");
  EXPECT_EQ(back[1].rows, 7);
  EXPECT_EQ(back[1].client_tags, r.client_tags);
  EXPECT_FALSE(RuntimeRowsFromJson("{}", &back));
  EXPECT_FALSE(RuntimeRowsFromJson("[{\"state\":\"x\"}]", &back));
}

TEST(ClusterQueriesTest, OnlyAMarkedAndSignedRequestIsLocalOnly) {
  HttpRequest req;
  EXPECT_FALSE(IsLocalOnlyRequest(req, false));
  req.headers.set("X-Qr-Forwarded-By", "2");
  // Without authentication the marker only narrows what the client sees.
  EXPECT_TRUE(IsLocalOnlyRequest(req, false));
  // With authentication only with a (verified) principal; a client's marker alone is ignored.
  EXPECT_FALSE(IsLocalOnlyRequest(req, true));
  req.headers.set("X-Qr-Forwarded-Principal", "v1;1;00;Ym9i");
  EXPECT_TRUE(IsLocalOnlyRequest(req, true));
}

}  // namespace
}  // namespace qr::debug_pages
