// coordinatord over HTTPS: a certificate generated at test time, a query run end to end with
// Beast's TLS client, password authentication over TLS, and start-up errors.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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

// A renewal in place, as certbot or an operator does it: the files change, SIGHUP (here the
// method it calls) makes new connections get the new certificate, an open connection keeps
// its own, and a reload that fails leaves the old certificate in use.
TEST_F(TlsTest, ReloadServesTheNewCertificateToNewConnections) {
  const std::string cert = data_dir_ + "/reload.crt";
  const std::string key = data_dir_ + "/reload.key";
  const auto overwrite = std::filesystem::copy_options::overwrite_existing;
  std::filesystem::copy_file(cert_.cert_file, cert, overwrite);
  std::filesystem::copy_file(cert_.key_file, key, overwrite);
  CoordinatorServer::Options o = DefaultOptions();
  o.tls_cert_file = cert;
  o.tls_key_file = key;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  TlsTestClient before(server->port(), cert_.cert_file);
  ASSERT_EQ(before.Send("GET", "/v1/info").status, 200) << before.last_error();
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  CoordinatorServer::TlsReloadStats stats = server->tls_reload_stats();
  EXPECT_EQ(stats.reloads, 0u);
  EXPECT_EQ(stats.failures, 0u);
  // WriteSelfSignedCert() makes certificates valid for a day from when the suite started.
  EXPECT_GT(stats.not_after_unix_seconds, now_s + 86400 - 3600);
  EXPECT_LE(stats.not_after_unix_seconds, now_s + 86400);

  // Half a renewal: the new certificate, the old key.
  std::filesystem::copy_file(other_.cert_file, cert, overwrite);
  Status failed = server->ReloadTlsCertificate();
  EXPECT_NE(failed.message().find("does not match the certificate"), std::string::npos)
      << failed.message();
  EXPECT_EQ(server->tls_reload_stats().failures, 1u);
  TlsTestClient still_old(server->port(), cert_.cert_file);
  EXPECT_EQ(still_old.Send("GET", "/v1/info").status, 200) << still_old.last_error();

  // The whole renewal.
  std::filesystem::copy_file(other_.key_file, key, overwrite);
  Status reloaded = server->ReloadTlsCertificate();
  ASSERT_TRUE(reloaded.ok()) << reloaded.message();
  TlsTestClient trusting_old(server->port(), cert_.cert_file);
  EXPECT_EQ(trusting_old.Send("GET", "/v1/info").status, 0);
  EXPECT_NE(trusting_old.last_error().find("certificate verify failed"), std::string::npos)
      << trusting_old.last_error();
  TlsTestClient trusting_new(server->port(), other_.cert_file);
  EXPECT_EQ(trusting_new.Send("GET", "/v1/info").status, 200) << trusting_new.last_error();
  // The connection made before the reload still serves requests with the old certificate (a
  // new connection would fail to verify, as 'trusting_old' did).
  EXPECT_EQ(before.Send("GET", "/v1/info").status, 200) << before.last_error();

  stats = server->tls_reload_stats();
  EXPECT_EQ(stats.reloads, 1u);
  EXPECT_EQ(stats.failures, 1u);
  const std::string metrics = trusting_new.Send("GET", "/metrics").body;
  EXPECT_NE(metrics.find("qr_tls_certificate_reloads_total{result=\"ok\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("qr_tls_certificate_reloads_total{result=\"failed\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("qr_tls_certificate_expiry_timestamp_seconds " +
                         std::to_string(stats.not_after_unix_seconds) + "\n"),
            std::string::npos);
}

// Reloads while clients keep connecting (under ThreadSanitizer in CI): every handshake gets
// one of the two certificates, whole, and nothing outlives its context.
TEST_F(TlsTest, ReloadsWhileClientsConnect) {
  const std::string cert = data_dir_ + "/busy.crt";
  const std::string key = data_dir_ + "/busy.key";
  const std::string both = data_dir_ + "/both.crt";
  const auto overwrite = std::filesystem::copy_options::overwrite_existing;
  std::filesystem::copy_file(cert_.cert_file, cert, overwrite);
  std::filesystem::copy_file(cert_.key_file, key, overwrite);
  {
    std::ofstream out(both);
    out << std::ifstream(cert_.cert_file).rdbuf() << std::ifstream(other_.cert_file).rdbuf();
  }
  CoordinatorServer::Options o = DefaultOptions();
  o.tls_cert_file = cert;
  o.tls_key_file = key;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 2;
  constexpr int kReloads = 20;
  std::atomic<bool> done{false};
  std::atomic<int> connected{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      while (!done.load()) {
        TlsTestClient client(server->port(), both);
        if (client.Send("GET", "/v1/info").status == 200) {
          connected.fetch_add(1);
        } else {
          failed.fetch_add(1);
        }
      }
    });
  }
  int reloads = 0;
  std::string error;
  for (; reloads < kReloads && error.empty(); ++reloads) {
    // Each reload comes after a few more handshakes, so they interleave.
    const int before = connected.load() + failed.load();
    if (!WaitFor([&] { return connected.load() + failed.load() > before + kClients; },
                 std::chrono::seconds(60))) {
      error = "the clients stopped connecting";
      break;
    }
    const TestCert& next = reloads % 2 == 0 ? other_ : cert_;
    std::filesystem::copy_file(next.key_file, key, overwrite);
    std::filesystem::copy_file(next.cert_file, cert, overwrite);
    error = server->ReloadTlsCertificate().message();
  }
  done.store(true);
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(connected.load(), kReloads * kClients);
  EXPECT_EQ(server->tls_reload_stats().reloads, static_cast<uint64_t>(kReloads));
}

TEST_F(TlsTest, NoTlsNothingToReload) {
  auto server = StartServer(DefaultOptions());
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(server->tls_enabled());
  EXPECT_EQ(server->ReloadTlsCertificate().message(), "TLS is off (no --tls_cert_file)");
  EXPECT_EQ(server->webserver()->ReplaceTlsContext(nullptr).code(), StatusCode::kNotSupported);
  TestHttpClient client(server->port());
  EXPECT_EQ(client.Get("/metrics").body.find("qr_tls_"), std::string::npos);
}

}  // namespace
}  // namespace qr::testing
