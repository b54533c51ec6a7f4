#include "loadgen/loadgen-clients.h"

#include "loadgen/loadgen-long-query.h"

#include <algorithm>
#include <utility>

namespace qr::loadgen {

namespace {

constexpr std::chrono::milliseconds kWatchdogPeriod{250};

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
  auto add = [&](int total, std::unique_ptr<Client> (*make)(Worker*)) {
    for (int i = share(total); i > 0; --i) clients_.push_back(make(this));
  };
  using Mode = Config::Mode;
  if (config.mode == Mode::kQueries || config.mode == Mode::kMixed) {
    add(config.clients, &MakeQueryClient);
  }
  if (config.mode == Mode::kPoll || config.mode == Mode::kMixed) {
    add(config.poll_clients, &MakePollClient);
    for (int i = share(config.long_queries); i > 0; --i) {
      long_queries_.push_back(std::make_unique<LongQuery>(this));
    }
  }
  if (config.mode == Mode::kMixed) add(config.cancel_clients, &MakeCancelClient);
  if (config.mode == Mode::kGet) add(config.clients, &MakeGetClient);
  if (config.mode == Mode::kNoisy) {
    attack_headers_ = "X-Trino-User: " + config.attack_user + "\r\nX-Trino-Source: " +
                      config.source + "-attacker\r\n";
    add(config.clients, &MakeQueryClient);
    if (config.attack != Attack::kNone) {
      add(config.attackers, &MakeAttackClient);
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
