#include "soak/soak-faults.h"

#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "loadgen/loadgen-http.h"
#include "soak/soak-attacks.h"

namespace qr::soak {

namespace {

// A request or an exchange that takes longer than this is a problem (the server is stuck).
constexpr std::chrono::seconds kExchangeTimeout{20};
// Pauses between injections of one kind: the faults are a steady drizzle over the normal
// traffic, not a flood that would only measure admission control.
constexpr std::chrono::milliseconds kDisconnectPause{200};
constexpr std::chrono::milliseconds kRacePause{20};
constexpr std::chrono::milliseconds kBadRequestPause{50};
constexpr std::chrono::milliseconds kSlowBytePause{10};
// The resource attackers: light ones often, the ones that make the daemon work hard (a sort
// to the spill quota, a row SQLite expands to its heap limit) one at a time, 2 s apart.
constexpr std::chrono::milliseconds kNeverPollPause{200};
constexpr std::chrono::milliseconds kAttackPause{300};
constexpr std::chrono::milliseconds kHeavyAttackPause{2000};
constexpr int kIdleConnectionsPerBatch = 8;
// Each injector also stops after this many rounds, whatever the time.
constexpr int kMaxRounds = 100000;

}  // namespace

Clock::time_point Deadline() { return Clock::now() + kExchangeTimeout; }

std::string HostOf(const FaultOptions& o) {
  return o.endpoint.address().to_string() + ":" + std::to_string(o.endpoint.port());
}

void ParseIds(const Answer& a, std::string* id, std::string* next) {
  id->assign(loadgen::FindJsonString(a.body, "id").value_or(""));
  auto uri = loadgen::FindJsonString(a.body, "nextUri");
  *next = uri ? loadgen::UriTarget(*uri) : "";
}

bool Submit(SoakConnection* c, const std::string& sql, const char* who, FaultCounters* counters,
            std::string* id, std::string* next) {
  Answer a;
  if (!c->Request("POST", "/v1/statement", sql, Deadline(), &a)) {
    counters->Problem(std::string(who) + ": POST failed: " + c->error());
    return false;
  }
  if (a.status == 200) counters->submitted.fetch_add(1);
  ParseIds(a, id, next);
  if (a.status != 200 || id->empty() || next->empty()) {
    counters->Problem(std::string(who) + ": POST answered " + std::to_string(a.status) + ": " +
                      a.body.substr(0, 200));
    return false;
  }
  return true;
}

bool Advance(SoakConnection* c, const char* who, FaultCounters* counters, std::string* next,
             Answer* a) {
  *a = Answer();
  std::string id;
  if (!c->Request("GET", *next, {}, Deadline(), a) || a->status != 200) {
    counters->Problem(std::string(who) + ": GET " + *next + " -> " +
                      (a->status ? std::to_string(a->status) : c->error()));
    return false;
  }
  ParseIds(*a, &id, next);
  return true;
}

namespace {

void DeleteQuery(const FaultOptions& o, const std::string& id, FaultCounters* counters) {
  SoakConnection c(o.endpoint);
  Answer a;
  if (!c.Request("DELETE", "/v1/query/" + id, {}, Deadline(), &a) || a.status != 204) {
    counters->Problem("disconnect: DELETE /v1/query/" + id + " -> " +
                      (a.status ? std::to_string(a.status) : c.error()));
  }
}

// A multi-page query whose client goes away in the middle of a page: right after sending the
// GET (even iterations) or after reading a few bytes of the answer (odd ones). Half of them are
// then canceled from a new connection, the other half are abandoned for the idle-query timeout.
void DisconnectMidPage(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters) {
  SoakConnection c(o.endpoint);
  std::string id, next;
  Answer a;
  if (!Submit(&c, o.multi_page_sql, "disconnect", counters, &id, &next)) return;
  if (!Advance(&c, "disconnect", counters, &next, &a)) return;
  if (next.empty()) return counters->Problem("disconnect: multi-page query ended on page 1");
  std::string host = HostOf(o);
  if (!c.Write(FormatRequest("GET", next, host, {}), Deadline())) {
    return counters->Problem("disconnect: write: " + c.error());
  }
  const bool partial = i % 2 == 1;
  if (partial && !c.ReadSome(100, Deadline())) {
    return counters->Problem("disconnect: no answer to a page GET: " + c.error());
  }
  c.Close();
  counters->Injected(partial ? Fault::kDisconnectPartialRead : Fault::kDisconnectMidPage);
  if (i % 4 < 2) {
    DeleteQuery(o, id, counters);
  } else {
    counters->abandoned.fetch_add(1);
  }
}

/// Follows 'next' (from answer 'a') to the end on 'c'; the query must end FINISHED or canceled.
void FinishRace(SoakConnection* c, std::string next, Answer a, FaultCounters* counters) {
  for (int pages = 0; !next.empty(); ++pages) {
    if (pages > 100) return counters->Problem("cancel race: more than 100 pages");
    if (!Advance(c, "cancel race", counters, &next, &a)) return;
  }
  std::string_view state = loadgen::QueryResultsState(a.body);
  std::string_view error = loadgen::FindJsonString(a.body, "errorName").value_or("");
  if (state == "FINISHED") {
    counters->race_finished.fetch_add(1);
  } else if (state == "FAILED" && error == "USER_CANCELED") {
    counters->race_canceled.fetch_add(1);
  } else {
    counters->Problem("cancel race: final state " + std::string(state) + " " +
                      std::string(error) + ": " + a.body.substr(0, 200));
  }
}

// A short query; after 0 or 1 pages the next GET and a DELETE (of the nextUri, or of
// /v1/query/{id}) go out together on two connections, so the cancel lands while the query
// completes. The DELETE must answer 204, and the query must end FINISHED or USER_CANCELED.
void CancelRace(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters) {
  SoakConnection get(o.endpoint), del(o.endpoint);
  std::string id, next;
  Answer a, d;
  if (!Submit(&get, "SELECT n_name FROM nation WHERE n_nationkey < 3", "cancel race", counters,
              &id, &next)) {
    return;
  }
  // Race the GET that starts the query (even pairs) or the one that completes it (odd pairs).
  if ((i / 2) % 2 == 1 && !Advance(&get, "cancel race", counters, &next, &a)) return;
  if (next.empty()) return counters->Problem("cancel race: ended before its last page");
  const std::string host = HostOf(o);
  const std::string target = i % 2 == 0 ? next : "/v1/query/" + id;
  if (!get.Write(FormatRequest("GET", next, host, {}), Deadline()) ||
      !del.Write(FormatRequest("DELETE", target, host, {}), Deadline())) {
    return counters->Problem("cancel race: write: " + get.error() + del.error());
  }
  counters->Injected(Fault::kCancelRace);
  if (!del.ReadAnswer(Deadline(), &d) || d.status != 204) {
    counters->Problem("cancel race: DELETE " + target + " -> " +
                      (d.status ? std::to_string(d.status) : del.error()));
  }
  if (!get.ReadAnswer(Deadline(), &a) || a.status != 200) {
    return counters->Problem("cancel race: racing GET -> " +
                             (a.status ? std::to_string(a.status) : get.error()));
  }
  ParseIds(a, &id, &next);
  FinishRace(&get, next, std::move(a), counters);
}

// Even iterations: GET /v1/info written one byte at a time (well within the server's idle
// timeout), which must still be answered 200. Odd ones: half a request, then silence, which
// the server must close within its idle timeout (plus slack).
void SlowClient(const FaultOptions& o, const StopSignal& phase_over, int i,
                FaultCounters* counters) {
  SoakConnection c(o.endpoint);
  if (!c.Connect()) return counters->Problem("slow client: " + c.error());
  const std::string request = FormatRequest("GET", "/v1/info", HostOf(o), {});
  const bool stall = i % 2 == 1;
  const size_t bytes = stall ? request.size() / 2 : request.size();
  for (size_t b = 0; b < bytes; ++b) {
    if (!c.Write(std::string_view(request).substr(b, 1), Deadline())) {
      return counters->Problem("slow client: closed after " + std::to_string(b) + " bytes: " +
                               c.error());
    }
    // The pacing is the fault; the wait ends early only when the phase does.
    if (phase_over.WaitUntil(Clock::now() + kSlowBytePause)) return;
  }
  if (stall) {
    counters->Injected(Fault::kStalledClient);
    if (!c.WaitClosedByServer(Clock::now() + o.http_idle_timeout + kExchangeTimeout)) {
      counters->Problem("stalled client: not closed by the server: " + c.error());
    }
    return;
  }
  counters->Injected(Fault::kSlowClient);
  Answer a;
  if (!c.ReadAnswer(Deadline(), &a) || a.status != 200) {
    counters->Problem("slow client: GET /v1/info -> " +
                      (a.status ? std::to_string(a.status) : c.error()));
  }
}

// Requests the server must refuse with a status, in turn: a body over --max_statement_bytes
// (413), a header block over --max_header_bytes (431), two malformed requests (400).
void BadRequest(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters) {
  const std::string host = HostOf(o);
  std::string request;
  unsigned expected = 400;
  Fault fault = Fault::kMalformedRequest;
  switch (i % 4) {
    case 0:
      request = FormatRequest("POST", "/v1/statement", host,
                              "SELECT '" + std::string(o.max_statement_bytes, 'x') + "'");
      expected = 413;
      fault = Fault::kOversizedBody;
      break;
    case 1:
      request = FormatRequest("GET", "/v1/info", host, {});
      request.insert(request.find("\r\n") + 2,
                     "X-Pad: " + std::string(o.max_header_bytes, 'p') + "\r\n");
      expected = 431;
      fault = Fault::kOversizedHeader;
      break;
    case 2: request = "NOT AN HTTP REQUEST\r\n\r\n"; break;
    default: request = "GET /v1/info HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: x\r\n\r\n";
  }
  SoakConnection c(o.endpoint);
  Answer a;
  counters->Injected(fault);
  if (!c.Write(request, Deadline()) || !c.ReadAnswer(Deadline(), &a) || a.status != expected) {
    counters->Problem(std::string(FaultName(fault)) + ": expected " + std::to_string(expected) +
                      ", got " + (a.status ? std::to_string(a.status) : c.error()));
  }
}

// A batch of connections opened and never used; the server must close every one of them
// within its idle timeout (plus slack).
void IdleConnections(const FaultOptions& o, const StopSignal&, int, FaultCounters* counters) {
  std::vector<std::unique_ptr<SoakConnection>> idle;
  for (int k = 0; k < kIdleConnectionsPerBatch; ++k) {
    idle.push_back(std::make_unique<SoakConnection>(o.endpoint));
    if (!idle.back()->Connect()) return counters->Problem("idle: " + idle.back()->error());
    counters->Injected(Fault::kIdleConnection);
  }
  const Clock::time_point deadline = Clock::now() + o.http_idle_timeout + kExchangeTimeout;
  for (auto& c : idle) {
    if (!c->WaitClosedByServer(deadline)) {
      counters->Problem("idle connection not closed by the server: " + c->error());
    }
  }
}

using Injector = void (*)(const FaultOptions&, const StopSignal&, int, FaultCounters*);

/// Runs 'inject' again and again, 'pause' apart, until 'phase_over' is raised.
void Loop(Injector inject, std::chrono::milliseconds pause, const FaultOptions& o,
          const StopSignal& phase_over, FaultCounters* counters) {
  for (int i = 0; i < kMaxRounds && !phase_over.raised(); ++i) {
    inject(o, phase_over, i, counters);
    if (phase_over.WaitUntil(Clock::now() + pause)) return;
  }
}

}  // namespace

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kDisconnectMidPage: return "disconnect_after_get";
    case Fault::kDisconnectPartialRead: return "disconnect_mid_answer";
    case Fault::kCancelRace: return "cancel_race";
    case Fault::kSlowClient: return "slow_client";
    case Fault::kStalledClient: return "stalled_client";
    case Fault::kOversizedBody: return "oversized_body_413";
    case Fault::kOversizedHeader: return "oversized_header_431";
    case Fault::kMalformedRequest: return "malformed_400";
    case Fault::kIdleConnection: return "idle_connection";
    case Fault::kNeverPolled: return "never_polled";
    case Fault::kWideRow: return "wide_row";
    case Fault::kInstrBomb: return "instr_bomb";
    case Fault::kHugeSort: return "huge_sort";
    case Fault::kReGet: return "reget_answered_page";
    case Fault::kNumFaults: break;
  }
  return "?";
}

void FaultCounters::Problem(const std::string& what) {
  problems_.fetch_add(1);
  MutexLock l(&lock_);
  if (examples_.size() < 20) examples_.push_back(what);
}

std::vector<std::string> FaultCounters::problem_examples() const {
  MutexLock l(&lock_);
  return examples_;
}

void RunFaults(const FaultOptions& o, const StopSignal& phase_over, FaultCounters* counters) {
  const std::pair<Injector, std::chrono::milliseconds> injectors[] = {
      {&DisconnectMidPage, kDisconnectPause}, {&CancelRace, kRacePause},
      {&SlowClient, kRacePause},              {&SlowClient, kRacePause},
      {&BadRequest, kBadRequestPause},        {&IdleConnections, kRacePause},
      // Resource attackers (soak-attacks.cc).
      {&NeverPoll, kNeverPollPause},          {&WideRow, kHeavyAttackPause},
      {&InstrBomb, kAttackPause},             {&HugeSort, kHeavyAttackPause},
      {&ReGet, kAttackPause},
  };
  std::vector<std::thread> threads;
  for (const auto& [inject, pause] : injectors) {
    threads.emplace_back(&Loop, inject, pause, std::cref(o), std::cref(phase_over), counters);
  }
  for (auto& t : threads) t.join();
}

}  // namespace qr::soak
