#include "service/client-request-state.h"

#include <utility>

#include <glog/logging.h>

namespace qr {
namespace {

int64_t SteadyNowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

std::string MakeSlug() {
  static const char kHex[] = "0123456789abcdef";
  uint64_t v = SecureRandomU64();
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = kHex[(v >> (60 - 4 * i)) & 0xf];
  return s;
}

int64_t MillisBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

const char* ClientRequestState::StateName(State s) {
  switch (s) {
    case State::kQueued: return "QUEUED";
    case State::kRunning: return "RUNNING";
    case State::kFinished: return "FINISHED";
    case State::kFailed: return "FAILED";
    case State::kCanceled: return "CANCELED";
  }
  return "UNKNOWN";
}

ClientRequestState::ClientRequestState(const UniqueId& id,
                                       std::shared_ptr<const std::string> statement,
                                       SessionInfo session, StatementPlan plan)
    : id_(id),
      slug_(MakeSlug()),
      statement_(std::move(statement)),
      session_(std::move(session)),
      plan_(std::move(plan)),
      submit_wall_(std::chrono::system_clock::now()),
      submit_steady_(std::chrono::steady_clock::now()),
      last_activity_ns_(submit_steady_.time_since_epoch().count()) {}

ClientRequestState::ClientRequestState(const UniqueId& id,
                                       std::shared_ptr<const std::string> statement,
                                       SessionInfo session, const Restored& restored)
    : id_(id),
      slug_(MakeSlug()),
      statement_(std::move(statement)),
      session_(std::move(session)),
      submit_wall_(restored.submit_wall),
      // The steady clock of an earlier run means nothing now: place the submission as far
      // in the past as the wall clock says, so that durations come out as recorded.
      submit_steady_(std::chrono::steady_clock::now() -
                     (std::chrono::system_clock::now() - restored.submit_wall)),
      last_activity_ns_(submit_steady_.time_since_epoch().count()),
      restored_queued_ms_(restored.queued_ms) {
  MutexLock l(&lock_);
  state_ = restored.state;
  error_ = restored.error;
  end_time_ = submit_steady_ + std::chrono::milliseconds(restored.elapsed_ms);
  end_wall_ = restored.end_wall;
  final_delivered_ = true;
  rows_delivered_ = restored.rows_delivered;
  bytes_delivered_ = restored.bytes_delivered;
  rows_produced_final_ = restored.rows_produced;
  cpu_time_ns_final_ = restored.cpu_time_ns;
  // Back to this run's steady clock, as GetInfo() maps them forward.
  auto to_steady = [this](std::chrono::system_clock::time_point t) {
    return submit_steady_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                t - submit_wall_);
  };
  if (restored.exec_start_wall) exec_start_final_ = to_steady(*restored.exec_start_wall);
  if (restored.first_row_wall) first_row_time_ = to_steady(*restored.first_row_wall);
  canceled_by_ = restored.canceled_by;
}

bool ClientRequestState::SlugMatches(std::string_view candidate) const {
  // Constant time in the content: a wrong guess learns nothing from the timing.
  if (candidate.size() != slug_.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < slug_.size(); ++i) {
    diff |= static_cast<unsigned char>(candidate[i]) ^ static_cast<unsigned char>(slug_[i]);
  }
  return diff == 0;
}

void ClientRequestState::Touch() {
  last_activity_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
}

ClientRequestState::State ClientRequestState::state() const {
  MutexLock l(&lock_);
  return state_;
}

ClientRequestState::Info ClientRequestState::GetInfo() const {
  MutexLock l(&lock_);
  auto now = std::chrono::steady_clock::now();
  Info info;
  info.state = state_;
  info.rows_delivered = rows_delivered_;
  info.bytes_delivered = bytes_delivered_;
  info.rows_produced = exec_ ? exec_->rows_produced.load() : rows_produced_final_;
  info.cpu_time_ns = exec_ ? exec_->cpu_time_ns.load() : cpu_time_ns_final_;
  info.vm_steps = exec_ ? exec_->vm_steps.load() : vm_steps_final_;
  // Queued until an executor thread starts the statement (not until a poll sees it running);
  // a query that ends before that was queued all its life.
  std::optional<std::chrono::steady_clock::time_point> exec_start = exec_start_final_;
  if (exec_ && exec_->exec_start().time_since_epoch().count() != 0) {
    exec_start = exec_->exec_start();
  }
  const auto queue_end = exec_start.value_or(end_time_.value_or(now));
  info.queued_ms = restored_queued_ms_.value_or(MillisBetween(submit_steady_, queue_end));
  info.elapsed_ms = MillisBetween(submit_steady_, end_time_.value_or(now));
  info.end_wall_time = end_wall_;
  auto to_wall = [this](std::chrono::steady_clock::time_point t) {
    return submit_wall_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              t - submit_steady_);
  };
  if (exec_start) info.exec_start_wall_time = to_wall(*exec_start);
  if (first_row_time_) info.first_row_wall_time = to_wall(*first_row_time_);
  info.error = error_;
  info.canceled_by = canceled_by_;
  if (exec_) info.blocked_reason = exec_->result_buffer()->blocked_reason();
  return info;
}

bool ClientRequestState::AttachExecution(QueryStateHandle exec) {
  MutexLock l(&lock_);
  DCHECK(!exec_) << "execution attached twice";
  if (execution_released_) return false;  // 'exec' is dropped outside the lock
  exec_ = std::move(exec);
  return true;
}

void ClientRequestState::ReleaseExecution() {
  QueryStateHandle exec;
  {
    MutexLock l(&lock_);
    execution_released_ = true;
    if (!exec_) return;
    rows_produced_final_ = exec_->rows_produced.load();
    cpu_time_ns_final_ = exec_->cpu_time_ns.load();
    vm_steps_final_ = exec_->vm_steps.load();
    if (exec_->exec_start().time_since_epoch().count() != 0) {
      exec_start_final_ = exec_->exec_start();
    }
    exec = std::move(exec_);
  }
  // The last reference may delete the QueryState: done outside 'lock_'.
}

bool ClientRequestState::Terminate(State terminal, QueryError error, std::string who) {
  DCHECK(terminal == State::kFailed || terminal == State::kCanceled);
  QueryStateHandle exec;
  Waiters waiters;
  {
    MutexLock l(&lock_);
    if (IsTerminal(state_)) return false;
    SetTerminalLocked(terminal, error);
    if (terminal == State::kCanceled) canceled_by_ = std::move(who);
    // The client of a failed or canceled query gets no more rows, so the answer kept for a
    // retry of the last token keeps its header but drops its rows: otherwise every such query
    // in the completed-query log would pin up to a page (1 MiB) of results.
    if (last_page_) last_page_->page.reset();
    if (exec_) exec = exec_.Clone();
    waiters = TakeWaitersLocked();
  }
  if (exec) exec->Cancel(std::move(error));
  for (auto& [id, fn] : waiters) fn();
  return true;
}

void ClientRequestState::OnExecutionChange() {
  Waiters waiters;
  {
    MutexLock l(&lock_);
    waiters = TakeWaitersLocked();
  }
  for (auto& [id, fn] : waiters) fn();
}

ClientRequestState::Waiters ClientRequestState::TakeWaitersLocked() {
  Waiters out;
  out.swap(waiters_);
  return out;
}

void ClientRequestState::RemoveWaiter(uint64_t waiter_id) {
  std::function<void()> victim;  // destroyed outside the lock
  MutexLock l(&lock_);
  for (size_t i = 0; i < waiters_.size(); ++i) {
    if (waiters_[i].first == waiter_id) {
      victim = std::move(waiters_[i].second);
      waiters_[i] = std::move(waiters_.back());
      waiters_.pop_back();
      return;
    }
  }
}

bool ClientRequestState::has_waiters() const {
  MutexLock l(&lock_);
  return !waiters_.empty();
}

bool ClientRequestState::final_page_delivered() const {
  MutexLock l(&lock_);
  return final_delivered_;
}

bool ClientRequestState::execution_done() const {
  MutexLock l(&lock_);
  if (!exec_) return IsTerminal(state_);
  QueryState::ExecState s = exec_->exec_state();
  return s == QueryState::ExecState::kFinished || s == QueryState::ExecState::kFailed ||
         s == QueryState::ExecState::kCancelled;
}

int64_t ClientRequestState::exec_elapsed_ms() const {
  MutexLock l(&lock_);
  if (!exec_) return -1;
  auto start = exec_->exec_start();
  if (start.time_since_epoch().count() == 0) return -1;
  return MillisBetween(start, std::chrono::steady_clock::now());
}

void ClientRequestState::SetTerminalLocked(State s, std::optional<QueryError> error) {
  state_ = s;
  error_ = std::move(error);
  auto now = std::chrono::steady_clock::now();
  if (!start_time_) start_time_ = now;
  end_time_ = now;
  end_wall_ = std::chrono::system_clock::now();
}

void ClientRequestState::FillHeaderLocked(QueryPage* out) {
  if (state_ == State::kQueued && exec_ &&
      exec_->exec_state() != QueryState::ExecState::kCreated &&
      exec_->exec_state() != QueryState::ExecState::kQueued) {
    state_ = State::kRunning;
    start_time_ = std::chrono::steady_clock::now();
  }
  switch (state_) {
    case State::kQueued: out->state = "QUEUED"; break;
    case State::kRunning: out->state = "RUNNING"; break;
    case State::kFinished: out->state = "FINISHED"; break;
    case State::kFailed:
    case State::kCanceled: out->state = "FAILED"; break;
  }
  out->queued = state_ == State::kQueued;
  if (!columns_ && exec_) {
    const std::vector<Column>* cols = exec_->result_buffer()->columns();
    if (cols != nullptr) columns_ = std::make_shared<const std::vector<Column>>(*cols);
  }
  out->columns = columns_;
  out->error = error_;
}

bool ClientRequestState::NextPageLocked(QueryPage* out) {
  if (!IsTerminal(state_) && exec_) {
    ResultPage page;
    std::optional<QueryError> error;
    switch (exec_->result_buffer()->TryGet(&page, &error)) {
      case ResultBuffer::Next::kPage:
        rows_delivered_ += page.num_rows;
        if (page.num_rows > 0 && !first_row_time_) {
          first_row_time_ = std::chrono::steady_clock::now();
        }
        bytes_delivered_ += page.num_bytes;
        out->page = std::move(page);
        break;
      case ResultBuffer::Next::kEnd:
        if (!error) {
          SetTerminalLocked(State::kFinished, std::nullopt);
        } else {
          bool canceled = error->code == QueryError::UserCanceled().code;
          SetTerminalLocked(canceled ? State::kCanceled : State::kFailed, std::move(error));
        }
        break;
      case ResultBuffer::Next::kNotYet:
        return false;
    }
  } else if (!IsTerminal(state_)) {
    return false;  // waiting for admission
  }
  FillHeaderLocked(out);
  return true;
}

ClientRequestState::FetchOutcome ClientRequestState::Fetch(int64_t token, bool may_wait,
                                                           std::function<void()> waiter,
                                                           QueryPage* page,
                                                           uint64_t* waiter_id,
                                                           int max_retries) {
  ever_fetched_.store(true, std::memory_order_relaxed);
  MutexLock l(&lock_);
  if (last_page_ && token == next_token_ - 1) {
    if (max_retries > 0 && last_page_retries_ >= max_retries) {
      return FetchOutcome::kTooManyRetries;
    }
    ++last_page_retries_;
    *page = *last_page_;  // an idempotent retry: the same page (shared rows), not a new one
    return FetchOutcome::kPage;
  }
  if (token < next_token_ - 1) return FetchOutcome::kGone;
  if (token != next_token_ || final_delivered_) return FetchOutcome::kNotFound;
  Touch();  // only a request for the next page is progress

  QueryPage p;
  if (!NextPageLocked(&p)) {
    if (may_wait) {
      *waiter_id = next_waiter_id_++;
      waiters_.emplace_back(*waiter_id, std::move(waiter));
      return FetchOutcome::kWait;
    }
    FillHeaderLocked(&p);  // the wait timed out: an answer with no rows
  }
  if (IsTerminal(state_)) {
    final_delivered_ = true;
  } else {
    p.next_token = token + 1;
  }
  next_token_ = token + 1;
  last_page_ = p;
  last_page_retries_ = 0;
  *page = std::move(p);
  return FetchOutcome::kPage;
}

QueryPage ClientRequestState::CurrentPage() {
  MutexLock l(&lock_);
  QueryPage p;
  FillHeaderLocked(&p);
  if (!IsTerminal(state_)) p.next_token = next_token_;
  return p;
}

}  // namespace qr
