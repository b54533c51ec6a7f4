#include "loadgen/loadgen-clients.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

namespace qr::loadgen {

namespace {

constexpr std::chrono::milliseconds kResubmitPause{100};
constexpr std::chrono::milliseconds kWatchdogPeriod{250};

int64_t MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

/// Rows in the "data" of one answer (a real parse: only used when rows are checked).
int64_t CountRows(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return -1;
  auto it = j.find("data");
  return it == j.end() ? 0 : static_cast<int64_t>(it->size());
}

}  // namespace

StatementAnswer ParseStatement(std::string_view body) {
  StatementAnswer a;
  a.state = QueryResultsState(body);
  if (auto next = FindJsonString(body, "nextUri")) a.next = UriTarget(*next);
  if (a.state == "FAILED") {
    a.error_name = std::string(FindJsonString(body, "errorName").value_or("no errorName"));
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Client

Client::Client(Worker* worker)
    : worker_(worker),
      conn_(worker->io(), worker->config().endpoint, worker->config().host,
            worker->common_headers(), worker->config().max_body_bytes, this),
      timer_(worker->io()) {}

Client::Client(Worker* worker, const std::string& headers, size_t max_body_bytes)
    : worker_(worker),
      conn_(worker->io(), worker->config().endpoint, worker->config().host, headers,
            max_body_bytes, this),
      timer_(worker->io()) {}

void Client::Send(RequestKind kind, std::string_view method, std::string_view target,
                  std::string_view body, std::string_view extra_headers) {
  kind_ = kind;
  sent_ = Clock::now();
  conn_.Send(method, target, body, extra_headers);
}

bool Client::Account(std::string_view error, const HttpAnswer& answer, unsigned expected_status) {
  Clock::time_point now = Clock::now();
  if (!error.empty()) {
    Error(std::string(error), {});
    return false;
  }
  if (kind_ == RequestKind::kPost && answer.status == 200) ++worker_->stats().statements_submitted;
  if (expected_status != 0 && answer.status != expected_status) {
    Error("HTTP " + std::to_string(answer.status), answer.body);
    return false;
  }
  if (worker_->run()->InWindow(now)) {
    worker_->stats().requests[static_cast<int>(kind_)].Record(MicrosBetween(sent_, now));
    worker_->stats().response_bytes += static_cast<int64_t>(answer.body.size());
  }
  return true;
}

void Client::Error(const std::string& what, std::string_view body) {
  worker_->stats().AddError(std::string(RequestKindName(kind_)) + ": " + what,
                            std::string(body.substr(0, 300)));
}

void Client::After(std::chrono::milliseconds delay, void (Client::*fn)()) {
  timer_.expires_after(delay);
  timer_.async_wait([this, fn](const boost::system::error_code& ec) {
    if (!ec) (this->*fn)();
  });
}

void Client::Finish() {
  finished_ = true;
  conn_.Close();
  worker_->OnClientFinished();
}

// ---------------------------------------------------------------------------------------------
// A long-running statement kept in flight (poll and mixed modes). It submits, GETs its first
// nextUri (Trino only dispatches a query then), and is then "live": poll clients look it up and
// advance its nextUri, one at a time (the lease). At the end it is canceled with DELETE.

class LongQuery : public Client {
 public:
  using Client::Client;

  void Start() override {
    if (cancel_requested_) return Done();
    phase_ = Phase::kSubmit;
    Send(RequestKind::kPost, "POST", "/v1/statement", worker_->config().long_sql,
         worker_->post_headers());
  }

  const std::string& id() const { return id_; }
  const std::string& next() const { return next_; }
  bool live() const { return phase_ == Phase::kLive; }
  /// Reserves the nextUri for one GET: concurrent GETs of one token would race (410 Gone).
  bool TryLease() {
    if (phase_ != Phase::kLive || leased_) return false;
    leased_ = true;
    return true;
  }
  /// Ends a lease with the nextUri of the answer.
  void Unlease(std::string next) {
    leased_ = false;
    next_ = std::move(next);
    if (cancel_requested_) Cancel();
  }
  /// The statement ended (it was not so long after all, or failed): submit it again.
  void Resubmit() {
    leased_ = false;
    ++worker_->stats().long_query_resubmits;
    Start();
  }
  /// Cancels once no request is in flight (now, or when the current exchange ends).
  void RequestCancel() {
    if (cancel_requested_) return;
    cancel_requested_ = true;
    if (phase_ == Phase::kLive && !leased_) Cancel();
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    switch (phase_) {
      case Phase::kSubmit:
      case Phase::kSettle: return OnSetupAnswer(error, answer);
      case Phase::kCancel:
        Account(error, answer, 204);
        return Done();
      default: return;
    }
  }

 private:
  enum class Phase { kIdle, kSubmit, kSettle, kLive, kCancel, kDone };

  void OnSetupAnswer(std::string_view error, const HttpAnswer& answer) {
    if (!Account(error, answer, 200)) return Retry();
    StatementAnswer s = ParseStatement(answer.body);
    if (s.state == "FAILED") {
      Error("long query FAILED (" + s.error_name + ")", answer.body);
      return Retry();
    }
    if (s.next.empty()) {
      if (phase_ == Phase::kSubmit || s.state != "FINISHED") {
        Error("no nextUri in state '" + std::string(s.state) + "'", answer.body);
        return Retry();
      }
      return Resubmit();
    }
    next_ = std::move(s.next);
    if (phase_ == Phase::kSubmit) {
      id_ = std::string(FindJsonString(answer.body, "id").value_or(""));
      if (id_.empty()) {
        Error("no id", answer.body);
        return Retry();
      }
      phase_ = Phase::kSettle;
      Send(RequestKind::kNext, "GET", next_);
      return;
    }
    phase_ = Phase::kLive;
    if (!ever_live_) {
      ever_live_ = true;
      worker_->OnLongQueryLive();
    }
    if (cancel_requested_) Cancel();
  }

  void Retry() {
    phase_ = Phase::kIdle;
    if (cancel_requested_) return Done();
    After(kResubmitPause, &Client::Start);
  }

  void Cancel() {
    phase_ = Phase::kCancel;
    Send(RequestKind::kCancel, "DELETE", next_);
  }

  void Done() {
    phase_ = Phase::kDone;
    conn_.Close();
    worker_->OnLongQueryCanceled();
  }

  Phase phase_ = Phase::kIdle;
  std::string id_;
  std::string next_;
  bool leased_ = false;
  bool ever_live_ = false;
  bool cancel_requested_ = false;
};

// ---------------------------------------------------------------------------------------------
// Runs --sql end to end, again and again: POST, then GET each nextUri until there is none.

class QueryClient : public Client {
 public:
  using Client::Client;

  void Start() override {
    if (worker_->run()->stopping()) return Finish();
    started_ = Clock::now();
    requests_ = 0;
    rows_ = 0;
    const Config& config = worker_->config();
    if (config.statements.empty()) {
      if (single_.sql.empty()) single_ = Statement{config.sql, config.expect_rows, ""};
      statement_ = &single_;
    } else {
      std::uniform_int_distribution<size_t> pick(0, config.statements.size() - 1);
      statement_ = &config.statements[pick(worker_->rng())];
    }
    Send(RequestKind::kPost, "POST", "/v1/statement", statement_->sql, worker_->post_headers());
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    ++requests_;
    if (canceling_) return Finish();  // the DELETE of Abandon(), whatever its answer
    const bool abandon = worker_->config().abandon_at_stop && worker_->run()->stopping();
    if (abandon && !error.empty()) return Abandon({});
    if (!Account(error, answer, 200)) return After(kErrorPause, &Client::Start);
    StatementAnswer s = ParseStatement(answer.body);
    if (s.state == "FAILED" && !statement_->expect_error.empty() &&
        s.error_name == statement_->expect_error && s.next.empty()) {
      ++worker_->stats().expected_failures;
      QueryDone();
      return Start();
    }
    if (s.state.empty() || s.state == "FAILED") {
      Error(s.state.empty() ? "answer without stats.state" : "query FAILED (" + s.error_name + ")",
            answer.body);
      return After(kErrorPause, &Client::Start);
    }
    if (statement_->expect_rows >= 0) rows_ += CountRows(answer.body);
    if (!s.next.empty() && abandon) return Abandon(s.next);
    if (!s.next.empty()) {
      if (requests_ >= worker_->config().max_requests_per_query) {
        Error("more than " + std::to_string(requests_) + " requests for one query", answer.body);
        return After(kErrorPause, &Client::Start);
      }
      return Send(RequestKind::kNext, "GET", s.next);
    }
    OnFinalAnswer(s, answer.body);
    Start();
  }

 private:
  void OnFinalAnswer(const StatementAnswer& s, std::string_view body) {
    if (kind_ == RequestKind::kPost) {
      Error("no nextUri", body);
    } else if (s.state != "FINISHED") {
      Error("final answer in state '" + std::string(s.state) + "'", body);
    } else if (!statement_->expect_error.empty()) {
      Error("finished, but expected to fail with " + statement_->expect_error, body);
    } else if (statement_->expect_rows >= 0 && rows_ != statement_->expect_rows) {
      Error("expected " + std::to_string(statement_->expect_rows) + " rows, got " +
                std::to_string(rows_), body);
    } else {
      QueryDone();
    }
  }

  void QueryDone() {
    Clock::time_point now = Clock::now();
    RunControl* run = worker_->run();
    if (!run->InWindow(now)) return;
    RunStats& stats = worker_->stats();
    stats.queries.Record(MicrosBetween(started_, now));
    stats.query_requests += requests_;
    stats.max_requests_per_query = std::max<int64_t>(stats.max_requests_per_query, requests_);
    stats.rows += rows_;
    if (run->CountQuery(worker_->config().max_queries)) run->Stop(now);
  }

  /// The window has ended with this query unfinished (abandon_at_stop): records its age at
  /// the end, cancels it with a DELETE of 'next' (if any) and stops.
  void Abandon(const std::string& next) {
    const Clock::time_point end = worker_->run()->end();
    if (started_ < end) worker_->stats().unfinished.Record(MicrosBetween(started_, end));
    if (next.empty()) return Finish();
    canceling_ = true;
    Send(RequestKind::kCancel, "DELETE", next);
  }

  Clock::time_point started_;
  bool canceling_ = false;
  const Statement* statement_ = nullptr;  // the one this query runs
  Statement single_;                      // 'sql' and 'expect_rows' without 'statements'
  int requests_ = 0;
  int64_t rows_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Looks up a random live long query (GET /v1/query/{id}), then GETs its nextUri if no other
// client holds it.

class PollClient : public Client {
 public:
  using Client::Client;

  void Start() override {
    if (worker_->run()->stopping()) return Finish();
    target_ = worker_->PickLongQuery();
    if (target_ == nullptr) return After(std::chrono::milliseconds(1), &Client::Start);
    id_ = target_->id();
    path_.assign("/v1/query/").append(id_);
    Send(RequestKind::kStatus, "GET", path_);
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    if (kind_ == RequestKind::kStatus) return OnStatus(error, answer);
    bool ok = Account(error, answer, 200);
    if (!ok) {
      target_->Unlease(target_->next());
      return After(kErrorPause, &Client::Start);
    }
    StatementAnswer s = ParseStatement(answer.body);
    if (s.state == "FAILED") {
      Error("long query FAILED (" + s.error_name + ")", answer.body);
      target_->Resubmit();
    } else if (s.next.empty()) {
      if (s.state != "FINISHED") Error("no nextUri in state '" + std::string(s.state) + "'", answer.body);
      target_->Resubmit();
    } else {
      target_->Unlease(std::move(s.next));
    }
    Start();
  }

 private:
  void OnStatus(std::string_view error, const HttpAnswer& answer) {
    if (!Account(error, answer, 200)) return After(kErrorPause, &Client::Start);
    if (answer.body.find(id_) == std::string_view::npos) {
      Error("answer does not name query " + id_, answer.body);
    } else if (FindJsonString(answer.body, "state").value_or("") == "FAILED") {
      Error("long query FAILED", answer.body);
    }
    if (!worker_->config().poll_next || !target_->TryLease()) return Start();
    next_target_.assign(target_->next()).append(worker_->max_wait_query());
    Send(RequestKind::kNext, "GET", next_target_);
  }

  LongQuery* target_ = nullptr;
  std::string id_, path_, next_target_;
};

// ---------------------------------------------------------------------------------------------
// Mixed mode: submits --long_sql, GETs one answer, cancels with DELETE nextUri (204), and GETs
// that nextUri again, which must answer FAILED/USER_CANCELED (or 404/410 once the query has
// left the server's completed-query log).

class CancelClient : public Client {
 public:
  using Client::Client;

  void Start() override {
    if (worker_->run()->stopping()) return Finish();
    started_ = Clock::now();
    Send(RequestKind::kPost, "POST", "/v1/statement", worker_->config().long_sql,
         worker_->post_headers());
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    const unsigned expected = kind_ == RequestKind::kCancel ? 204 : followup_ ? 0 : 200;
    if (!Account(error, answer, expected)) return After(kErrorPause, &Client::Start);
    if (kind_ == RequestKind::kCancel) {
      followup_ = true;
      return Send(RequestKind::kNext, "GET", next_);
    }
    if (followup_) return OnFollowup(answer);
    StatementAnswer s = ParseStatement(answer.body);
    if (s.next.empty() || s.state == "FAILED") {
      Error("no nextUri in state '" + std::string(s.state) + "' " + s.error_name, answer.body);
      return After(kErrorPause, &Client::Start);
    }
    next_ = std::move(s.next);
    if (kind_ == RequestKind::kPost) {
      return Send(RequestKind::kNext, "GET", next_ + worker_->max_wait_query());
    }
    Send(RequestKind::kCancel, "DELETE", next_);
  }

 private:
  void OnFollowup(const HttpAnswer& answer) {
    followup_ = false;
    if (answer.status == 404 || answer.status == 410) {
      ++worker_->stats().cancel_followups_evicted;
    } else if (answer.status != 200) {
      Error("HTTP " + std::to_string(answer.status) + " after cancel", answer.body);
    } else {
      StatementAnswer s = ParseStatement(answer.body);
      if (s.state != "FAILED" || s.error_name != "USER_CANCELED" || !s.next.empty()) {
        Error("after cancel: state '" + std::string(s.state) + "' " + s.error_name, answer.body);
      }
    }
    Clock::time_point now = Clock::now();
    if (worker_->run()->InWindow(now)) worker_->stats().cancels.Record(MicrosBetween(started_, now));
    Start();
  }

  Clock::time_point started_;
  std::string next_;
  bool followup_ = false;
};

// ---------------------------------------------------------------------------------------------
// GETs one path again and again (the anchor: a static file served by nginx).

class GetClient : public Client {
 public:
  using Client::Client;

  void Start() override {
    if (worker_->run()->stopping()) return Finish();
    Send(RequestKind::kGet, "GET", worker_->config().get_path);
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    if (!Account(error, answer, worker_->config().get_expect_status)) {
      return After(kErrorPause, &Client::Start);
    }
    Start();
  }
};

// ---------------------------------------------------------------------------------------------
// Worker

Worker::Worker(const Config& config, RunControl* run, int index, int num_workers)
    : config_(config), run_(run), io_(1), rng_(0x9e3779b97f4a7c15ULL * (index + 1)),
      watchdog_(io_) {
  common_headers_ = "X-Trino-User: " + config.user + "\r\nX-Trino-Source: " + config.source +
                    "\r\n";
  if (!config.catalog.empty()) post_headers_ += "X-Trino-Catalog: " + config.catalog + "\r\n";
  if (!config.schema.empty()) post_headers_ += "X-Trino-Schema: " + config.schema + "\r\n";
  if (!config.poll_max_wait.empty()) max_wait_query_ = "?maxWait=" + config.poll_max_wait;

  // This worker's share of each kind of client.
  auto share = [&](int total) { return total / num_workers + (index < total % num_workers); };
  auto add = [&]<typename T>(int total) {
    for (int i = share(total); i > 0; --i) clients_.push_back(std::make_unique<T>(this));
  };
  using Mode = Config::Mode;
  if (config.mode == Mode::kQueries || config.mode == Mode::kMixed) {
    add.operator()<QueryClient>(config.clients);
  }
  if (config.mode == Mode::kPoll || config.mode == Mode::kMixed) {
    add.operator()<PollClient>(config.poll_clients);
    for (int i = share(config.long_queries); i > 0; --i) {
      long_queries_.push_back(std::make_unique<LongQuery>(this));
    }
  }
  if (config.mode == Mode::kMixed) add.operator()<CancelClient>(config.cancel_clients);
  if (config.mode == Mode::kGet) add.operator()<GetClient>(config.clients);
  if (config.mode == Mode::kNoisy) {
    attack_headers_ = "X-Trino-User: " + config.attack_user + "\r\nX-Trino-Source: " +
                      config.source + "-attacker\r\n";
    add.operator()<QueryClient>(config.clients);
    if (config.attack != Attack::kNone) {
      for (int i = share(config.attackers); i > 0; --i) clients_.push_back(MakeAttackClient(this));
    }
  }
}

Worker::~Worker() = default;

void Worker::Run() {
  if (long_queries_.empty()) {
    OnLongQueryLive();
  } else {
    for (auto& q : long_queries_) q->Start();
  }
  Watchdog();
  io_.run();
  for (auto& c : clients_) stats_.connection_retries += c->connection().retries();
  for (auto& q : long_queries_) stats_.connection_retries += q->connection().retries();
}

LongQuery* Worker::PickLongQuery() {
  if (long_queries_.empty()) return nullptr;
  std::uniform_int_distribution<size_t> pick(0, long_queries_.size() - 1);
  for (size_t tries = 0; tries < 2 * long_queries_.size(); ++tries) {
    LongQuery* q = long_queries_[pick(rng_)].get();
    if (q->live()) return q;
  }
  return nullptr;
}

void Worker::OnLongQueryLive() {
  if (started_clients_ || ++live_long_queries_ < static_cast<int>(long_queries_.size())) return;
  started_clients_ = true;
  running_clients_ = static_cast<int>(clients_.size());
  ready_.store(true, std::memory_order_release);
  for (auto& c : clients_) c->Start();
  if (clients_.empty()) OnClientFinished();
}

void Worker::OnClientFinished() {
  if (--running_clients_ > 0) return;
  for (auto& q : long_queries_) q->RequestCancel();
}

void Worker::OnLongQueryCanceled() { ++canceled_long_queries_; }

void Worker::Watchdog() {
  Clock::time_point deadline = Clock::now() - config_.request_timeout;
  if (config_.abandon_at_stop && run_->stopping()) {
    deadline = std::max(deadline, Clock::now() - config_.stop_grace);
  }
  for (auto& c : clients_) c->connection().ExpireIfSentBefore(deadline);
  for (auto& q : long_queries_) q->connection().ExpireIfSentBefore(deadline);
  // Stopped before the clients could start (the long queries never all went live).
  if (!started_clients_ && run_->stopping()) {
    for (auto& q : long_queries_) q->RequestCancel();
  }
  bool clients_done = started_clients_ ? running_clients_ <= 0 : run_->stopping();
  if (clients_done && canceled_long_queries_ == static_cast<int>(long_queries_.size())) return;
  watchdog_.expires_after(kWatchdogPeriod);
  watchdog_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Watchdog();
  });
}

}  // namespace qr::loadgen
