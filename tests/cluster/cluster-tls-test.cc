// TLS between cluster members: CreateClusterTlsContext()'s start-up errors name the flag and
// the file; Forwarder::Send() to an https:// member verifies its certificate (the CA and the
// URI's host), fails the request when it does not verify, and keeps verified connections;
// EtcdClient does the same towards https:// etcd endpoints.

#include "cluster/cluster-tls.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <gtest/gtest.h>

#include "cluster/etcd-client.h"
#include "cluster/forwarder.h"
#include "http/tls-context.h"
#include "http/webserver.h"
#include "testutil/test-cert.h"

namespace qr {
namespace {

namespace http = boost::beast::http;
using SslContext = std::shared_ptr<boost::asio::ssl::context>;

class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "qr-cluster-tls.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::string error;
    ASSERT_TRUE(testing::WriteSelfSignedCert(dir_, "member", &cert_, &error)) << error;
    ASSERT_TRUE(testing::WriteSelfSignedCert(dir_, "other", &other_, &error)) << error;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Error(const ClusterTlsFiles& files) {
    SslContext ctx;
    Status s = CreateClusterTlsContext(files, &ctx);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ctx, nullptr);
    return s.message();
  }

  std::string dir_;
  testing::TestCert cert_, other_;
};

TEST_F(ClusterTlsTest, FilesAreValidatedNamingTheFlag) {
  SslContext ctx;
  ASSERT_TRUE(CreateClusterTlsContext({}, &ctx).ok());  // the system's trust store
  ASSERT_TRUE(CreateClusterTlsContext({cert_.cert_file, "", ""}, &ctx).ok());
  ASSERT_TRUE(CreateClusterTlsContext({cert_.cert_file, cert_.cert_file, cert_.key_file}, &ctx)
                  .ok());

  EXPECT_EQ(Error({dir_ + "/nope.pem", "", ""}),
            "--cluster_ca_file '" + dir_ + "/nope.pem': cannot be read: No such file or directory");
  const std::string junk = dir_ + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  EXPECT_EQ(Error({junk, "", ""}).rfind("--cluster_ca_file '" + junk + "': ", 0), 0u);
  EXPECT_NE(Error({junk, "", ""}).find("(expected PEM CA certificates)"), std::string::npos);

  EXPECT_NE(Error({"", cert_.cert_file, ""}).find("needs both --cluster_client_cert_file and "
                                                  "--cluster_client_key_file"),
            std::string::npos);
  EXPECT_EQ(Error({"", junk, cert_.key_file}).rfind("--cluster_client_cert_file '" + junk, 0),
            0u);
  EXPECT_EQ(Error({"", cert_.cert_file, dir_ + "/nope.key"}),
            "--cluster_client_key_file '" + dir_ +
                "/nope.key': cannot be read: No such file or directory");
  EXPECT_EQ(Error({"", cert_.cert_file, other_.key_file}),
            "--cluster_client_key_file '" + other_.key_file +
                "': not an unencrypted PEM private key matching --cluster_client_cert_file '" +
                cert_.cert_file + "'");
}

/// An HTTPS (or plain) member answering GET /ping, and a client io_context running the
/// forwarder's operations.
class ClusterTlsSendTest : public ClusterTlsTest {
 protected:
  /// 'client_ca': the member requires a client certificate signed by it (mutual TLS).
  void StartMember(bool tls, const std::string& client_ca = "") {
    Webserver::Options o;
    o.port = 0;
    o.num_threads = 1;
    if (tls) {
      Status s = CreateTlsServerContext(cert_.cert_file, cert_.key_file, &o.tls_context);
      ASSERT_TRUE(s.ok()) << s.message();
    }
    if (!client_ca.empty()) {
      o.tls_context->load_verify_file(client_ca);
      o.tls_context->set_verify_mode(boost::asio::ssl::verify_peer |
                                     boost::asio::ssl::verify_fail_if_no_peer_cert);
    }
    server_ = std::make_unique<Webserver>(std::move(o));
    server_->RegisterHandler(http::verb::get, "/ping", [](HttpRequest& req,
                                                          ResponseCallback respond) {
      respond(HttpResponse::Text(200, "pong " + std::string(req.secure ? "tls" : "plain")));
    });
    // What an etcd gateway would answer (EtcdClient over TLS).
    server_->RegisterHandler(http::verb::post, "/v3/kv/range", [](HttpRequest& req,
                                                                  ResponseCallback respond) {
      respond(HttpResponse::Json(200, "{\"count\":\"" + req.body + "\"}"));
    });
    ASSERT_TRUE(server_->Start().ok());
    client_thread_ = std::thread([this] { client_io_.run(); });
  }

  void TearDown() override {
    if (forwarder_ != nullptr) forwarder_->Close();
    work_.reset();
    if (client_thread_.joinable()) client_thread_.join();
    forwarder_.reset();
    if (server_ != nullptr) server_->Stop();
    ClusterTlsTest::TearDown();
  }

  void MakeForwarder(const std::string& ca_file, const testing::TestCert* client = nullptr) {
    Forwarder::Options o;
    o.cluster_name = "tls-test";
    Status s = CreateClusterTlsContext(
        {ca_file, client ? client->cert_file : "", client ? client->key_file : ""},
        &o.tls_context);
    ASSERT_TRUE(s.ok()) << s.message();
    forwarder_ = std::make_unique<Forwarder>(std::move(o));
  }

  struct Answer {
    int result = -1;
    HttpResponse response;
    std::string error;
  };

  Answer Send(const std::string& uri) {
    ClusterMember member;
    member.id = 7;
    member.uri = uri;
    Forwarder::Outgoing out;
    out.target = "/ping";
    auto promise = std::make_shared<std::promise<Answer>>();
    std::future<Answer> future = promise->get_future();
    forwarder_->Send(member, out, std::chrono::seconds(30), client_io_,
                     [promise](int result, HttpResponse response, std::string error) {
                       promise->set_value(Answer{result, std::move(response), std::move(error)});
                     });
    return future.get();
  }

  std::string Uri(const std::string& host) {
    return "https://" + host + ":" + std::to_string(server_->port());
  }

  boost::asio::io_context client_io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      client_io_.get_executor()};
  std::thread client_thread_;
  std::unique_ptr<Webserver> server_;
  std::unique_ptr<Forwarder> forwarder_;
};

TEST_F(ClusterTlsSendTest, VerifiedMemberIsAskedOverTlsOnAPooledConnection) {
  StartMember(/*tls=*/true);
  MakeForwarder(cert_.cert_file);
  for (int i = 0; i < 3; ++i) {
    Answer a = Send(Uri("127.0.0.1"));
    ASSERT_EQ(a.result, Forwarder::kOk) << a.error;
    EXPECT_EQ(a.response.status, 200);
    EXPECT_EQ(a.response.body, "pong tls");
  }
  // Kept alive and reused: one TLS connection for the three requests.
  EXPECT_EQ(forwarder_->GetStats().connections_opened, 1);
  EXPECT_EQ(server_->connections_accepted(), 1u);
}

TEST_F(ClusterTlsSendTest, CertificateOfAnotherCaIsAnError) {
  StartMember(/*tls=*/true);
  MakeForwarder(other_.cert_file);
  Answer a = Send(Uri("127.0.0.1"));
  EXPECT_EQ(a.result, Forwarder::kError);
  EXPECT_NE(a.error.find("Coordinator member 7 at " + Uri("127.0.0.1")), std::string::npos)
      << a.error;
  EXPECT_NE(a.error.find("TLS handshake failed: certificate verify failed: "), std::string::npos)
      << a.error;
  EXPECT_EQ(server_->responses_with_status(200), 0u);
}

TEST_F(ClusterTlsSendTest, HostNameNotInTheCertificateIsAnError) {
  StartMember(/*tls=*/true);
  MakeForwarder(cert_.cert_file);
  // The certificate names IP 127.0.0.1 (and CN 127.0.0.1, which is never looked at).
  Answer a = Send(Uri("localhost"));
  EXPECT_EQ(a.result, Forwarder::kError);
  EXPECT_NE(a.error.find("certificate verify failed: hostname mismatch"), std::string::npos)
      << a.error;
  EXPECT_EQ(server_->responses_with_status(200), 0u);
}

TEST_F(ClusterTlsSendTest, PlainMemberBehindAnHttpsUriIsAnError) {
  StartMember(/*tls=*/false);
  MakeForwarder(cert_.cert_file);
  Answer a = Send(Uri("127.0.0.1"));
  EXPECT_EQ(a.result, Forwarder::kError);
  EXPECT_NE(a.error.find("TLS handshake failed"), std::string::npos) << a.error;
  // And the http:// URI of the same member works.
  a = Send("http://127.0.0.1:" + std::to_string(server_->port()));
  ASSERT_EQ(a.result, Forwarder::kOk) << a.error;
  EXPECT_EQ(a.response.body, "pong plain");
}

TEST_F(ClusterTlsSendTest, ClientCertificateForAMemberThatRequiresOne) {
  StartMember(/*tls=*/true, /*client_ca=*/other_.cert_file);
  MakeForwarder(cert_.cert_file);
  Answer a = Send(Uri("127.0.0.1"));  // no client certificate: refused
  EXPECT_EQ(a.result, Forwarder::kError);
  forwarder_->Close();
  MakeForwarder(cert_.cert_file, &other_);
  a = Send(Uri("127.0.0.1"));
  ASSERT_EQ(a.result, Forwarder::kOk) << a.error;
  EXPECT_EQ(a.response.body, "pong tls");
}

// SIGHUP's reload of the cluster's client TLS files: connections opened after
// ReplaceTlsContext() use the new context, a pooled one keeps the context it was opened with
// (alive after the forwarder dropped it: ASan would see a use after free otherwise).
TEST_F(ClusterTlsSendTest, ReplacedContextIsUsedByNewConnectionsOnly) {
  StartMember(/*tls=*/true, /*client_ca=*/other_.cert_file);
  MakeForwarder(cert_.cert_file);
  Answer a = Send(Uri("127.0.0.1"));  // no client certificate: refused
  EXPECT_EQ(a.result, Forwarder::kError);
  const auto context = [&](const testing::TestCert* client) {
    SslContext ctx;
    Status s = CreateClusterTlsContext(
        {cert_.cert_file, client ? client->cert_file : "", client ? client->key_file : ""},
        &ctx);
    EXPECT_TRUE(s.ok()) << s.message();
    return ctx;
  };
  forwarder_->ReplaceTlsContext(context(&other_));  // now with the client certificate
  a = Send(Uri("127.0.0.1"));
  ASSERT_EQ(a.result, Forwarder::kOk) << a.error;
  EXPECT_EQ(a.response.body, "pong tls");
  const int64_t opened = forwarder_->GetStats().connections_opened;
  // Without the client certificate again: the pooled connection keeps the one it was opened
  // with and still answers; only a new connection gets the new context (and is refused).
  forwarder_->ReplaceTlsContext(context(nullptr));
  a = Send(Uri("127.0.0.1"));
  ASSERT_EQ(a.result, Forwarder::kOk) << a.error;
  EXPECT_EQ(forwarder_->GetStats().connections_opened, opened) << "the pooled one was reused";
  forwarder_->Close();  // drops the pooled connection: the next request opens one
  a = Send(Uri("127.0.0.1"));
  EXPECT_EQ(a.result, Forwarder::kError);
  EXPECT_NE(a.error.find("certificate required"), std::string::npos) << a.error;
  EXPECT_EQ(server_->responses_with_status(200), 2u);
}

TEST_F(ClusterTlsSendTest, HttpsMemberWithoutATlsContextIsAnError) {
  StartMember(/*tls=*/true);
  forwarder_ = std::make_unique<Forwarder>(Forwarder::Options());
  Answer a = Send(Uri("127.0.0.1"));
  EXPECT_EQ(a.result, Forwarder::kError);
  EXPECT_NE(a.error.find("https:// needs a TLS client context"), std::string::npos) << a.error;
}

/// The etcd client's TLS (--etcd_ca_file...), against the member standing in for etcd.
class EtcdTlsTest : public ClusterTlsSendTest {
 protected:
  static SslContext Context(const std::string& ca_file,
                            const testing::TestCert* client = nullptr) {
    SslContext ctx;
    ClusterTlsFiles files{ca_file, client ? client->cert_file : "",
                          client ? client->key_file : "", "etcd"};
    Status s = CreateClusterTlsContext(files, &ctx);
    EXPECT_TRUE(s.ok()) << s.message();
    return ctx;
  }
  Status Call(const std::string& endpoint, const SslContext& ctx, std::string* response) {
    EtcdClient etcd({endpoint}, std::chrono::seconds(30), ctx);
    return etcd.Call("/v3/kv/range", "7", response);
  }
  std::string Endpoint(const std::string& scheme, const std::string& host) {
    return scheme + "://" + host + ":" + std::to_string(server_->port());
  }
};

TEST_F(EtcdTlsTest, FlagsInMessagesAreEtcds) {
  ClusterTlsFiles files{dir_ + "/nope.pem", "", "", "etcd"};
  EXPECT_EQ(Error(files),
            "--etcd_ca_file '" + dir_ + "/nope.pem': cannot be read: No such file or directory");
  files = {"", cert_.cert_file, "", "etcd"};
  EXPECT_NE(Error(files).find("needs both --etcd_client_cert_file and --etcd_client_key_file"),
            std::string::npos);
}

TEST_F(EtcdTlsTest, VerifiedEndpointIsAskedOverTls) {
  StartMember(/*tls=*/true);
  std::string response;
  Status s = Call(Endpoint("https", "127.0.0.1"), Context(cert_.cert_file), &response);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(response, "{\"count\":\"7\"}");
}

TEST_F(EtcdTlsTest, UnverifiedEndpointsAreErrorsNeverPlainText) {
  StartMember(/*tls=*/true);
  std::string response;
  // Another CA, a host name the certificate does not name, no TLS context at all.
  Status s = Call(Endpoint("https", "127.0.0.1"), Context(other_.cert_file), &response);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("TLS handshake failed: certificate verify failed"),
            std::string::npos)
      << s.message();
  s = Call(Endpoint("https", "localhost"), Context(cert_.cert_file), &response);
  EXPECT_NE(s.message().find("hostname mismatch"), std::string::npos) << s.message();
  s = Call(Endpoint("https", "127.0.0.1"), nullptr, &response);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no TLS context"), std::string::npos) << s.message();
  // A plain-HTTP client to the TLS server fails too (it answers garbage or closes).
  s = Call(Endpoint("http", "127.0.0.1"), nullptr, &response);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(server_->responses_with_status(200), 0u);
}

TEST_F(EtcdTlsTest, ClientCertificateForAnEtcdThatRequiresOne) {
  StartMember(/*tls=*/true, /*client_ca=*/other_.cert_file);
  std::string response;
  EXPECT_FALSE(Call(Endpoint("https", "127.0.0.1"), Context(cert_.cert_file), &response).ok());
  Status s = Call(Endpoint("https", "127.0.0.1"), Context(cert_.cert_file, &other_), &response);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(server_->responses_with_status(200), 1u);
}

// The etcd client's next connection uses a replaced context (SIGHUP's reload of the etcd
// TLS files); the open one keeps its own.
TEST_F(EtcdTlsTest, ReplacedContextIsUsedByTheNextConnection) {
  StartMember(/*tls=*/true, /*client_ca=*/other_.cert_file);
  EtcdClient etcd({Endpoint("https", "127.0.0.1")}, std::chrono::seconds(30),
                  Context(cert_.cert_file));
  std::string response;
  EXPECT_FALSE(etcd.Call("/v3/kv/range", "1", &response).ok()) << "no client certificate";
  etcd.ReplaceTlsContext(Context(cert_.cert_file, &other_));
  Status s = etcd.Call("/v3/kv/range", "2", &response);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(response, "{\"count\":\"2\"}");
  const uint64_t accepted = server_->connections_accepted();
  // The kept-alive connection keeps the context it was opened with.
  etcd.ReplaceTlsContext(Context(cert_.cert_file));
  s = etcd.Call("/v3/kv/range", "3", &response);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(server_->connections_accepted(), accepted) << "the connection was reused";
}

}  // namespace
}  // namespace qr
