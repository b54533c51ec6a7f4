#pragma once

#include <string>
#include <utility>

#include "loadgen/loadgen-clients.h"

namespace qr::loadgen {

/// After a failed submission, a long query waits this long before it submits again.
inline constexpr std::chrono::milliseconds kResubmitPause{100};

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

}  // namespace qr::loadgen
