#pragma once

#include <optional>
#include <string>
#include <string_view>

/// The session properties coordinatord honours (X-Trino-Session, SET SESSION, RESET SESSION)
/// and SHOW SESSION, which lists them with the values the client's session holds.
/// Thread-safety: stateless functions over a constant table.

namespace qr {

struct SessionInfo;

/// True for a property we honour (query_max_execution_time, query_max_run_time).
bool IsKnownSessionProperty(std::string_view name);

/// The session properties we honour, for messages and docs: "query_max_execution_time, ...".
std::string SupportedSessionProperties();

/// The SQL answering SHOW SESSION [LIKE 'like' [ESCAPE 'escape']]: Trino's columns (Name,
/// Value, Default, Type, Description), one row per property we honour, ordered by name, with
/// the value 'session' holds (else the default, empty: no limit of the session's own).
std::string ShowSessionSql(const SessionInfo& session, const std::optional<std::string>& like,
                           const std::optional<std::string>& escape);

}  // namespace qr
