// The pure parsing half of the HTTP request path, in-process and fast: the input is raw bytes
// from a client. They go through Beast's request_parser with the webserver's limits, one
// request after another, and every parsed request through the functions the webserver and the
// protocol handlers apply to it: ParseRequestTarget, QueryParam, PercentDecode, ParseDuration
// (maxWait), RequestUser (X-Trino-User, Basic credentials), IsSafeAuthority (Host),
// ParseSessionHeaders (X-Trino-Session) and ParseId (ids in paths). The request's headers and
// "name: value" lines of its body then become response headers for AppendResponseHead, which
// must never let them split the response.
// http-request-fuzzer drives the same bytes through the real server over a socket.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <glog/logging.h>

#include "fuzz-util.h"
#include "server-read.h"
#include "service/statement-service.h"
#include "http/http-message.h"
#include "util/unique-id.h"

namespace {

namespace http = boost::beast::http;
using qr::HttpRequest;

std::string_view ToStd(boost::beast::string_view s) { return {s.data(), s.size()}; }

void CheckPercentDecode(std::string_view in) {
  for (bool plus : {false, true}) {
    const std::string out = qr::PercentDecode(in, plus);
    FUZZ_CHECK(out.size() <= in.size(), "PercentDecode grew its input", in);
    if (in.find('%') == std::string_view::npos && (!plus || in.find('+') == std::string_view::npos)) {
      FUZZ_CHECK(out == in, "PercentDecode changed text without escapes", in);
    }
  }
}

void CheckTarget(std::string_view target, const HttpRequest& req) {
  FUZZ_CHECK(!req.target.empty() && req.target[0] == '/', "target not in origin form", target);
  FUZZ_CHECK(req.target.find('#') == std::string::npos, "fragment kept", target);
  FUZZ_CHECK(req.path.find('?') == std::string::npos, "'?' in path", target);
  const std::string rebuilt =
      req.path + (req.target.size() > req.path.size() ? "?" + req.query : std::string());
  FUZZ_CHECK(rebuilt == req.target, "path and query do not make the target", target);
  if (target[0] == '/') {
    FUZZ_CHECK(req.absolute_authority.empty(), "origin form with an authority", target);
    FUZZ_CHECK(req.target == target.substr(0, target.find('#')), "origin form changed", target);
  } else {
    FUZZ_CHECK(!req.absolute_authority.empty(), "absolute form without authority", target);
  }
}

void CheckAuthority(std::string_view host) {
  if (!qr::IsSafeAuthority(host)) return;
  // A safe authority is echoed into nextUri: it must survive a round trip through a URI.
  HttpRequest req;
  const std::string uri = "http://" + std::string(host) + "/v1/statement";
  FUZZ_CHECK(qr::ParseRequestTarget(uri, &req), "a safe authority breaks its URI", host);
  FUZZ_CHECK(req.absolute_authority == host && req.path == "/v1/statement",
             "a safe authority changes its URI", host);
}

void CheckQueryParams(const HttpRequest& req) {
  for (std::string_view name : {"maxWait", "query_id", "json"}) {
    bool present = false;
    const std::string value = req.QueryParam(name, &present);
    if (!present) FUZZ_CHECK(value.empty(), "value of an absent parameter", req.query);
    if (name == "maxWait" && present) {
      std::chrono::milliseconds wait{-1};
      if (qr::ParseDuration(value, &wait)) {
        FUZZ_CHECK(wait.count() >= 0 && wait.count() <= 1'000'000'000'000LL,
                   "ParseDuration out of range", value);
      }
    }
    if (name == "query_id" && present) {
      qr::UniqueId id;
      if (qr::ParseId(value, &id).ok()) FUZZ_CHECK(qr::PrintId(id).size() == 33);
    }
  }
}

void CheckSession(const HttpRequest& req) {
  qr::SessionInfo session;
  qr::ParseSessionHeaders(req, &session);
  size_t max_items = 0;
  for (const auto& field : req.headers) {
    if (boost::beast::iequals(field.name_string(), "X-Trino-Session") ||
        boost::beast::iequals(field.name_string(), "X-Presto-Session")) {
      for (char c : ToStd(field.value())) max_items += c == '=';
    }
  }
  FUZZ_CHECK(session.properties.size() <= max_items, "more session properties than '='");
  for (const auto& [name, value] : session.properties) {
    FUZZ_CHECK(name.find(',') == std::string::npos, "',' in a session property name", name);
    FUZZ_CHECK(name.find('=') == std::string::npos, "'=' in a session property name", name);
    FUZZ_CHECK(name.empty() || (name.front() != ' ' && name.back() != ' '),
               "session property name not trimmed", name);
  }
}

void CheckUser(const HttpRequest& req) {
  const std::string user = qr::RequestUser(req);
  const std::string_view trino_user = req.Header("X-Trino-User");
  if (!trino_user.empty()) FUZZ_CHECK(user == trino_user, "X-Trino-User not used", user);
}

/// The response head must be exactly one status line and header lines ending in CRLF, then one
/// empty line, whatever the handler put into the headers.
void CheckResponseHead(const HttpRequest& req, unsigned status) {
  qr::HttpResponse resp;
  resp.status = status;
  resp.content_type = std::string(req.Header("Accept"));
  for (const auto& field : req.headers) {
    resp.headers.emplace_back(std::string(ToStd(field.name_string())),
                              std::string(ToStd(field.value())));
  }
  // Lines "name: value" of the body give names and values Beast would never have accepted.
  std::string_view body = req.body;
  while (!body.empty() && resp.headers.size() < 64) {
    const size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    resp.headers.emplace_back(std::string(line.substr(0, colon)),
                              std::string(line.substr(colon + 1)));
  }
  for (bool keep_alive : {false, true}) {
    std::string head;
    qr::AppendResponseHead(status, resp, req.body.size(), keep_alive, /*http10=*/!keep_alive,
                           &head);
    FUZZ_CHECK(head.size() >= 4 && head.find("\r\n\r\n") == head.size() - 4,
               "the response head does not end at its first empty line", head);
    for (size_t i = 0; i < head.size(); ++i) {
      FUZZ_CHECK(head[i] != '\0', "NUL in the response head", head);
      if (head[i] == '\r') FUZZ_CHECK(i + 1 < head.size() && head[i + 1] == '\n', "bare CR", head);
      if (head[i] == '\n') FUZZ_CHECK(i > 0 && head[i - 1] == '\r', "bare LF", head);
    }
  }
}

void CheckRequest(const http::request<http::string_body>& msg) {
  const std::string_view target = ToStd(msg.target());
  HttpRequest req;
  req.method = msg.method();
  req.method_string.assign(ToStd(msg.method_string()));
  if (!qr::ParseRequestTarget(target, &req)) {
    FUZZ_CHECK(target.empty() || target[0] != '/', "an origin-form target was refused", target);
    return;
  }
  CheckTarget(target, req);
  req.headers = static_cast<const http::fields&>(msg);
  req.body = msg.body();
  CheckPercentDecode(req.path);
  CheckPercentDecode(req.query);
  CheckQueryParams(req);
  CheckAuthority(req.Header("Host"));
  CheckAuthority(req.absolute_authority);
  CheckSession(req);
  CheckUser(req);
  // Ids in the paths of /v1/query/{id} and /v1/statement/.../{id}/...
  std::string_view path = req.path;
  for (size_t slash; (slash = path.find('/')) != std::string_view::npos;) {
    path.remove_prefix(slash + 1);
    qr::UniqueId id;
    if (qr::ParseId(path.substr(0, path.find('/')), &id).ok()) {
      FUZZ_CHECK(qr::PrintId(id).size() == 33);
    }
  }
  CheckResponseHead(req, 200 + static_cast<unsigned>(req.body.size() % 400));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // AppendResponseHead warns about every header it drops: keep the fuzzer fast and readable.
  if (getenv("QR_FUZZ_VERBOSE") == nullptr) FLAGS_minloglevel = google::GLOG_ERROR;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // Pipelined requests, as a keep-alive connection reads them.
  for (int n = 0; n < 8 && !input.empty(); ++n) {
    http::request_parser<http::string_body> parser;
    const size_t before = input.size();
    const qr::fuzz::ServerRead read = qr::fuzz::ReadLikeTheServer(&input, &parser);
    FUZZ_CHECK(input.size() <= before);
    // Anything but a whole request: the server answers 4xx and closes, or drops it.
    if (read != qr::fuzz::ServerRead::kRequest) return 0;
    CheckRequest(parser.get());
    if (!parser.get().keep_alive()) return 0;
  }
  return 0;
}
