#include "cluster/forwarder.h"

#include <ctime>
#include <map>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/string_body.hpp>
#include <glog/logging.h>

#include "cluster/forward-auth.h"
#include "cluster/forward-op.h"
#include "util/check.h"
#include "util/mutex.h"

namespace qr {

namespace http = boost::beast::http;
using forwarding::IEquals;
using forwarding::IsHopHeader;

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string FormatTime(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool IsClusterHeader(std::string_view name) {
  return IEquals(name, kForwardedByHeader) || IEquals(name, kForwardedProtoHeader) ||
         IEquals(name, kForwardedPrincipalHeader) || IEquals(name, kForwardedClientHeader);
}

/// "http[s]://host:port[/]" -> TLS or not, host, port. False for another scheme or no port.
bool SplitMemberUri(std::string_view uri, bool* tls, std::string* host, std::string* port) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  *tls = uri.substr(0, kHttps.size()) == kHttps;
  if (!*tls && uri.substr(0, kHttp.size()) != kHttp) return false;
  uri.remove_prefix(*tls ? kHttps.size() : kHttp.size());
  uri = uri.substr(0, uri.find('/'));
  const size_t colon = uri.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == uri.size()) return false;
  std::string_view h = uri.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  *host = std::string(h);
  *port = std::string(uri.substr(colon + 1));
  return true;
}


}  // namespace

RouteDecision DecideRoute(uint32_t owner, uint32_t self, bool already_forwarded,
                          const MemberLookup& lookup) {
  RouteDecision d;
  if (owner == 0 || owner == self || already_forwarded) return d;
  DepartedMember departed;
  if (lookup(owner, &d.member, &departed)) {
    d.kind = RouteDecision::Kind::kForward;
    return d;
  }
  d.kind = RouteDecision::Kind::kGone;
  d.member = std::move(departed.member);
  d.member.id = owner;
  d.gone_since_ms = departed.gone_since_ms;
  return d;
}

std::string RemoteHostGoneMessage(const UniqueId& id, const RouteDecision& d,
                                  const std::string& cluster_name) {
  std::string msg = "Query " + PrintId(id) + " belongs to coordinator member " +
                    std::to_string(d.member.id) + " of cluster '" + cluster_name + "'";
  if (d.gone_since_ms > 0) {
    msg += " (last at " + d.member.uri + "), which is gone since " +
           FormatTime(d.gone_since_ms) + ": its etcd lease expired or was revoked";
  } else {
    msg += ", which is not a live member (this coordinator has not seen it since it joined)";
  }
  return msg;
}

const char* Forwarder::ResultName(int result) {
  switch (result) {
    case kOk: return "ok";
    case kGone: return "gone";
    case kTimeout: return "timeout";
    default: return "error";
  }
}

Forwarder::Forwarder(Options options)
    : options_(std::move(options)),
      tls_context_(options_.tls_context),
      pool_(std::make_shared<Pool>(options_.max_idle_per_member)) {}

void Forwarder::ReplaceTlsContext(std::shared_ptr<boost::asio::ssl::context> tls) {
  QR_CHECK(tls != nullptr, "Forwarder::ReplaceTlsContext: null context");
  MutexLock l(&tls_mu_);
  tls_context_ = std::move(tls);
}

std::shared_ptr<boost::asio::ssl::context> Forwarder::tls_context() const {
  MutexLock l(&tls_mu_);
  return tls_context_;
}

Forwarder::~Forwarder() { Close(); }

void Forwarder::Close() {
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
  {
    MutexLock l(&pool_->mu);
    pool_->closed = true;
    idle.swap(pool_->idle);
  }
  // 'idle' closes its sockets here, outside the lock.
}

bool Forwarder::MaybeForward(const UniqueId& id, const HttpRequest& req,
                             std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
                             boost::asio::io_context& io, ResponseCallback& respond) {
  const Membership* membership = membership_.load(std::memory_order_acquire);
  if (membership == nullptr) return false;
  const uint32_t self = membership->member_id();
  const RouteDecision d = DecideRoute(
      QueryOwner(id), self, !req.Header(kForwardedByHeader).empty(),
      [membership](uint32_t member, ClusterMember* live, DepartedMember* departed) {
        return membership->LookupMember(member, live, departed);
      });
  if (d.kind == RouteDecision::Kind::kLocal) return false;
  if (d.kind == RouteDecision::Kind::kGone) {
    pool_->RecordNoHop(kGone);
    respond(gone(RemoteHostGoneMessage(id, d, options_.cluster_name)));
    return true;
  }
  Forward(d.member, id, req, extra_wait, gone, io, std::move(respond));
  return true;
}

void Forwarder::Forward(const ClusterMember& owner, const UniqueId& id, const HttpRequest& req,
                        std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
                        boost::asio::io_context& io, ResponseCallback respond) {
  const std::string what = "Query " + PrintId(id) + "'s coordinator, member " +
                           std::to_string(owner.id) + " at " + owner.uri;
  bool tls = false;
  std::string host, port;
  if (std::string why; !CheckMemberUri(owner.uri, &tls, &host, &port, &why)) {
    LOG(WARNING) << what << " cannot be forwarded to: " << why;
    pool_->RecordNoHop(kError);
    respond(gone(what + ", cannot be forwarded to: " + why));
    return;
  }
  http::request<http::string_body> out;
  if (req.method != http::verb::unknown) {
    out.method(req.method);
  } else {
    out.method_string(req.method_string);
  }
  out.target(req.target);
  out.version(11);
  for (const auto& f : req.headers) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (IsHopHeader(name) || IsClusterHeader(name)) continue;
    out.insert(f.name_string(), f.value());
  }
  if (out.find(http::field::host) == out.end()) {
    out.set(http::field::host, !req.absolute_authority.empty() ? req.absolute_authority
                                                                : host + ":" + port);
  }
  out.set(std::string(kForwardedProtoHeader), req.secure ? "https" : "http");
  if (!options_.secret.empty()) {
    // The owner logs and limits the client, not this member (forward-auth.h).
    out.set(std::string(kForwardedClientHeader),
            SignForwardedClient(options_.secret, req.remote_address, req.method_string,
                                req.target, NowMs()));
  }
  out.body() = req.body;
  const std::chrono::milliseconds bound = options_.timeout + extra_wait;
  const auto started = std::chrono::steady_clock::now();
  Start(tls, std::move(host), std::move(port), std::move(out), req.authenticated_user, bound, io,
        [pool = pool_, gone, respond = std::move(respond), started](
            int result, HttpResponse resp, std::string error) {
          pool->Record(result, std::chrono::steady_clock::now() - started);
          respond(result == kOk ? std::move(resp) : gone(error));
        },
        what, /*stream=*/true);
}

bool Forwarder::CheckMemberUri(const std::string& uri, bool* tls, std::string* host,
                               std::string* port, std::string* why) const {
  if (!SplitMemberUri(uri, tls, host, port)) {
    *why = "only http:// and https:// advertised URIs with a port are supported";
    return false;
  }
  if (*tls && tls_context() == nullptr) {
    *why = "https:// needs a TLS client context (--cluster_ca_file)";
    return false;
  }
  return true;
}

void Forwarder::Start(bool tls, std::string host, std::string port,
                      http::request<http::string_body> out,
                      const std::string& principal, std::chrono::milliseconds bound,
                      boost::asio::io_context& io, SendCallback done, std::string what,
                      bool stream) {
  const uint32_t self = [this] {
    const Membership* m = membership_.load(std::memory_order_acquire);
    return m != nullptr ? m->member_id() : 0u;
  }();
  out.set(std::string(kForwardedByHeader), std::to_string(self));
  if (options_.authentication && !options_.secret.empty() && !principal.empty()) {
    out.set(std::string(kForwardedPrincipalHeader),
            SignForwardedPrincipal(
                options_.secret, principal,
                std::string_view(out.method_string().data(), out.method_string().size()),
                std::string_view(out.target().data(), out.target().size()), NowMs()));
  }
  out.prepare_payload();
  out.keep_alive(true);
  forwarding::StartForwardOp(pool_, io, tls ? tls_context() : nullptr, std::move(host),
                             std::move(port), std::move(out),
                             std::chrono::steady_clock::now() + bound, bound, std::move(done),
                             std::move(what), stream);
}

void Forwarder::Send(const ClusterMember& member, const Outgoing& request,
                     std::chrono::milliseconds bound, boost::asio::io_context& io,
                     SendCallback done) {
  const std::string what = "Coordinator member " + std::to_string(member.id) + " at " +
                           member.uri;
  bool tls = false;
  std::string host, port;
  if (std::string why; !CheckMemberUri(member.uri, &tls, &host, &port, &why)) {
    done(kError, HttpResponse(), what + " cannot be asked: " + why);
    return;
  }
  http::request<http::string_body> out;
  out.method_string(request.method);
  out.target(request.target);
  out.version(11);
  for (const auto& [name, value] : request.headers) {
    if (IsHopHeader(name) || IsClusterHeader(name)) continue;
    out.insert(name, value);
  }
  if (out.find(http::field::host) == out.end()) out.set(http::field::host, host + ":" + port);
  out.set(std::string(kForwardedProtoHeader), request.secure ? "https" : "http");
  out.body() = request.body;
  // On the io_context's own thread, as a forwarded request's operation runs.
  boost::asio::post(io, [this, tls, host = std::move(host), port = std::move(port),
                         out = std::move(out), principal = request.principal, bound, &io,
                         done = std::move(done), what]() mutable {
    Start(tls, std::move(host), std::move(port), std::move(out), principal, bound, io,
          std::move(done), what, /*stream=*/false);
  });
}

Forwarder::Stats Forwarder::GetStats() const {
  Stats s;
  for (int i = 0; i < kNumResults; ++i) s.results[i] = pool_->results[i].load();
  for (size_t i = 0; i < s.latency_buckets.size(); ++i) {
    s.latency_buckets[i] = pool_->buckets[i].load();
  }
  s.latency_seconds_sum = static_cast<double>(pool_->latency_us.load()) / 1e6;
  s.connections_busy = pool_->busy.load();
  s.connections_opened = pool_->opened.load();
  s.bytes_relayed = pool_->bytes_relayed.load();
  MutexLock l(&pool_->mu);
  for (const auto& [key, v] : pool_->idle) s.connections_idle += static_cast<int64_t>(v.size());
  return s;
}

}  // namespace qr
