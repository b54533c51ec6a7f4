#include "service/debug-pages.h"

#include "service/coordinator-server.h"

namespace qr {

void RegisterDebugPages(const DebugPages::Options& options, CoordinatorServer* server) {
  QueryCoordinator* coord = server->coordinator();
  server->webserver()->RegisterHandler(
      boost::beast::http::verb::get, "/healthz", [coord](HttpRequest&, ResponseCallback respond) {
        if (coord->shutting_down()) {
          respond(HttpResponse::Text(503, "SHUTTING_DOWN\n"));
        } else {
          respond(HttpResponse::Text(200, "OK\n"));
        }
      });
}

}  // namespace qr
