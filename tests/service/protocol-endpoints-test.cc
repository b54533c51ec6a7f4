// Integration tests of the Trino client protocol (docs/protocol.md) through HTTP against an
// in-process CoordinatorServer: column types and values, and the informational endpoints.

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "service-test-util.h"
#include "service/version.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class ProtocolEndpointsTest : public DefaultServerTest {};

// ---------------------------------------------------------------------------------------------
// Types

TEST_F(ProtocolEndpointsTest, TypesAndValuesFollowTheMapping) {
  StatementOptions o;
  o.keep_answers = true;
  StatementResult r = RunStatement(
      port_,
      "SELECT 42 AS i, 2.0 AS d, 'h\xc3\xa9llo \"q\"' AS s, x'00ff10' AS b, NULL AS n, "
      "9e999 AS inf, CAST(3 AS REAL) AS r, -1.5e-7 AS e",
      o);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.columns.size(), 8u);
  const json bigint = {{"rawType", "bigint"}, {"arguments", json::array()}};
  const json dbl = {{"rawType", "double"}, {"arguments", json::array()}};
  const json varchar = {
      {"rawType", "varchar"},
      {"arguments", json::array({{{"kind", "LONG"}, {"value", 2147483647}}})}};
  const json varbinary = {{"rawType", "varbinary"}, {"arguments", json::array()}};
  const json unknown = {{"rawType", "unknown"}, {"arguments", json::array()}};
  const std::vector<std::tuple<std::string, std::string, json>> expected = {
      {"i", "bigint", bigint},     {"d", "double", dbl},       {"s", "varchar", varchar},
      {"b", "varbinary", varbinary}, {"n", "unknown", unknown}, {"inf", "double", dbl},
      {"r", "double", dbl},        {"e", "double", dbl}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r.columns[i]["name"], std::get<0>(expected[i]));
    EXPECT_EQ(r.columns[i]["type"], std::get<1>(expected[i])) << i;
    EXPECT_EQ(r.columns[i]["typeSignature"], std::get<2>(expected[i])) << i;
  }
  ASSERT_EQ(r.rows.size(), 1u);
  const json& row = r.rows[0];
  EXPECT_TRUE(row[0].is_number_integer());
  EXPECT_EQ(row[0], 42);
  EXPECT_TRUE(row[1].is_number_float()) << "a double must be written with '.' or an exponent";
  EXPECT_EQ(row[1].get<double>(), 2.0);
  EXPECT_EQ(row[2], "h\xc3\xa9llo \"q\"");
  EXPECT_EQ(row[3], "AP8Q");  // base64 of 00 ff 10
  EXPECT_TRUE(row[4].is_null());
  EXPECT_EQ(row[5], "Infinity");
  EXPECT_TRUE(row[6].is_number_float());
  EXPECT_EQ(row[6].get<double>(), 3.0);
  EXPECT_TRUE(row[7].is_number_float());
  EXPECT_DOUBLE_EQ(row[7].get<double>(), -1.5e-7);
}

TEST_F(ProtocolEndpointsTest, TableColumnsTakeTheirDeclaredTypes) {
  StatementResult r = RunStatement(
      port_, "SELECT n_nationkey, n_name, c_acctbal FROM nation JOIN customer "
             "ON c_nationkey = n_nationkey ORDER BY c_custkey LIMIT 3");
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.columns.size(), 3u);
  EXPECT_EQ(r.columns[0]["type"], "bigint");
  EXPECT_EQ(r.columns[1]["type"], "varchar(25)");
  EXPECT_EQ(r.columns[2]["type"], "double");
  ASSERT_EQ(r.rows.size(), 3u);
  for (const json& row : r.rows) {
    EXPECT_TRUE(row[0].is_number_integer());
    EXPECT_TRUE(row[1].is_string());
    EXPECT_TRUE(row[2].is_number_float());
  }
}

TEST_F(ProtocolEndpointsTest, SelectOneAnswersColumnCol0) {
  StatementResult r = RunStatement(port_, "SELECT 1");
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.columns.size(), 1u);
  EXPECT_EQ(r.columns[0]["name"], "_col0");
  EXPECT_EQ(r.columns[0]["type"], "bigint");
  EXPECT_EQ(r.rows, std::vector<json>{json::array({1})});
}

TEST_F(ProtocolEndpointsTest, SelectVersionAnswersAVersionString) {
  StatementResult r = RunStatement(port_, "SELECT version()");
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_TRUE(r.rows[0][0].is_string());
  EXPECT_FALSE(r.rows[0][0].get<std::string>().empty());
  EXPECT_EQ(r.columns[0]["type"], "varchar");
}

// ---------------------------------------------------------------------------------------------
// Other endpoints

TEST_F(ProtocolEndpointsTest, InfoDescribesTheCoordinator) {
  TestHttpClient http(port_);
  TestResponse r = http.Get("/v1/info");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type").rfind("application/json", 0), 0u);
  json j = r.Json();
  ASSERT_TRUE(j.is_object()) << r.body;
  // The version --version prints: "0.2.0 (git 1a2b3c4)", the revision CMake found.
  ASSERT_TRUE(j["nodeVersion"]["version"].is_string());
  const std::string version = j["nodeVersion"]["version"];
  EXPECT_EQ(version, QR_FULL_VERSION);
  EXPECT_EQ(version.rfind(QR_TEST_PROJECT_VERSION " (git ", 0), 0u) << version;
  EXPECT_NE(version.find(std::string("(git ") + QR_TEST_GIT_REVISION + ")"), std::string::npos)
      << version;
  EXPECT_TRUE(j["environment"].is_string());
  EXPECT_EQ(j["coordinator"], true);
  EXPECT_EQ(j["starting"], false);
  EXPECT_TRUE(j["uptime"].is_string());

  r = http.Get("/v1/info/state");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type").rfind("application/json", 0), 0u);
  EXPECT_EQ(r.Json(), "ACTIVE");
}

TEST_F(ProtocolEndpointsTest, QueryListAndQueryInfo) {
  StatementOptions o;
  o.user = "lister";
  o.post_headers = {{"X-Trino-Source", "protocol-test"}};
  StatementResult done = RunStatement(port_, "SELECT 'listed'", o);
  ASSERT_TRUE(done.failure.empty()) << done.failure;
  StatementClient running(port_);
  running.Submit(kEndlessQuery);

  TestHttpClient http(port_);
  TestResponse list = http.Get("/v1/query");
  ASSERT_EQ(list.status, 200);
  json arr = list.Json();
  ASSERT_TRUE(arr.is_array()) << list.body;
  bool saw_done = false, saw_running = false;
  for (const json& q : arr) {
    ASSERT_TRUE(q["queryId"].is_string());
    ASSERT_TRUE(q["state"].is_string());
    ASSERT_TRUE(q["query"].is_string());
    ASSERT_TRUE(q["session"].is_object());
    if (q["queryId"] == done.id) {
      saw_done = true;
      EXPECT_EQ(q["state"], "FINISHED");
      EXPECT_EQ(q["query"], "SELECT 'listed'");
      EXPECT_EQ(q["session"]["user"], "lister");
      EXPECT_EQ(q["session"]["source"], "protocol-test");
    }
    if (q["queryId"] == running.result().id) {
      saw_running = true;
      EXPECT_NE(q["state"], "FINISHED");
    }
  }
  EXPECT_TRUE(saw_done);
  EXPECT_TRUE(saw_running);

  TestResponse one = http.Get("/v1/query/" + done.id);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.Json()["queryId"], done.id);
  EXPECT_EQ(one.Json()["state"], "FINISHED");

  EXPECT_EQ(http.Get("/v1/query/0123456789abcdef:0123456700000000").status, 410);
  EXPECT_EQ(http.Get("/v1/query/nonsense").status, 400);
  EXPECT_EQ(running.Cancel().status, 204);
}

}  // namespace
}  // namespace qr::testing
