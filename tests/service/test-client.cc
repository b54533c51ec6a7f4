#include "test-client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <absl/strings/match.h>

namespace qr::testing {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

/// Parses "HTTP/1.x NNN reason\r\nName: value\r\n...\r\n" (without the final empty line).
bool ParseHead(std::string_view block, TestResponse* out, std::string* error) {
  size_t eol = block.find("\r\n");
  std::string_view status_line = block.substr(0, eol);
  if (!HasPrefix(status_line, "HTTP/1.") || status_line.size() < 12) {
    *error = "bad status line: " + std::string(status_line.substr(0, 80));
    return false;
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (status_line[i] < '0' || status_line[i] > '9') {
      *error = "bad status code in: " + std::string(status_line.substr(0, 80));
      return false;
    }
    status = status * 10 + (status_line[i] - '0');
  }
  while (eol != std::string_view::npos && eol + 2 < block.size()) {
    size_t start = eol + 2;
    eol = block.find("\r\n", start);
    std::string_view line = block.substr(start, eol == std::string_view::npos ? eol : eol - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      *error = "bad header line: " + std::string(line.substr(0, 80));
      return false;
    }
    out->headers.emplace_back(std::string(line.substr(0, colon)), Trim(line.substr(colon + 1)));
  }
  out->status = status;
  return true;
}

}  // namespace

std::string TestResponse::Header(std::string_view name) const {
  const absl::string_view wanted(name.data(), name.size());
  for (const auto& [n, v] : headers) {
    if (absl::EqualsIgnoreCase(n, wanted)) return v;
  }
  return "";
}

bool TestResponse::HasHeader(std::string_view name) const {
  const absl::string_view wanted(name.data(), name.size());
  for (const auto& [n, v] : headers) {
    if (absl::EqualsIgnoreCase(n, wanted)) return true;
  }
  return false;
}

nlohmann::json TestResponse::Json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

TestHttpClient::TestHttpClient(int port, std::chrono::milliseconds timeout)
    : port_(port), timeout_(timeout) {}

TestHttpClient::~TestHttpClient() { Close(); }

bool TestHttpClient::Connect() {
  if (fd_ >= 0) return true;
  buffer_.clear();
  server_closes_ = false;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    last_error_ = std::string("socket: ") + strerror(errno);
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    last_error_ = std::string("connect: ") + strerror(errno);
    close(fd);
    return false;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fd_ = fd;
  return true;
}

void TestHttpClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buffer_.clear();
}

void TestHttpClient::ShutdownWrite() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

bool TestHttpClient::SendRaw(std::string_view bytes) {
  if (fd_ < 0) {
    last_error_ = "not connected";
    return false;
  }
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      last_error_ = std::string("send: ") + strerror(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TestHttpClient::Fill(Clock::time_point deadline, bool* eof) {
  if (eof != nullptr) *eof = false;
  last_eof_ = false;
  if (fd_ < 0) return false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      last_error_ = "timed out waiting for the server";
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      last_error_ = std::string("poll: ") + strerror(errno);
      return false;
    }
    if (r == 0) continue;  // re-checks the deadline
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
      if (eof != nullptr) *eof = true;
      last_eof_ = true;
      last_error_ = n == 0 ? "connection closed by the server" : "connection reset";
      return false;
    }
    if (n < 0) {
      last_error_ = std::string("recv: ") + strerror(errno);
      return false;
    }
    buffer_.append(tmp, static_cast<size_t>(n));
    bytes_received_ += static_cast<uint64_t>(n);
    return true;
  }
}

TestResponse TestHttpClient::ReadResponse(bool head) {
  TestResponse resp;
  const Clock::time_point deadline = Clock::now() + timeout_;
  for (;;) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) {
        resp.error = "no response head: " + last_error_;
        return resp;
      }
    }
    TestResponse parsed;
    if (!ParseHead(std::string_view(buffer_).substr(0, end), &parsed, &resp.error)) {
      return resp;
    }
    buffer_.erase(0, end + 4);
    if (parsed.status == 100) continue;  // interim: the real answer follows
    resp = std::move(parsed);
    break;
  }
  if (absl::EqualsIgnoreCase(resp.Header("Connection"), "close")) server_closes_ = true;
  if (head || resp.status == 204 || resp.status == 304) return resp;
  std::string body, error;
  if (!ReadBody(resp, deadline, &body, &error)) {
    resp.status = 0;
    resp.error = error;
    return resp;
  }
  resp.body = std::move(body);
  return resp;
}

bool TestHttpClient::ReadBody(const TestResponse& head, Clock::time_point deadline,
                              std::string* body, std::string* error) {
  if (absl::EqualsIgnoreCase(head.Header("Transfer-Encoding"), "chunked")) {
    return ReadChunked(deadline, body, error);
  }
  if (head.HasHeader("Content-Length")) {
    std::string text = head.Header("Content-Length");
    char* end = nullptr;
    unsigned long long length = strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') {
      *error = "bad Content-Length: " + text;
      return false;
    }
    while (buffer_.size() < length) {
      if (!Fill(deadline)) {
        *error = "body truncated: " + last_error_;
        return false;
      }
    }
    body->assign(buffer_, 0, length);
    buffer_.erase(0, length);
    return true;
  }
  // No length: the body ends when the server closes.
  bool eof = false;
  while (Fill(deadline, &eof)) {
  }
  if (!eof) {
    *error = "body without length not terminated: " + last_error_;
    return false;
  }
  body->swap(buffer_);
  buffer_.clear();
  Close();
  return true;
}

bool TestHttpClient::ReadChunked(Clock::time_point deadline, std::string* body,
                                 std::string* error) {
  for (;;) {
    size_t eol;
    while ((eol = buffer_.find("\r\n")) == std::string::npos) {
      if (!Fill(deadline)) {
        *error = "chunk size line truncated: " + last_error_;
        return false;
      }
    }
    char* end = nullptr;
    unsigned long long size = strtoull(buffer_.c_str(), &end, 16);
    if (end == buffer_.c_str()) {
      *error = "bad chunk size line";
      return false;
    }
    buffer_.erase(0, eol + 2);
    if (size == 0) {
      // Trailers (ignored) up to the empty line.
      for (;;) {
        while ((eol = buffer_.find("\r\n")) == std::string::npos) {
          if (!Fill(deadline)) {
            *error = "chunked trailer truncated: " + last_error_;
            return false;
          }
        }
        buffer_.erase(0, eol + 2);
        if (eol == 0) return true;
      }
    }
    while (buffer_.size() < size + 2) {
      if (!Fill(deadline)) {
        *error = "chunk truncated: " + last_error_;
        return false;
      }
    }
    body->append(buffer_, 0, size);
    buffer_.erase(0, size + 2);
  }
}

std::string TestHttpClient::Serialize(const TestRequest& req) const {
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  out += "Host: " + (req.host.empty() ? "127.0.0.1:" + std::to_string(port_) : req.host) + "\r\n";
  for (const auto& [name, value] : req.headers) out += name + ": " + value + "\r\n";
  if (!req.keep_alive) out += "Connection: close\r\n";
  if (req.chunked) {
    out += "Transfer-Encoding: chunked\r\n\r\n";
    const size_t step = std::max<size_t>(1, req.chunk_bytes);
    for (size_t pos = 0; pos < req.body.size(); pos += step) {
      size_t n = std::min(step, req.body.size() - pos);
      char size_line[32];
      snprintf(size_line, sizeof(size_line), "%zx\r\n", n);
      out += size_line;
      out.append(req.body, pos, n);
      out += "\r\n";
    }
    out += "0\r\n\r\n";
    return out;
  }
  if (!req.body.empty() || !req.omit_empty_length) {
    out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += req.body;
  return out;
}

TestResponse TestHttpClient::Send(const TestRequest& req) {
  if (server_closes_) Close();
  TestResponse resp;
  // A kept-alive connection the server closed meanwhile (idle timeout) fails on the first
  // write or read: retry once on a fresh connection, as real clients do.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = fd_ >= 0;
    if (!Connect()) {
      resp.error = last_error_;
      return resp;
    }
    ++requests_sent_;
    const uint64_t received_before = bytes_received_;
    const bool sent = SendRaw(Serialize(req));
    if (sent) {
      resp = ReadResponse(req.method == "HEAD");
      if (resp.ok()) {
        if (!req.keep_alive) server_closes_ = true;
        return resp;
      }
    } else {
      resp.error = last_error_;
    }
    // Retry only when the server had closed the idle connection before seeing this request.
    const bool closed_before_answer =
        !sent || (last_eof_ && bytes_received_ == received_before);
    Close();
    if (!reused || !closed_before_answer) break;
  }
  return resp;
}

TestResponse TestHttpClient::Get(const std::string& target, Headers headers) {
  TestRequest r;
  r.method = "GET";
  r.target = target;
  r.headers = std::move(headers);
  return Send(r);
}

TestResponse TestHttpClient::Delete(const std::string& target, Headers headers) {
  TestRequest r;
  r.method = "DELETE";
  r.target = target;
  r.headers = std::move(headers);
  return Send(r);
}

TestResponse TestHttpClient::Post(const std::string& target, std::string body, Headers headers) {
  TestRequest r;
  r.method = "POST";
  r.target = target;
  r.body = std::move(body);
  r.headers = std::move(headers);
  r.omit_empty_length = false;
  return Send(r);
}

bool TestHttpClient::WaitForClose(std::chrono::milliseconds timeout, std::string* received) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    bool eof = false;
    if (!Fill(deadline, &eof)) {
      if (received != nullptr) received->append(buffer_);
      buffer_.clear();
      if (eof) Close();
      return eof;
    }
  }
}

std::string TargetOf(std::string_view uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return std::string(uri);
  size_t path = uri.find('/', scheme + 3);
  return path == std::string_view::npos ? "/" : std::string(uri.substr(path));
}

StatementClient::StatementClient(int port, StatementOptions options)
    : options_(std::move(options)), http_(port), deadline_(Clock::now() + options_.timeout) {}

Headers StatementClient::UserHeaders() const {
  Headers h;
  if (!options_.user.empty()) h.emplace_back(options_.header_prefix + "User", options_.user);
  return h;
}

void StatementClient::Fail(std::string why) {
  if (result_.failure.empty()) result_.failure = std::move(why);
}

std::string StatementClient::WithMaxWait(const std::string& uri) const {
  if (options_.max_wait.empty()) return uri;
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "maxWait=" + options_.max_wait;
}

TestResponse StatementClient::Submit(std::string_view sql) {
  Headers headers = UserHeaders();
  for (const auto& h : options_.post_headers) headers.push_back(h);
  for (const auto& h : options_.headers) headers.push_back(h);
  TestRequest req;
  req.method = "POST";
  req.target = "/v1/statement";
  req.body = std::string(sql);
  req.headers = std::move(headers);
  req.chunked = options_.chunked_post;
  req.omit_empty_length = false;
  TestResponse resp = http_.Send(req);
  ++result_.http_requests;
  result_.post_status = resp.status;
  Absorb(resp, /*is_post=*/true);
  return resp;
}

TestResponse StatementClient::Advance() {
  previous_uri_ = next_uri_;
  TestResponse resp = http_.Get(TargetOf(WithMaxWait(next_uri_)), options_.headers);
  ++result_.http_requests;
  Absorb(resp, /*is_post=*/false);
  return resp;
}

TestResponse StatementClient::AdvanceToData(int max_pages) {
  const int data_pages = result_.data_pages;
  TestResponse last;
  for (int i = 0; i < max_pages && !done() && result_.data_pages == data_pages; ++i) {
    last = Advance();
  }
  return last;
}

TestResponse StatementClient::Cancel() {
  const std::string& uri = next_uri_.empty() ? previous_uri_ : next_uri_;
  TestResponse resp = http_.Delete(TargetOf(uri), options_.headers);
  ++result_.http_requests;
  return resp;
}

void StatementClient::Absorb(const TestResponse& resp, bool is_post) {
  next_uri_.clear();
  if (!resp.ok()) return Fail("transport: " + resp.error);
  if (resp.status != 200) {
    return Fail("HTTP " + std::to_string(resp.status) + ": " + resp.body.substr(0, 200));
  }
  if (resp.Header("Content-Type").rfind("application/json", 0) != 0) {
    Fail("Content-Type is '" + resp.Header("Content-Type") + "'");
  }
  if (resp.body.empty() || resp.body[0] != '{') Fail("body does not start with '{'");
  nlohmann::json j = resp.Json();
  if (!j.is_object()) return Fail("body is not a JSON object: " + resp.body.substr(0, 200));
  if (options_.keep_answers) result_.answers.push_back(j);

  if (!j.contains("id") || !j["id"].is_string()) return Fail("no id");
  if (is_post) result_.id = j["id"];
  if (j["id"] != result_.id) Fail("id changed from " + result_.id);
  if (!j.contains("infoUri") || !j["infoUri"].is_string()) Fail("no infoUri");
  if (!j.contains("stats") || !j["stats"].is_object() || !j["stats"].contains("state")) {
    return Fail("no stats.state");
  }
  std::string state = j["stats"]["state"];
  result_.final_state = state;
  if (result_.states.empty() || result_.states.back() != state) result_.states.push_back(state);

  if (j.contains("columns")) {
    if (!j["columns"].is_array()) Fail("columns is not an array");
    if (!result_.columns.is_null() && j["columns"] != result_.columns) Fail("columns changed");
    result_.columns = j["columns"];
  } else if (!result_.columns.is_null()) {
    Fail("columns missing from a page after they were known");
  }
  if (j.contains("data")) {
    ++result_.data_pages;
    if (is_post) Fail("the POST answer carries data");
    if (!j["data"].is_array() || j["data"].empty()) Fail("data is empty or not an array");
    if (!j.contains("columns")) Fail("data without columns");
    for (auto& row : j["data"]) {
      if (!row.is_array() || row.size() != result_.columns.size()) {
        Fail("a row is not as wide as the columns: " + row.dump());
      }
      result_.rows.push_back(std::move(row));
    }
  }
  result_.error = j.contains("error") ? j["error"] : nlohmann::json();

  if (j.contains("nextUri")) {
    if (!j["nextUri"].is_string()) return Fail("nextUri is not a string");
    next_uri_ = j["nextUri"];
    if (state == "FINISHED" || state == "FAILED") Fail("nextUri on a " + state + " answer");
  } else if (state != "FINISHED" && state != "FAILED") {
    Fail("no nextUri but state " + state);
  }
  if (is_post && state != "QUEUED") Fail("POST answered state " + state);
  if (is_post && next_uri_.empty()) Fail("POST answer without nextUri");
  if (state == "FAILED" && !result_.error.is_object()) Fail("FAILED without error");
  if (state == "FINISHED" && j.contains("data")) Fail("FINISHED answer carries data");
}

StatementResult& StatementClient::RunToCompletion(std::string_view sql) {
  Submit(sql);
  while (!done() && result_.failure.empty()) {
    if (result_.http_requests >= options_.max_requests) {
      Fail("gave up after " + std::to_string(result_.http_requests) + " requests");
      break;
    }
    if (Clock::now() > deadline_) {
      Fail("gave up after the timeout, state " + result_.final_state);
      break;
    }
    Advance();
  }
  return result_;
}

StatementResult RunStatement(int port, std::string_view sql, StatementOptions options) {
  StatementClient client(port, std::move(options));
  return std::move(client.RunToCompletion(sql));
}

}  // namespace qr::testing
