#include "soak/soak-http.h"

#include <poll.h>

#include <algorithm>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <nlohmann/json.hpp>

#include "loadgen/loadgen-http.h"

namespace qr::soak {

namespace asio = boost::asio;
namespace http = boost::beast::http;

SoakConnection::SoakConnection(asio::ip::tcp::endpoint endpoint)
    : socket_(io_), endpoint_(endpoint) {}

SoakConnection::~SoakConnection() { Close(); }

bool SoakConnection::Connect() {
  Close();
  boost::system::error_code ec;
  socket_.connect(endpoint_, ec);  // loopback: completes or fails at once
  if (!ec) socket_.non_blocking(true, ec);
  if (ec) {
    error_ = "connect: " + ec.message();
    Close();
    return false;
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  return true;
}

void SoakConnection::Close() {
  boost::system::error_code ignored;
  if (socket_.is_open()) socket_.close(ignored);
  pending_.clear();
}

bool SoakConnection::Wait(short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      error_ = "timeout";
      return false;
    }
    pollfd p{socket_.native_handle(), events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      error_ = "poll failed";
      return false;
    }
  }
}

bool SoakConnection::Write(std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    if (!socket_.is_open() && !Connect()) return false;
    boost::system::error_code ec;
    size_t n = socket_.write_some(asio::buffer(data.data(), data.size()), ec);
    if (ec == asio::error::would_block) {
      if (!Wait(POLLOUT, deadline)) return false;
      continue;
    }
    if (ec) {
      error_ = "write: " + ec.message();
      return false;
    }
    data.remove_prefix(n);
  }
  return true;
}

int64_t SoakConnection::Fill(Clock::time_point deadline, size_t max_bytes) {
  char chunk[16 * 1024];
  while (true) {
    boost::system::error_code ec;
    size_t n = socket_.read_some(asio::buffer(chunk, std::min(max_bytes, sizeof(chunk))), ec);
    if (ec == asio::error::would_block) {
      if (!Wait(POLLIN, deadline)) return -1;
      continue;
    }
    if (ec == asio::error::eof) return 0;
    if (ec) {
      error_ = "read: " + ec.message();
      return -1;
    }
    pending_.append(chunk, n);
    return static_cast<int64_t>(n);
  }
}

bool SoakConnection::ReadAnswer(Clock::time_point deadline, Answer* answer) {
  if (!socket_.is_open()) {
    error_ = "not connected";
    return false;
  }
  closed_before_answer_ = false;
  loadgen::LeanResponseParser parser(&answer->body);
  parser.eager(true);
  parser.body_limit(256u << 20);
  while (!parser.is_done()) {
    boost::beast::error_code ec;
    size_t used = pending_.empty() ? 0 : parser.put(asio::buffer(pending_), ec);
    pending_.erase(0, used);
    if (ec && ec != http::error::need_more) {
      error_ = "bad answer: " + ec.message();
      return false;
    }
    if (parser.is_done()) break;
    if (used > 0 && !ec) continue;
    int64_t n = Fill(deadline);
    if (n < 0) return false;
    if (n == 0) {
      if (!parser.got_some()) {
        error_ = "read: connection closed by the server before an answer";
        closed_before_answer_ = true;
        Close();
        return false;
      }
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        error_ = "read: connection closed before a complete answer";
        return false;
      }
    }
  }
  answer->status = parser.status();
  if (!parser.keep_alive()) Close();
  return true;
}

bool SoakConnection::ReadSome(size_t max_bytes, Clock::time_point deadline) {
  pending_.clear();
  int64_t n = Fill(deadline, std::max<size_t>(max_bytes, 1));
  if (n == 0) error_ = "read: end of stream";
  return n > 0;
}

bool SoakConnection::WaitClosedByServer(Clock::time_point deadline) {
  while (true) {
    pending_.clear();
    int64_t n = Fill(deadline);
    if (n == 0) return true;
    if (n < 0) return error_.starts_with("read: ");  // a reset also closes it
  }
}

bool SoakConnection::Request(std::string_view method, std::string_view target,
                             std::string_view body, Clock::time_point deadline, Answer* answer) {
  const std::string host =
      endpoint_.address().to_string() + ":" + std::to_string(endpoint_.port());
  const std::string request = FormatRequest(method, target, host, body);
  const bool reused = socket_.is_open();
  closed_before_answer_ = false;
  const bool written = Write(request, deadline);
  if (written && ReadAnswer(deadline, answer)) return true;
  // Like HTTP clients, send again once if the server had closed the kept-alive connection
  // (its idle timeout) without reading the request.
  if (!reused || (written && !closed_before_answer_)) return false;
  Close();
  return Write(request, deadline) && ReadAnswer(deadline, answer);
}

std::string FormatRequest(std::string_view method, std::string_view target,
                          std::string_view host, std::string_view body) {
  std::string r;
  r.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ").append(host);
  r.append("\r\nX-Trino-User: soak\r\nX-Trino-Source: coordinator-soak\r\n");
  if (!body.empty() || method == "POST") {
    r.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  r.append("\r\n").append(body);
  return r;
}

double MetricSum(std::string_view metrics, std::string_view name,
                 std::string_view label_filter) {
  double sum = 0;
  bool found = false;
  size_t pos = 0;
  while (pos < metrics.size()) {
    size_t eol = metrics.find('\n', pos);
    std::string_view line = metrics.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    pos = eol == std::string_view::npos ? metrics.size() : eol + 1;
    if (!line.starts_with(name) || line.size() <= name.size()) continue;
    char after = line[name.size()];
    if (after != ' ' && after != '{') continue;
    size_t space = line.rfind(' ');
    std::string_view labels = line.substr(name.size(), space - name.size());
    if (!label_filter.empty() && labels.find(label_filter) == std::string_view::npos) continue;
    sum += std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
    found = true;
  }
  return found ? sum : -1;
}

namespace {

/// Adds one QueryResults answer to 'out'; returns the origin-form nextUri (empty at the end).
std::string TakeAnswer(const Answer& answer, QueryOutcome* out) {
  nlohmann::json j = nlohmann::json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (answer.status != 200 || j.is_discarded() || !j.is_object()) {
    out->problem = "HTTP " + std::to_string(answer.status) + ": " + answer.body.substr(0, 200);
    return "";
  }
  out->state = j["stats"].value("state", "");
  if (j.contains("error")) out->error_name = j["error"].value("errorName", "");
  if (j.contains("data")) {
    if (out->rows == 0 && !j["data"].empty()) out->first_row = j["data"][0].dump();
    out->rows += static_cast<int64_t>(j["data"].size());
  }
  return j.contains("nextUri") ? loadgen::UriTarget(j["nextUri"].get<std::string>()) : "";
}

}  // namespace

QueryOutcome RunQuery(SoakConnection* conn, std::string_view sql, Clock::time_point deadline) {
  QueryOutcome out;
  Answer answer;
  if (!conn->Request("POST", "/v1/statement", sql, deadline, &answer)) {
    out.problem = "POST: " + conn->error();
    return out;
  }
  out.submitted = answer.status == 200;
  std::string next = TakeAnswer(answer, &out);
  for (int i = 0; !next.empty() && i < 10000; ++i) {
    answer = Answer();
    if (!conn->Request("GET", next, {}, deadline, &answer)) {
      out.problem = "GET " + next + ": " + conn->error();
      return out;
    }
    next = TakeAnswer(answer, &out);
  }
  if (!next.empty()) out.problem = "more than 10000 pages";
  return out;
}

}  // namespace qr::soak
