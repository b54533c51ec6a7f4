#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace qr::soak {

using Clock = std::chrono::steady_clock;

/// One HTTP answer read by SoakConnection.
struct Answer {
  unsigned status = 0;
  std::string body;
};

/// A client connection of the soak test that can misbehave on purpose: it writes raw bytes
/// (whole requests, a request one byte at a time, garbage), reads answers with a deadline
/// (parsed by the loadgen's LeanResponseParser), reads part of an answer, or waits for the
/// server to close it. Every operation is bounded by a deadline: nothing blocks forever.
/// Thread-safety: not thread-safe; one thread uses a connection.
class SoakConnection {
 public:
  explicit SoakConnection(boost::asio::ip::tcp::endpoint endpoint);
  ~SoakConnection();
  SoakConnection(const SoakConnection&) = delete;
  SoakConnection& operator=(const SoakConnection&) = delete;

  /// Connects (again, if closed); false with 'error()' set on failure.
  bool Connect();
  /// Writes all of 'data' before 'deadline'.
  bool Write(std::string_view data, Clock::time_point deadline);
  /// Reads one complete answer before 'deadline'.
  bool ReadAnswer(Clock::time_point deadline, Answer* answer);
  /// Reads at most 'max_bytes' (at least one) of whatever the server sends next.
  bool ReadSome(size_t max_bytes, Clock::time_point deadline);
  /// True once the server has closed the connection (EOF or reset) before 'deadline'; bytes it
  /// sends before that are discarded.
  bool WaitClosedByServer(Clock::time_point deadline);
  void Close();
  bool open() const { return socket_.is_open(); }
  const std::string& error() const { return error_; }

  /// Writes a request (Host and X-Trino-User included) and reads its answer.
  bool Request(std::string_view method, std::string_view target, std::string_view body,
               Clock::time_point deadline, Answer* answer);

 private:
  /// Waits until the socket is readable ('events' POLLIN) or writable (POLLOUT).
  bool Wait(short events, Clock::time_point deadline);
  /// Appends what is available to 'pending_' (waiting up to 'deadline'); 0 on EOF, -1 on error.
  int64_t Fill(Clock::time_point deadline, size_t max_bytes = SIZE_MAX);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  const boost::asio::ip::tcp::endpoint endpoint_;
  std::string pending_;  // bytes read but not yet parsed
  bool closed_before_answer_ = false;  // the last ReadAnswer() saw EOF before any byte
  std::string error_;
};

/// The request line and headers of a request from the soak test's user ("soak").
std::string FormatRequest(std::string_view method, std::string_view target,
                          std::string_view host, std::string_view body);

/// Sums the samples of metric 'name' (Prometheus text) whose labels contain 'label_filter'
/// (e.g. "registry=\"executor\""); -1 if no sample matched.
double MetricSum(std::string_view metrics, std::string_view name,
                 std::string_view label_filter = {});

/// A Trino statement run to its end through SoakConnection: state, rows, error name.
struct QueryOutcome {
  bool submitted = false;  // the POST answered 200
  std::string state;       // final stats.state
  std::string error_name;
  int64_t rows = 0;
  std::string first_row;   // the first row as JSON text
  std::string problem;     // what went wrong with the exchange itself; empty if nothing
};
QueryOutcome RunQuery(SoakConnection* conn, std::string_view sql, Clock::time_point deadline);

}  // namespace qr::soak
