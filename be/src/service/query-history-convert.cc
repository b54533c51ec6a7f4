#include "service/query-history-convert.h"

#include <chrono>
#include <utility>

namespace qr {
namespace {

using SystemClock = std::chrono::system_clock;

int64_t ToMillis(SystemClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
SystemClock::time_point FromMillis(int64_t ms) {
  return SystemClock::time_point(std::chrono::milliseconds(ms));
}
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

QueryHistoryRecord MakeHistoryRecord(const ClientRequestState& req,
                                     const ClientRequestState::Info& info) {
  QueryHistoryRecord r;
  r.query_id = req.query_id();
  r.user = req.user();
  r.source = req.session().source;
  r.client_info = req.session().client_info;
  r.client_tags = req.session().client_tags;
  r.statement = req.statement();  // shared, not copied
  r.state = static_cast<uint8_t>(info.state);
  const int64_t submit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               req.submit_wall_time().time_since_epoch()).count();
  r.submit_time_ms = FloorDiv(submit_ns, 1000000);
  r.submit_time_extra_ns = static_cast<int32_t>(submit_ns - r.submit_time_ms * 1000000);
  r.end_time_ms = ToMillis(info.end_wall_time.value_or(SystemClock::now()));
  r.queued_ms = info.queued_ms;
  r.elapsed_ms = info.elapsed_ms;
  r.rows_delivered = info.rows_delivered;
  r.bytes_delivered = info.bytes_delivered;
  r.rows_produced = info.rows_produced;
  r.cpu_time_ns = info.cpu_time_ns;
  r.error = info.error;
  if (info.exec_start_wall_time) r.exec_start_ms = ToMillis(*info.exec_start_wall_time);
  if (info.first_row_wall_time) r.first_row_ms = ToMillis(*info.first_row_wall_time);
  if (info.state == ClientRequestState::State::kCanceled && !info.canceled_by.empty()) {
    r.canceled_by = info.canceled_by;
    r.canceled_time_ms = r.end_time_ms;  // the cancel ended it
  }
  return r;
}

ClientRequestStatePtr RestoreFromHistory(QueryHistoryRecord record) {
  using State = ClientRequestState::State;
  SessionInfo session;
  // Not recorded: the least (an EXPLAIN of it from /query_plan runs with this session).
  session.sees_all_queries = false;
  session.user = std::move(record.user);
  session.source = std::move(record.source);
  session.client_info = std::move(record.client_info);
  session.client_tags = std::move(record.client_tags);
  ClientRequestState::Restored restored;
  // A state this version does not know (a newer writer) shows as FAILED, never as running.
  restored.state = record.state >= static_cast<uint8_t>(State::kFinished) &&
                           record.state <= static_cast<uint8_t>(State::kCanceled)
                       ? static_cast<State>(record.state)
                       : State::kFailed;
  restored.error = std::move(record.error);
  restored.submit_wall =
      FromMillis(record.submit_time_ms) +
      std::chrono::duration_cast<SystemClock::duration>(
          std::chrono::nanoseconds(record.submit_time_extra_ns));
  if (record.exec_start_ms >= 0) restored.exec_start_wall = FromMillis(record.exec_start_ms);
  if (record.first_row_ms >= 0) restored.first_row_wall = FromMillis(record.first_row_ms);
  restored.canceled_by = std::move(record.canceled_by);
  restored.end_wall = FromMillis(record.end_time_ms);
  restored.queued_ms = record.queued_ms;
  restored.elapsed_ms = record.elapsed_ms;
  restored.rows_delivered = record.rows_delivered;
  restored.bytes_delivered = record.bytes_delivered;
  restored.rows_produced = record.rows_produced;
  restored.cpu_time_ns = record.cpu_time_ns;
  return MakeClientRequestState(record.query_id, std::move(record.statement),
                                std::move(session), restored);
}

}  // namespace qr
