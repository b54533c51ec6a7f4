#include "loadgen/loadgen-clients.h"

#include <string>
#include <utility>

// The noisy mode's attackers (docs/benchmarks.md, "Noisy neighbours").

namespace qr::loadgen {

namespace {

constexpr std::pair<Attack, const char*> kAttackNames[] = {
    {Attack::kNone, "none"},         {Attack::kNeverPoll, "never-poll"},
    {Attack::kWideRow, "wide-row"},  {Attack::kInstrBomb, "instr-bomb"},
    {Attack::kHugeSort, "huge-sort"}, {Attack::kReget, "reget"},
    {Attack::kSlowFetch, "slow-fetch"},
};

}  // namespace

const char* AttackName(Attack attack) {
  for (const auto& [a, name] : kAttackNames) {
    if (a == attack) return name;
  }
  return "?";
}

bool ParseAttack(std::string_view name, Attack* attack) {
  for (const auto& [a, n] : kAttackNames) {
    if (name == n) {
      *attack = a;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Noisy mode: one attacker of the kind Config::attack names, as Config::attack_user, again and
// again until the window ends. Whatever it gets (errors included) is an outcome counted in
// RunStats::attack_outcomes, never an error of the run. At the end it cancels the query it
// holds, if any (never-poll leaves its queries to the server's abandoned-query timeout).

class AttackClient final : public Client {
 public:
  explicit AttackClient(Worker* worker)
      : Client(worker, worker->attack_headers(), worker->config().attack_max_body_bytes) {}

  void Start() override {
    if (worker_->run()->stopping()) return Finish();
    phase_ = Phase::kRun;
    next_.clear();
    Fetch(RequestKind::kPost, "/v1/statement");
  }

  void OnHttp(std::string_view error, const HttpAnswer& answer) override {
    ++worker_->stats().attack_requests;
    if (phase_ == Phase::kCancel) return Finish();
    const bool stopping = worker_->run()->stopping();
    const std::string prefix = phase_ == Phase::kReget ? "reget " : "";
    if (!error.empty() || answer.status != 200) {
      Count(prefix + (error.empty() ? "HTTP " + std::to_string(answer.status) : std::string(error)));
      if (stopping) return Cancel();
      next_.clear();  // refused or cut off: start over with a new query
      return After(kErrorPause, &Client::Start);
    }
    const Attack attack = worker_->config().attack;
    if (attack == Attack::kNeverPoll) {
      Count("posted (200)");
      return After(worker_->config().attack_interval, &Client::Start);
    }
    StatementAnswer s = ParseStatement(answer.body);
    if (s.state == "FAILED" || s.next.empty()) {
      std::string outcome = s.state == "FAILED" ? "FAILED " + s.error_name + "/" +
                                std::string(FindJsonString(answer.body, "errorType").value_or("?"))
                                                : std::string(s.state);
      Count(prefix + outcome);
      return Start();  // the query ended: submit the next one
    }
    if (phase_ == Phase::kReget) {
      Count("reget answered again (200)");
      next_ = std::move(s.next);
      return stopping ? Cancel() : Fetch(RequestKind::kNext, answered_);
    }
    next_ = std::move(s.next);
    if (stopping) return Cancel();
    const bool page = answer.body.find("\"data\":") != std::string_view::npos;
    if (page && kind_ == RequestKind::kNext && attack == Attack::kReget) {
      Count("first page");
      phase_ = Phase::kReget;
      answered_ = target_;
      return Fetch(RequestKind::kNext, answered_);
    }
    if (page && kind_ == RequestKind::kNext && attack == Attack::kSlowFetch) {
      Count("first page, then held");
      return Hold();
    }
    Fetch(RequestKind::kNext, next_);
  }

 private:
  enum class Phase { kRun, kReget, kCancel };

  /// POSTs the attack statement (a POST) or GETs 'target'.
  void Fetch(RequestKind kind, const std::string& target) {
    target_ = target;
    if (kind == RequestKind::kPost) {
      Send(kind, "POST", target_, worker_->config().attack_sql, worker_->post_headers());
    } else {
      Send(kind, "GET", target_);
    }
  }

  /// Keeps the query unfetched until the window ends.
  void Hold() {
    if (worker_->run()->stopping()) return Cancel();
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Hold();
    });
  }

  /// Cancels the query in hand (DELETE of its nextUri) and stops; stops at once if none.
  void Cancel() {
    if (next_.empty()) return Finish();
    phase_ = Phase::kCancel;
    Send(RequestKind::kCancel, "DELETE", next_);
  }

  void Count(const std::string& outcome) { ++worker_->stats().attack_outcomes[outcome]; }

  Phase phase_ = Phase::kRun;
  std::string next_;      // the nextUri of the query in hand; empty if none
  std::string target_;    // the target of the request in flight
  std::string answered_;  // reget: the nextUri whose answer held the first page
};

std::unique_ptr<Client> MakeAttackClient(Worker* worker) {
  return std::make_unique<AttackClient>(worker);
}

}  // namespace qr::loadgen
