#pragma once

#include <memory>

#include "service/client-request-state.h"
#include "service/query-history-record.h"

namespace qr {

/// The history record of 'req', which has just completed; 'info' is its GetInfo().
QueryHistoryRecord MakeHistoryRecord(const ClientRequestState& req,
                                     const ClientRequestState::Info& info);

/// A completed request for the query log, rebuilt from a record of an earlier run.
ClientRequestStatePtr RestoreFromHistory(QueryHistoryRecord record);

}  // namespace qr
