#include "service/coordinator-server.h"

#include <utility>

#include <glog/logging.h>

#include "runtime/sample-db.h"
#include "service/debug-pages.h"

namespace qr {

CoordinatorServer::CoordinatorServer(Options options) : options_(std::move(options)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(0); }

Status CoordinatorServer::Start() {
  if (options_.database.empty()) {
    RETURN_IF_ERROR(EnsureSampleDatabase(options_.data_dir, options_.sample_scale_factor,
                                         &database_path_));
  } else {
    database_path_ = options_.database;
  }
  exec_mgr_ = std::make_unique<QueryExecMgr>(options_.coordinator.num_shards > 0
                                                 ? options_.coordinator.num_shards
                                                 : FLAGS_registry_num_shards);
  SqliteEngine::Options engine_options;
  engine_options.database_path = database_path_;
  engine_options.num_threads = options_.num_query_threads;
  RETURN_IF_ERROR(SqliteEngine::Create(engine_options, &engine_));
  coordinator_ = std::make_unique<QueryCoordinator>(options_.coordinator, exec_mgr_.get(),
                                                    engine_.get());
  webserver_ = std::make_unique<Webserver>(options_.http);
  StatementService::Options protocol = options_.protocol;
  protocol.fallback_authority =
      options_.http.bind_address + ":" + std::to_string(options_.http.port);
  statement_service_ =
      std::make_unique<StatementService>(protocol, coordinator_.get(), webserver_.get());
  statement_service_->RegisterHandlers();
  DebugPages::Options debug;
  debug.admin_users = options_.admin_users;
  RegisterDebugPages(debug, this);
  RETURN_IF_ERROR(webserver_->Start());
  LOG(INFO) << "coordinatord serving " << database_path_ << " on http://"
            << options_.http.bind_address << ":" << webserver_->port() << " with "
            << options_.num_query_threads << " query threads";
  return Status::OK();
}

int CoordinatorServer::Shutdown(int64_t grace_ms) {
  if (shut_down_) return 0;
  shut_down_ = true;
  int canceled = coordinator_ ? coordinator_->Shutdown(grace_ms) : 0;
  // Stop serving before the coordinator goes away: no handler may run against freed state.
  if (webserver_) webserver_->Stop();
  // The engine before the coordinator: executor threads still finishing (canceled) queries
  // call the coordinator back through their result buffers until they are joined.
  engine_.reset();  // joins the executor threads; they release their query references
  coordinator_.reset();
  if (exec_mgr_ && !exec_mgr_->WaitForDrain(10000)) {
    LOG(WARNING) << exec_mgr_->num_live() << " executor query states still live at exit";
  }
  statement_service_.reset();
  webserver_.reset();
  return canceled;
}

}  // namespace qr
