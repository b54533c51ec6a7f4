#pragma once

#include <string>

namespace qr {

class CoordinatorServer;

/// The operator's pages of coordinatord: GET / (index), /queries (HTML) and /queries?json,
/// POST /cancel_query, /metrics (Prometheus), /healthz, /varz, and the static assets of
/// be/www.
namespace DebugPages {
struct Options {
  /// Comma-separated users who may cancel any query (others only their own).
  std::string admin_users;
};
}  // namespace DebugPages

/// Registers the debug pages' handlers on 'server''s webserver. Call before it starts.
void RegisterDebugPages(const DebugPages::Options& options, CoordinatorServer* server);

}  // namespace qr
