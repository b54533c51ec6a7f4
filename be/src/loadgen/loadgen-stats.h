#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qr::loadgen {

/// Latencies in microseconds in log-linear buckets: exact below 128 us, then 64 buckets per
/// power of two (under 1.6% error), up to about 2^40 us. Constant memory for any run length.
class Histogram {
 public:
  Histogram();
  void Record(int64_t micros);
  void Merge(const Histogram& other);
  int64_t count() const { return count_; }
  int64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / count_; }
  /// The value at quantile 'q' (0..1): the midpoint of its bucket, capped at max().
  int64_t Percentile(double q) const;

 private:
  static size_t Index(int64_t micros);
  static int64_t BucketMid(size_t index);
  std::vector<int64_t> buckets_;
  int64_t count_ = 0;
  int64_t sum_ = 0;
  int64_t max_ = 0;
};

/// What a request was for, so that each kind gets its own latency distribution.
enum class RequestKind { kPost, kNext, kStatus, kCancel, kGet, kNumKinds };
const char* RequestKindName(RequestKind kind);

/// Everything one I/O thread counted inside the measurement window.
/// Thread-safety: none; each I/O thread owns one, merged after the threads have stopped.
struct RunStats {
  Histogram requests[static_cast<int>(RequestKind::kNumKinds)];
  /// End-to-end latency of statements run to completion (queries and mixed modes).
  Histogram queries;
  /// Submit, one GET, DELETE, then the GET that reports the cancellation (mixed mode).
  Histogram cancels;
  /// Noisy mode: statements still running when the window ended, each recorded with its age
  /// then (a lower bound of its latency).
  Histogram unfinished;
  /// Noisy mode: what the attackers got, by outcome ("FAILED EXCEEDED_SPILL_LIMIT", "posted",
  /// "reget HTTP 200", ...), counted from their start (warm-up included), and their requests.
  std::map<std::string, int64_t> attack_outcomes;
  int64_t attack_requests = 0;
  int64_t query_requests = 0;      // requests made by completed queries
  int64_t max_requests_per_query = 0;
  int64_t rows = 0;                // rows received by completed queries
  int64_t response_bytes = 0;      // bodies of every counted request
  /// POSTs of a statement answered 200, in or out of the window: the queries the server has
  /// accepted (what its qr_queries_submitted_total must count).
  int64_t statements_submitted = 0;
  /// Completed queries whose statement failed as its Statement::expect_error said it must.
  int64_t expected_failures = 0;
  int64_t long_query_resubmits = 0;
  int64_t cancel_followups_evicted = 0;
  /// Requests resent after the server closed an idle kept-alive connection (not errors).
  int64_t connection_retries = 0;
  std::map<std::string, int64_t> errors;
  /// The first few error details, for the report.
  std::vector<std::string> error_examples;

  int64_t total_requests() const;
  void Merge(const RunStats& other);
  void AddError(const std::string& kind, const std::string& detail);
};

/// Kernel-side counters of a set of processes (the server under test), from /proc, plus its
/// syscalls from perf tracepoint counters when the kernel allows them.
struct ProcSample {
  double user_s = 0, sys_s = 0;
  int64_t voluntary_switches = 0, involuntary_switches = 0;
  int64_t rss_kb = 0, hwm_kb = 0;
  int threads = 0;
  /// Context switches (voluntary + involuntary) by thread name with trailing digits dropped
  /// ("http-io-1" -> "http-io-"), to see which threads switch.
  std::map<std::string, int64_t> switches_by_thread;
  bool ok = false;
  std::string error;
};
ProcSample ReadProcSample(const std::vector<int>& pids);
int64_t ReadRssKb(const std::vector<int>& pids);

/// Counts the syscalls of every thread of 'pids' that exists at Start() (perf_event_open on
/// the raw_syscalls:sys_enter tracepoint, one counter per thread).
class SyscallCounter {
 public:
  ~SyscallCounter();
  /// False (with 'error' set) if the kernel refuses (not root, perf_event_paranoid, no tracefs).
  bool Start(const std::vector<int>& pids, std::string* error);
  /// Syscalls since Start(); -1 if not started.
  int64_t Read() const;
  void Stop();

 private:
  std::vector<int> fds_;
};

}  // namespace qr::loadgen
