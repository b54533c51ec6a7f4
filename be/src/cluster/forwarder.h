#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "cluster/membership.h"
#include "http/webserver.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"
#include "util/unique-id.h"

namespace boost::asio::ssl {
class context;
}

namespace qr {

/// Where a request for a query goes (DecideRoute()).
struct RouteDecision {
  enum class Kind {
    kLocal,    // served here as always (404 when unknown)
    kForward,  // forwarded to 'member', the live owner
    kGone,     // its owner is not a live member: REMOTE_HOST_GONE
  };
  Kind kind = Kind::kLocal;
  /// kForward: the owner; kGone: its last known value (empty 'uri' when never seen).
  ClusterMember member;
  /// kGone: since when (Unix ms; 0: this member never saw it).
  int64_t gone_since_ms = 0;
};

/// Looks member 'id' up as Membership::LookupMember() does.
using MemberLookup = std::function<bool(uint32_t id, ClusterMember*, DepartedMember*)>;

/// The routing of a request for a query owned by member 'owner' (QueryOwner() of its id) that
/// this member ('self', 0 before its first registration) does not hold: local when the id
/// names no owner or this member, or when the request was already forwarded once (never
/// forwarded again: loop-proof); else forwarded to the owner when it is live, else gone.
RouteDecision DecideRoute(uint32_t owner, uint32_t self, bool already_forwarded,
                          const MemberLookup& lookup);

/// The REMOTE_HOST_GONE message for query 'id' of a gone owner ('d' from DecideRoute()).
std::string RemoteHostGoneMessage(const UniqueId& id, const RouteDecision& d,
                                  const std::string& cluster_name);

/// Forwards follow-up requests for other members' queries to their owners (issue 19 item 2,
/// docs/architecture.md "Forwarding"): the request's method, target, headers (Host
/// included, so the owner builds nextUri for the address the client used) and body go to the
/// owner's advertised URI over a keep-alive connection from a pool per member and I/O thread
/// (at most 'max_idle_per_member' idle ones each), asynchronously on the calling I/O thread's
/// io_context (Beast client; nothing blocks), and the owner's status, headers and body are
/// relayed. The body streams: the answer is given as soon as the owner's header arrived, its
/// body a BodySource fed from the owner's socket in chunks of at most kRelayChunkBytes, each
/// read only after the previous one was written to the client (an answer that arrived whole
/// with its header is relayed as a plain body); the connection is pooled again only after
/// the whole body was relayed and the owner kept it alive. A member whose advertised URI is https:// is reached over TLS ('tls_context':
/// its certificate must chain to the cluster's CA and match the URI's host; a failed
/// verification fails the request, never falls back to plain HTTP), pooled alike.
/// A request gets kForwardedByHeader (never forwarded again) and, with
/// authentication and a secret, the authenticated principal signed in
/// kForwardedPrincipalHeader. A stale pooled connection is retried once on a fresh one; an
/// owner that does not answer within the bound fails the request with REMOTE_HOST_GONE; one
/// that stalls mid-body for as long (each read of the body has the same bound) cuts the
/// relayed answer short (the client's connection is reset).
/// Thread-safety: all methods are thread-safe.
/// Lifecycle: construct -> set_membership() -> (forward) -> Close() after the webserver
/// stopped, before its io_contexts are destroyed.
class Forwarder {
 public:
  struct Options {
    /// Bound of a forwarded request beyond the wait its poll asks for (maxWait).
    std::chrono::milliseconds timeout{5000};
    size_t max_idle_per_member = 8;
    /// The cluster secret (--cluster_secret_file); empty: no principal crosses a hop.
    std::string secret;
    bool authentication = false;
    std::string cluster_name;
    /// TLS towards https:// members (CreateClusterTlsContext()); null: they cannot be
    /// reached (their requests fail).
    std::shared_ptr<boost::asio::ssl::context> tls_context;
  };

  /// Renders the answer for a query that failed with REMOTE_HOST_GONE with this message, in
  /// the shape of the endpoint that was asked (QueryError::RemoteHostGone()).
  using GoneRenderer = std::function<HttpResponse(const std::string& message)>;

  /// Results of forwarded requests, for qr_cluster_forwarded_requests_total{result}.
  enum Result { kOk, kGone, kTimeout, kError, kNumResults };
  static const char* ResultName(int result);
  /// Upper bounds of the latency histogram's buckets, in seconds.
  static constexpr std::array<double, 10> kLatencyBucketsSeconds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10};
  /// The most a relayed body buffers per forwarded request (one read from the owner).
  static constexpr size_t kRelayChunkBytes = 64 * 1024;

  struct Stats {
    std::array<int64_t, kNumResults> results{};
    /// Cumulative bucket counts; the last one (+Inf) is the count of forwarded requests.
    std::array<int64_t, kLatencyBucketsSeconds.size() + 1> latency_buckets{};
    double latency_seconds_sum = 0;
    int64_t connections_idle = 0;
    int64_t connections_busy = 0;
    int64_t connections_opened = 0;
    /// Body bytes of forwarded requests' answers relayed to clients.
    int64_t bytes_relayed = 0;
  };

  /// The end of a request sent to a member: kOk with its answer (any status), or kTimeout /
  /// kError with why ('error' names the member).
  using SendCallback = std::function<void(int result, HttpResponse response, std::string error)>;

  /// A request of this member's own to another member (the cluster view's fan-out).
  struct Outgoing {
    std::string method = "GET";
    std::string target;  // origin form, with the query string
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    /// With authentication and a secret: the user it is made for, signed across the hop
    /// (kForwardedPrincipalHeader) as a forwarded request's.
    std::string principal;
    /// How the client reached this member (kForwardedProtoHeader, for the URIs in answers).
    bool secure = false;
  };

  explicit Forwarder(Options options);
  ~Forwarder();

  void set_membership(const Membership* membership) {
    membership_.store(membership, std::memory_order_release);
  }

  /// For a request about query 'id' that this member does not hold: false when it is to be
  /// served here (DecideRoute()); true when it took the request over: forwarded (then
  /// 'respond' was moved from and is called with the owner's answer) or answered with
  /// 'gone'. 'extra_wait' is what the owner may wait before answering (a poll's maxWait).
  bool MaybeForward(const UniqueId& id, const HttpRequest& req,
                    std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
                    boost::asio::io_context& io, ResponseCallback& respond);

  /// Forwards 'req' (about query 'id') to its live owner 'owner' and calls 'respond' with the
  /// relayed answer (or 'gone''s when the owner fails): MaybeForward()'s forwarding step.
  /// 'io' is the calling I/O thread's io_context (the streamed body is pulled on its thread).
  void Forward(const ClusterMember& owner, const UniqueId& id, const HttpRequest& req,
               std::chrono::milliseconds extra_wait, const GoneRenderer& gone,
               boost::asio::io_context& io, ResponseCallback respond);

  /// Sends 'request' to 'member' over the pool of 'io' (the operation is posted there and runs
  /// on its thread; nothing blocks), marked kForwardedByHeader like a forwarded request, bounded
  /// by 'bound'. 'done' is called once, on that thread. Not counted in the forwarding metrics.
  void Send(const ClusterMember& member, const Outgoing& request, std::chrono::milliseconds bound,
            boost::asio::io_context& io, SendCallback done);

  /// Drops the idle connections; later ones are closed instead of pooled. Idempotent.
  void Close();

  /// Connections opened from now on use 'tls' (SIGHUP's reload of --cluster_ca_file and the
  /// client certificate; not null); pooled ones keep the context they were opened with.
  void ReplaceTlsContext(std::shared_ptr<boost::asio::ssl::context> tls);

  Stats GetStats() const;

  struct Pool;
  class Connection;

 private:
  /// Splits a member's advertised URI; false with 'why' when it cannot be reached.
  bool CheckMemberUri(const std::string& uri, bool* tls, std::string* host, std::string* port,
                      std::string* why) const;
  /// Marks and signs 'out' and runs it on 'io' (over TLS with 'tls'). 'stream': the answer's
  /// body is relayed as a BodySource (forwarded requests); else it is read whole (Send()).
  void Start(bool tls, std::string host, std::string port,
             boost::beast::http::request<boost::beast::http::string_body> out,
             const std::string& principal, std::chrono::milliseconds bound,
             boost::asio::io_context& io, SendCallback done, std::string what, bool stream);

  /// The TLS context new connections to https:// members get (null: none can be reached).
  std::shared_ptr<boost::asio::ssl::context> tls_context() const;

  const Options options_;
  /// Starts as options_.tls_context; ReplaceTlsContext() swaps it.
  mutable Mutex tls_mu_;
  std::shared_ptr<boost::asio::ssl::context> tls_context_ QR_GUARDED_BY(tls_mu_);
  std::atomic<const Membership*> membership_{nullptr};
  std::shared_ptr<Pool> pool_;
};

}  // namespace qr
