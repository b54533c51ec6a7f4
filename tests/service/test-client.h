#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/base64.h"
#include "testutil/wait.h"

/// A small blocking HTTP/1.1 client for the service tests, and a Trino-protocol statement
/// client on top of it. Everything here reads with a deadline (poll()), so a broken server
/// makes a test fail, never hang; nothing sleeps.
/// Thread-safety: one object per thread; distinct objects are independent.

namespace qr::testing {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

/// One HTTP response as read from the wire.
struct TestResponse {
  /// 0 when no complete response was read; 'error' says why.
  int status = 0;
  std::string error;
  /// Header fields in the order received, names as sent.
  Headers headers;
  /// The body (de-chunked when the response was chunked).
  std::string body;

  bool ok() const { return status != 0; }
  /// The first header named 'name' (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  /// The body parsed as JSON; a discarded value (is_discarded()) when it is not JSON.
  nlohmann::json Json() const;
};

/// A request for TestHttpClient::Send().
struct TestRequest {
  std::string method = "GET";
  /// Origin form ("/v1/info") or absolute form ("http://127.0.0.1:1234/v1/info").
  std::string target = "/";
  Headers headers;
  std::string body;
  /// Send the body with Transfer-Encoding: chunked (in chunks of at most 'chunk_bytes')
  /// instead of Content-Length.
  bool chunked = false;
  size_t chunk_bytes = 7;
  /// Send no Content-Length for an empty body (as GET and DELETE usually do).
  bool omit_empty_length = true;
  /// false: send "Connection: close".
  bool keep_alive = true;
  /// The Host header; empty: "127.0.0.1:<port>".
  std::string host;
};

/// A blocking client over one TCP connection to 127.0.0.1:'port'. Send() (re)connects when
/// needed. Every read is bounded by 'timeout'.
class TestHttpClient {
 public:
  explicit TestHttpClient(int port,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~TestHttpClient();
  TestHttpClient(const TestHttpClient&) = delete;
  TestHttpClient& operator=(const TestHttpClient&) = delete;

  /// Opens the connection unless open. False (see last_error()) on failure.
  bool Connect();
  bool connected() const { return fd_ >= 0; }
  void Close();
  /// Half-closes: no more bytes will be sent.
  void ShutdownWrite();

  /// Writes 'bytes' as they are. False if the connection is closed or the write failed.
  bool SendRaw(std::string_view bytes);
  /// Reads one complete response ('head': the request was HEAD, no body follows).
  TestResponse ReadResponse(bool head = false);
  /// Serializes and sends 'req', then reads its response. Reconnects first if the server
  /// closed the previous connection.
  TestResponse Send(const TestRequest& req);
  /// Shorthands for Send().
  TestResponse Get(const std::string& target, Headers headers = {});
  TestResponse Delete(const std::string& target, Headers headers = {});
  TestResponse Post(const std::string& target, std::string body, Headers headers = {});

  /// True when the server closes the connection (EOF or reset) within 'timeout'; bytes that
  /// arrive meanwhile are appended to 'received' (if given).
  bool WaitForClose(std::chrono::milliseconds timeout, std::string* received = nullptr);

  /// The request bytes Send() would write for 'req'.
  std::string Serialize(const TestRequest& req) const;

  int port() const { return port_; }
  /// Requests written by Send() over the lifetime of this client.
  int requests_sent() const { return requests_sent_; }
  const std::string& last_error() const { return last_error_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  /// Waits for readable data until 'deadline' and appends it to 'buffer_'. False on EOF,
  /// error or deadline ('*eof' tells EOF apart).
  bool Fill(Clock::time_point deadline, bool* eof = nullptr);
  bool ReadBody(const TestResponse& head, Clock::time_point deadline, std::string* body,
                std::string* error);
  bool ReadChunked(Clock::time_point deadline, std::string* body, std::string* error);

  const int port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string buffer_;
  std::string last_error_;
  int requests_sent_ = 0;
  bool server_closes_ = false;
  /// The last Fill() ended at EOF or a reset.
  bool last_eof_ = false;
  uint64_t bytes_received_ = 0;
};

/// "http://host:port/p?q" -> "/p?q"; an origin-form target is returned unchanged.
std::string TargetOf(std::string_view uri);
/// How a StatementClient talks.
struct StatementOptions {
  /// The user; empty sends no user header.
  std::string user = "test";
  /// "X-Trino-" or "X-Presto-".
  std::string header_prefix = "X-Trino-";
  /// More headers on the POST (no Content-Type is sent unless given here).
  Headers post_headers;
  /// Headers sent with every request (POST, GETs, DELETE), e.g. Authorization.
  Headers headers;
  /// Send the POST body with Transfer-Encoding: chunked.
  bool chunked_post = false;
  /// Appended as "?maxWait=<value>" to every GET when not empty.
  std::string max_wait;
  /// Keep every JSON answer in StatementResult::answers.
  bool keep_answers = false;
  /// Give up (failure set) after this many HTTP requests or this much time.
  int max_requests = 1000000;
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

/// Everything a StatementClient saw.
struct StatementResult {
  int post_status = 0;
  std::string id;
  /// The columns array, once seen (null before).
  nlohmann::json columns;
  std::vector<nlohmann::json> rows;
  /// stats.state of every answer, consecutive repeats collapsed ("QUEUED", "RUNNING", ...).
  std::vector<std::string> states;
  /// stats.state of the last answer.
  std::string final_state;
  /// The error object of the last answer (null if none).
  nlohmann::json error;
  /// HTTP requests made for this statement (POST, GETs, DELETE).
  int http_requests = 0;
  /// Answers whose JSON carried a "data" member.
  int data_pages = 0;
  /// Every JSON answer (POST first) when StatementOptions::keep_answers.
  std::vector<nlohmann::json> answers;
  /// The first protocol violation or transport problem; empty if none.
  std::string failure;

  std::string error_name() const {
    return error.is_object() ? error.value("errorName", std::string()) : std::string();
  }
};

/// One statement through the protocol, step by step: Submit(), then Advance() until done().
/// Checks the protocol invariants of every answer (docs/protocol.md) and records the first
/// violation in result().failure: status 200, JSON content type, body starting with '{', the
/// same id, a stats object with a state, no empty 'data', rows as wide as the columns,
/// columns on every page once known, QUEUED and no data on the POST answer, a terminal state
/// (with an error when FAILED) exactly when nextUri is absent.
class StatementClient {
 public:
  explicit StatementClient(int port, StatementOptions options = {});

  /// POSTs 'sql'. Returns the raw response.
  TestResponse Submit(std::string_view sql);
  /// GETs nextUri (QR_REQUIRES: !done()). Returns the raw response.
  TestResponse Advance();
  /// DELETEs nextUri (QR_REQUIRES: a nextUri was seen). Returns the raw response.
  TestResponse Cancel();
  /// Advance()s until a page with rows arrives, done(), or 'max_pages' GETs. Returns the last
  /// response: the first data page when one came (its JSON has "data").
  TestResponse AdvanceToData(int max_pages = 1000);
  /// Submit() then Advance() until done(), a failure, or a limit.
  StatementResult& RunToCompletion(std::string_view sql);

  bool done() const { return next_uri_.empty(); }
  const std::string& next_uri() const { return next_uri_; }
  /// The nextUri before the last Advance() (for re-GET tests).
  const std::string& previous_uri() const { return previous_uri_; }
  StatementResult& result() { return result_; }
  TestHttpClient& http() { return http_; }
  /// Headers carrying the user in the configured family.
  Headers UserHeaders() const;

 private:
  void Absorb(const TestResponse& resp, bool is_post);
  void Fail(std::string why);
  std::string WithMaxWait(const std::string& uri) const;

  const StatementOptions options_;
  TestHttpClient http_;
  StatementResult result_;
  std::string next_uri_;
  std::string previous_uri_;
  Clock::time_point deadline_;
};

/// Runs 'sql' end to end on its own connection.
StatementResult RunStatement(int port, std::string_view sql, StatementOptions options = {});

}  // namespace qr::testing
