#include "loadgen/loadgen-clients.h"

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

// The statement clients of the queries and noisy modes, and the GET client of the get mode.

namespace qr::loadgen {

namespace {

/// Rows in the "data" of one answer (a real parse: only used when rows are checked).
int64_t CountRows(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return -1;
  auto it = j.find("data");
  return it == j.end() ? 0 : static_cast<int64_t>(it->size());
}

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

}  // namespace

std::unique_ptr<Client> MakeQueryClient(Worker* worker) {
  return std::make_unique<QueryClient>(worker);
}

std::unique_ptr<Client> MakeGetClient(Worker* worker) {
  return std::make_unique<GetClient>(worker);
}

}  // namespace qr::loadgen
