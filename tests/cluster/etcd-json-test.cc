#include "cluster/etcd-json.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/etcd-client.h"
#include "cluster/membership.h"
#include "http/base64.h"

namespace qr::etcd {
namespace {

using nlohmann::json;

std::string Decoded(const json& field) {
  std::string out;
  EXPECT_TRUE(Base64Decode(field.get<std::string>(), &out)) << field;
  return out;
}

TEST(EtcdJsonTest, PrefixEndIncrementsTheLastByte) {
  EXPECT_EQ(PrefixEnd("/coordinatord/a/members/"), "/coordinatord/a/members0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff", 1)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdJsonTest, RangeAndWatchCoverThePrefix) {
  json range = json::parse(RangePrefixRequest("/p/"));
  EXPECT_EQ(Decoded(range["key"]), "/p/");
  EXPECT_EQ(Decoded(range["range_end"]), "/p0");
  json watch = json::parse(WatchPrefixRequest("/p/", 42));
  EXPECT_EQ(Decoded(watch["create_request"]["key"]), "/p/");
  EXPECT_EQ(Decoded(watch["create_request"]["range_end"]), "/p0");
  EXPECT_EQ(watch["create_request"]["start_revision"], "42");
}

TEST(EtcdJsonTest, LeaseRequestsCarry64BitIdsAsStrings) {
  EXPECT_EQ(json::parse(LeaseGrantRequest(5))["TTL"], "5");
  // Past 2^53: a JSON number would lose digits in many parsers; the gateway takes strings.
  EXPECT_EQ(json::parse(LeaseIdRequest(7587869263592316417))["ID"], "7587869263592316417");
}

TEST(EtcdJsonTest, PutIfAbsentComparesCreateRevisionZero) {
  json txn = json::parse(PutIfAbsentRequest("/k/00001", "{\"id\":1}", 99));
  ASSERT_EQ(txn["compare"].size(), 1u);
  const json& cmp = txn["compare"][0];
  EXPECT_EQ(Decoded(cmp["key"]), "/k/00001");
  EXPECT_EQ(cmp["target"], "CREATE");
  EXPECT_EQ(cmp["result"], "EQUAL");
  EXPECT_EQ(cmp["create_revision"], "0");
  ASSERT_EQ(txn["success"].size(), 1u);
  const json& put = txn["success"][0]["request_put"];
  EXPECT_EQ(Decoded(put["key"]), "/k/00001");
  EXPECT_EQ(Decoded(put["value"]), "{\"id\":1}");
  EXPECT_EQ(put["lease"], "99");
  EXPECT_TRUE(txn["failure"].empty());
}

TEST(EtcdJsonTest, PutIfAbsentCanAlsoPutALeaselessKeyOnSuccess) {
  json txn = json::parse(PutIfAbsentRequest("/k/00007", "{\"id\":7}", 99, "/c", "7"));
  ASSERT_EQ(txn["compare"].size(), 1u);
  EXPECT_EQ(Decoded(txn["compare"][0]["key"]), "/k/00007");
  ASSERT_EQ(txn["success"].size(), 2u);
  EXPECT_EQ(Decoded(txn["success"][0]["request_put"]["key"]), "/k/00007");
  EXPECT_EQ(txn["success"][0]["request_put"]["lease"], "99");
  const json& cursor = txn["success"][1]["request_put"];
  EXPECT_EQ(Decoded(cursor["key"]), "/c");
  EXPECT_EQ(Decoded(cursor["value"]), "7");
  EXPECT_FALSE(cursor.contains("lease"));
  EXPECT_TRUE(txn["failure"].empty());
}

TEST(MemberIdCandidatesTest, EarlierIdFirstThenAfterTheCursorWrappingAndSkippingTaken) {
  // A fresh cluster (no cursor): the smallest ids first.
  EXPECT_EQ(MemberIdCandidates(0, 0, 4, {}), (std::vector<uint32_t>{1, 2, 3, 4}));
  // A restarted process (no earlier id) after claims up to 3: a fresh id, the freed 1 last.
  EXPECT_EQ(MemberIdCandidates(0, 3, 5, {2, 3}), (std::vector<uint32_t>{4, 5, 1}));
  // A member that lost its lease tries its earlier id first, once.
  EXPECT_EQ(MemberIdCandidates(2, 3, 4, {3}), (std::vector<uint32_t>{2, 4, 1}));
  // The cursor at the last id wraps to 1; every id taken leaves only the earlier one.
  EXPECT_EQ(MemberIdCandidates(0, 4, 4, {}), (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(MemberIdCandidates(1, 2, 2, {1, 2}), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(MemberIdCandidates(0, 1, 2, {1, 2}).empty());
}

// Responses as etcd 3.4.23's gateway writes them.
TEST(EtcdJsonTest, ParsesLeaseGrantAndKeepAlive) {
  int64_t id = 0, ttl = 0;
  ASSERT_TRUE(ParseLeaseGrant(R"({"header":{"revision":"1"},"ID":"2324035629245661190",)"
                              R"("TTL":"5"})",
                              &id, &ttl)
                  .ok());
  EXPECT_EQ(id, 2324035629245661190);
  EXPECT_EQ(ttl, 5);
  ASSERT_TRUE(ParseKeepAlive("{\"result\":{\"ID\":\"12\",\"TTL\":\"4\"}}\n", &ttl).ok());
  EXPECT_EQ(ttl, 4);
  // An expired lease: no TTL field at all (proto3 omits zeros).
  ASSERT_TRUE(ParseKeepAlive(R"({"result":{"header":{},"ID":"12345"}})", &ttl).ok());
  EXPECT_EQ(ttl, 0);
  EXPECT_FALSE(ParseLeaseGrant(R"({"TTL":"5"})", &id, &ttl).ok());  // no ID
  EXPECT_FALSE(ParseKeepAlive(R"({"ID":"1"})", &ttl).ok());         // no result
}

TEST(EtcdJsonTest, ParsesTxnOutcome) {
  bool ok = false;
  ASSERT_TRUE(ParseTxnSucceeded(R"({"header":{},"succeeded":true,"responses":[]})", &ok).ok());
  EXPECT_TRUE(ok);
  ASSERT_TRUE(ParseTxnSucceeded(R"({"header":{"revision":"2"}})", &ok).ok());
  EXPECT_FALSE(ok);
  EXPECT_FALSE(ParseTxnSucceeded(R"({"succeeded":"yes"})", &ok).ok());
}

TEST(EtcdJsonTest, ParsesRangeWithBase64KeysAndValues) {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
  ASSERT_TRUE(ParseRange(R"({"header":{"revision":"7"},"kvs":[{"key":"YQ==","create_revision":"2",)"
                         R"("mod_revision":"3","version":"1","value":"eA==","lease":"77"}],"count":"1"})",
                         &kvs, &revision)
                  .ok());
  EXPECT_EQ(revision, 7);
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_EQ(kvs[0].key, "a");
  EXPECT_EQ(kvs[0].value, "x");
  EXPECT_EQ(kvs[0].create_revision, 2);
  EXPECT_EQ(kvs[0].mod_revision, 3);
  EXPECT_EQ(kvs[0].lease, 77);
  ASSERT_TRUE(ParseRange(R"({"header":{"revision":"9"}})", &kvs, &revision).ok());
  EXPECT_TRUE(kvs.empty());
  EXPECT_EQ(revision, 9);
  EXPECT_FALSE(ParseRange(R"({"kvs":[{"key":"not base64!"}]})", &kvs, &revision).ok());
}

TEST(EtcdJsonTest, ParsesWatchEvents) {
  std::vector<WatchEvent> events;
  int64_t revision = 0;
  ASSERT_TRUE(ParseWatchMessage(R"({"result":{"header":{"revision":"2"},"created":true}})",
                                &events, &revision)
                  .ok());
  EXPECT_TRUE(events.empty());
  ASSERT_TRUE(ParseWatchMessage(
                  R"({"result":{"header":{"revision":"5"},"events":[{"kv":{"key":"YQ==",)"
                  R"("value":"eA==","create_revision":"4"}},{"type":"DELETE","kv":{"key":"Yg==",)"
                  R"("mod_revision":"5"}}]}})",
                  &events, &revision)
                  .ok());
  EXPECT_EQ(revision, 5);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].is_delete);
  EXPECT_EQ(events[0].kv.key, "a");
  EXPECT_EQ(events[0].kv.value, "x");
  EXPECT_TRUE(events[1].is_delete);
  EXPECT_EQ(events[1].kv.key, "b");
  Status canceled = ParseWatchMessage(
      R"({"result":{"canceled":true,"cancel_reason":"mvcc: required revision has been compacted"}})",
      &events, &revision);
  EXPECT_FALSE(canceled.ok());
  EXPECT_NE(canceled.message().find("compacted"), std::string::npos) << canceled.message();
  // How the gateway ends a watch whose member lost its leader (Grpc-Metadata-Hasleader).
  Status no_leader = ParseWatchMessage(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader",)"
      R"("http_status":"Service Unavailable"}})",
      &events, &revision);
  EXPECT_EQ(no_leader.code(), StatusCode::kUnavailable);
  EXPECT_NE(no_leader.message().find("no leader"), std::string::npos) << no_leader.message();
}

TEST(EtcdJsonTest, GatewayErrorsBecomeUnavailable) {
  int64_t id = 0, ttl = 0;
  Status s = ParseLeaseGrant(R"({"error":"etcdserver: too many requests","code":14})", &id, &ttl);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("too many requests"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseLeaseGrant("<html>", &id, &ttl).ok());
}

TEST(EtcdEndpointsTest, ParsesHostPortLists) {
  std::vector<std::string> endpoints;
  ASSERT_TRUE(ParseEtcdEndpoints("127.0.0.1:2379,etcd-2:2379,[::1]:2380", &endpoints).ok());
  EXPECT_EQ(endpoints, (std::vector<std::string>{"127.0.0.1:2379", "etcd-2:2379", "[::1]:2380"}));
  ASSERT_TRUE(ParseEtcdEndpoints("https://etcd-1:2379,http://[::1]:2379", &endpoints).ok());
  EXPECT_EQ(endpoints, (std::vector<std::string>{"https://etcd-1:2379", "http://[::1]:2379"}));
  EXPECT_TRUE(IsTlsEtcdEndpoint(endpoints[0]));
  EXPECT_FALSE(IsTlsEtcdEndpoint(endpoints[1]));
  for (const char* bad : {"", "localhost", ":2379", "a:0", "a:65536", "a:x", "::1:2379",
                          "a:1,,b:2", "[::1:2379", "ftp://a:1", "https://a:1/", "https://",
                          "https://a:1/v3"}) {
    EXPECT_FALSE(ParseEtcdEndpoints(bad, &endpoints).ok()) << bad;
  }
}

TEST(MemberValueTest, RoundTrips) {
  ClusterMember m{17, "http://10.0.0.5:8080", "0.2.0", 1764150000123};
  ClusterMember back;
  ASSERT_TRUE(DecodeMember(EncodeMember(m), &back));
  EXPECT_EQ(back.id, 17u);
  EXPECT_EQ(back.uri, m.uri);
  EXPECT_EQ(back.version, m.version);
  EXPECT_EQ(back.start_time_ms, m.start_time_ms);
  EXPECT_FALSE(DecodeMember("{\"id\":\"17\"}", &back));
  EXPECT_FALSE(DecodeMember("not json", &back));
}

}  // namespace
}  // namespace qr::etcd
