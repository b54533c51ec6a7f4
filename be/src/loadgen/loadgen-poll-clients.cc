#include "loadgen/loadgen-clients.h"

#include <memory>
#include <string>

#include "loadgen/loadgen-long-query.h"

// The clients of the poll and mixed modes, which work on the worker's long-running queries.

namespace qr::loadgen {

namespace {

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

}  // namespace

std::unique_ptr<Client> MakePollClient(Worker* worker) {
  return std::make_unique<PollClient>(worker);
}

std::unique_ptr<Client> MakeCancelClient(Worker* worker) {
  return std::make_unique<CancelClient>(worker);
}

}  // namespace qr::loadgen
