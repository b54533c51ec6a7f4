#pragma once

#include <memory>
#include <string>

#include "runtime/query-exec-mgr.h"
#include "runtime/sqlite-engine.h"
#include "service/query-coordinator.h"
#include "service/statement-service.h"
#include "util/status.h"
#include "util/webserver.h"

namespace qr {

/// Everything coordinatord runs, wired together: the executor registry, the SQLite engine, the
/// coordinator, the HTTP server with the protocol and debug handlers. The daemon's main() and
/// the integration tests both use it.
/// Thread-safety: Start() and Shutdown() from one thread; accessors are thread-safe.
/// Lifecycle: Start() -> (serve) -> Shutdown() -> destroy.
class CoordinatorServer {
 public:
  struct Options {
    /// The SQLite file to serve; empty: the sample database in 'data_dir'.
    std::string database;
    std::string data_dir = "data";
    double sample_scale_factor = 0.01;
    int num_query_threads = 2;
    Webserver::Options http;
    QueryCoordinator::Options coordinator;
    StatementService::Options protocol;
    /// Users that may cancel anyone's query on the debug pages.
    std::string admin_users;
  };

  explicit CoordinatorServer(Options options);
  ~CoordinatorServer();

  /// Prepares the database, starts the engine and the HTTP server. Errors name what failed.
  Status Start();
  /// Graceful: stop admitting, give running queries 'grace_ms', cancel the rest, stop serving.
  /// Returns the number of queries canceled. Idempotent.
  int Shutdown(int64_t grace_ms);

  int port() const { return webserver_ ? webserver_->port() : 0; }
  const std::string& database_path() const { return database_path_; }
  QueryCoordinator* coordinator() { return coordinator_.get(); }
  QueryExecMgr* exec_mgr() { return exec_mgr_.get(); }
  Webserver* webserver() { return webserver_.get(); }
  const Options& options() const { return options_; }

 private:
  Options options_;
  std::string database_path_;
  std::unique_ptr<QueryExecMgr> exec_mgr_;
  std::unique_ptr<SqliteEngine> engine_;
  std::unique_ptr<QueryCoordinator> coordinator_;
  std::unique_ptr<Webserver> webserver_;
  std::unique_ptr<StatementService> statement_service_;
  bool shut_down_ = false;
};

}  // namespace qr
