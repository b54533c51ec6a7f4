#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "soak/soak-http.h"
#include "util/mutex.h"

namespace qr::soak {

/// The misbehaviours the soak test injects.
enum class Fault {
  kDisconnectMidPage,     // a GET of a page sent, then the socket closed at once
  kDisconnectPartialRead, // a GET of a page sent, part of the answer read, socket closed
  kCancelRace,            // GET nextUri and DELETE sent together as a short query ends
  kSlowClient,            // a request written one byte at a time, still within the timeout
  kStalledClient,         // half a request header, then nothing: the server must close it
  kOversizedBody,         // POST longer than --max_statement_bytes: 413
  kOversizedHeader,       // header block longer than --max_header_bytes: 431
  kMalformedRequest,      // not HTTP: 400
  kIdleConnection,        // opened, never used: the server must close it
  // Resource attackers (issue 14; soak-attacks.cc):
  kNeverPolled,           // POSTed, never fetched: ABANDONED_QUERY after the short timeout
  kWideRow,               // 60 values of 16 MB in one row: an INSUFFICIENT_RESOURCES error
  kInstrBomb,             // instr() on multi-MB strings: finishes, with the right answer
  kHugeSort,              // a sort past the per-query spill quota: EXCEEDED_SPILL_LIMIT
  kReGet,                 // the answered page fetched again and again: the same answer
  kNumFaults
};
const char* FaultName(Fault fault);

/// What the fault injectors did and saw.
/// Thread-safety: all members are thread-safe (atomics; the problem list under its lock).
class FaultCounters {
 public:
  void Injected(Fault f) { injected_[static_cast<int>(f)].fetch_add(1); }
  int64_t injected(Fault f) const { return injected_[static_cast<int>(f)].load(); }
  /// Queries whose POST answered 200.
  std::atomic<int64_t> submitted{0};
  /// Outcomes of the cancel races: the GET saw the query finish / the cancel won.
  std::atomic<int64_t> race_finished{0};
  std::atomic<int64_t> race_canceled{0};
  /// Queries left behind on purpose after a disconnect (the idle-query timeout ends them).
  std::atomic<int64_t> abandoned{0};

  /// Records something the server did wrong ('what' names the fault and the numbers).
  void Problem(const std::string& what);
  int64_t problem_count() const { return problems_.load(); }
  std::vector<std::string> problem_examples() const;

 private:
  std::atomic<int64_t> injected_[static_cast<int>(Fault::kNumFaults)] = {};
  std::atomic<int64_t> problems_{0};
  mutable Mutex lock_;
  /// The first few problems, for the report.
  std::vector<std::string> examples_ QR_GUARDED_BY(lock_);
};

/// What the daemon under test was configured with (the injectors' expectations follow).
struct FaultOptions {
  boost::asio::ip::tcp::endpoint endpoint;
  std::string multi_page_sql;   // a result of several pages
  int64_t max_statement_bytes = 0;
  int64_t max_header_bytes = 0;
  std::chrono::seconds http_idle_timeout{0};
};

/// Raised once, when a phase ends. Every pause of the injectors is a wait on it, so they stop
/// the moment it is raised rather than after their current pause.
/// Thread-safety: thread-safe.
class StopSignal {
 public:
  void Raise() {
    MutexLock l(&mu_);
    raised_ = true;
    cv_.NotifyAll();
  }
  bool raised() const {
    MutexLock l(&mu_);
    return raised_;
  }
  /// Waits until Raise() or 'deadline'; true if raised.
  bool WaitUntil(Clock::time_point deadline) const {
    MutexLock l(&mu_);
    while (!raised_ && Clock::now() < deadline) cv_.WaitUntil(&mu_, deadline);
    return raised_;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool raised_ QR_GUARDED_BY(mu_) = false;
};

/// Helpers shared by the injectors (soak-faults.cc, soak-attacks.cc).
/// The deadline of one request or exchange: later, the server is stuck (a problem).
Clock::time_point Deadline();
std::string HostOf(const FaultOptions& o);
/// The id and origin-form nextUri of a QueryResults answer (empty if absent).
void ParseIds(const Answer& a, std::string* id, std::string* next);
/// POSTs 'sql'; true with the id and nextUri if the server accepted it (counted as submitted).
bool Submit(SoakConnection* c, const std::string& sql, const char* who, FaultCounters* counters,
            std::string* id, std::string* next);
/// GETs 'next' and replaces it with the answer's nextUri; false (problem recorded) on error.
bool Advance(SoakConnection* c, const char* who, FaultCounters* counters, std::string* next,
             Answer* a);

/// Runs every fault injector, each on its own thread with blocking sockets and deadlines, until
/// 'phase_over' is raised; returns once all of them have stopped (each iteration is bounded in
/// time).
void RunFaults(const FaultOptions& options, const StopSignal& phase_over,
               FaultCounters* counters);

}  // namespace qr::soak
