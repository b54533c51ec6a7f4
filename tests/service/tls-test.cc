// coordinatord over HTTPS: a certificate generated at test time, a query run end to end with
// Beast's TLS client, password authentication over TLS, and start-up errors.

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "testutil/test-cert.h"
#include "service-test-util.h"
#include "testutil/log-capture.h"
#include "tls-test-client.h"
#include "http/password-file.h"

namespace qr::testing {
namespace {

using nlohmann::json;

class TlsTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() {
    ServiceTest::SetUpTestSuite();
    std::string error;
    ASSERT_TRUE(WriteSelfSignedCert(data_dir_, "server", &cert_, &error)) << error;
    ASSERT_TRUE(WriteSelfSignedCert(data_dir_, "other", &other_, &error)) << error;
  }

  static CoordinatorServer::Options TlsOptions() {
    CoordinatorServer::Options o = DefaultOptions();
    o.tls_cert_file = cert_.cert_file;
    o.tls_key_file = cert_.key_file;
    return o;
  }

  static Status StartError(CoordinatorServer::Options o) { return CoordinatorServer(o).Start(); }

  static inline TestCert cert_, other_;
};

/// POSTs 'sql' and follows nextUri until the end; checks every URI is https. Returns the rows.
json RunOverHttps(TlsTestClient& client, const std::string& sql, const Headers& headers,
                  std::string* final_state) {
  TestResponse r = client.Send("POST", "/v1/statement", headers, sql);
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  json rows = json::array();
  for (int i = 0; r.status == 200 && i < 10000; ++i) {
    json answer = r.Json();
    EXPECT_EQ(answer["infoUri"].get<std::string>().rfind("https://127.0.0.1:", 0), 0u);
    if (answer.contains("data")) {
      for (const json& row : answer["data"]) rows.push_back(row);
    }
    *final_state = answer["stats"]["state"];
    if (!answer.contains("nextUri")) break;
    const std::string next = answer["nextUri"];
    EXPECT_EQ(next.rfind("https://127.0.0.1:", 0), 0u) << next;
    r = client.Send("GET", TargetOf(next), headers);
  }
  return rows;
}

TEST_F(TlsTest, RunsAQueryOverHttps) {
  auto server = StartServer(TlsOptions());
  ASSERT_NE(server, nullptr);
  TlsTestClient client(server->port(), cert_.cert_file);
  std::string state;
  json rows = RunOverHttps(client, "SELECT r_name FROM region ORDER BY 1",
                           {{"X-Trino-User", "alice"}}, &state);
  EXPECT_EQ(state, "FINISHED");
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRegionRows));
  EXPECT_EQ(rows[0][0], "AFRICA");
  TestResponse list = client.Send("GET", "/v1/query");
  EXPECT_EQ(list.status, 200);
  EXPECT_EQ(list.Json()[0]["self"].get<std::string>().rfind("https://", 0), 0u);
}

TEST_F(TlsTest, PlainHttpGetsNoAnswerFromAnHttpsPort) {
  auto server = StartServer(TlsOptions());
  ASSERT_NE(server, nullptr);
  TestHttpClient plain(server->port(), std::chrono::seconds(30));
  TestResponse r = plain.Get("/v1/info");
  EXPECT_EQ(r.status, 0) << r.body;
  // The server stays healthy for TLS clients.
  TlsTestClient client(server->port(), cert_.cert_file);
  EXPECT_EQ(client.Send("GET", "/v1/info").status, 200);
}

TEST_F(TlsTest, ClientClosingWithoutCloseNotifyLogsNoWarning) {
  auto server = StartServer(TlsOptions());
  ASSERT_NE(server, nullptr);
  LogCapture log;
  for (int i = 0; i < 3; ++i) {
    // The client's destructor drops the TCP connection without a TLS close_notify.
    TlsTestClient client(server->port(), cert_.cert_file);
    ASSERT_EQ(client.Send("GET", "/v1/info").status, 200) << client.last_error();
  }
  ASSERT_TRUE(WaitFor([&] { return server->webserver()->connections_open() == 0; },
                        std::chrono::seconds(60)));
  EXPECT_TRUE(log.Matching("HTTP read from").empty()) << log.Matching("HTTP read from")[0];
}

TEST_F(TlsTest, PasswordAuthenticationOverTls) {
  const std::string file = data_dir_ + "/tls.passwd";
  std::string line;
  ASSERT_TRUE(MakePasswordEntryLine("alice", "alice-pw", kMinPasswordIterations, &line).ok());
  std::ofstream(file) << line << "\n";
  CoordinatorServer::Options o = TlsOptions();
  o.auth_password_file = file;  // No allow_insecure_auth needed with TLS.
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  TlsTestClient client(server->port(), cert_.cert_file);
  TestResponse denied = client.Send("GET", "/v1/query");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.Header("WWW-Authenticate"), "Basic realm=\"coordinatord\"");
  std::string state;
  json rows = RunOverHttps(client, "SELECT 1",
                           {{"Authorization", "Basic " + Base64Encode("alice:alice-pw")}}, &state);
  EXPECT_EQ(state, "FINISHED");
  EXPECT_EQ(rows, json::parse("[[1]]"));
  EXPECT_EQ(server->authenticator()->verifications(), 1u);
}

TEST_F(TlsTest, BadTlsFilesStopTheStart) {
  CoordinatorServer::Options o = TlsOptions();
  o.tls_key_file = "";
  EXPECT_EQ(StartError(o).message(), "TLS needs both --tls_cert_file and --tls_key_file");
  o = TlsOptions();
  o.tls_cert_file = data_dir_ + "/missing.crt";
  EXPECT_EQ(StartError(o).message(), "cannot read the TLS certificate file '" + data_dir_ +
                                         "/missing.crt': No such file or directory");
  o = TlsOptions();
  o.tls_cert_file = cert_.key_file;
  EXPECT_NE(StartError(o).message().find("bad TLS certificate file"), std::string::npos);
  o = TlsOptions();
  o.tls_key_file = other_.key_file;
  EXPECT_NE(StartError(o).message().find("does not match the certificate"), std::string::npos);
}

}  // namespace
}  // namespace qr::testing
