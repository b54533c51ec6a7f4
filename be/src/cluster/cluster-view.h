#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "cluster/forwarder.h"
#include "cluster/membership.h"
#include "http/webserver.h"

namespace qr {

/// One member's part of a cluster-wide listing: its answer, or why there is none.
struct MemberAnswer {
  ClusterMember member;
  bool self = false;
  bool ok = false;
  /// When !ok: "did not answer within 2000 ms", "could not be reached: ...", "HTTP 500: ...".
  std::string error;
  /// When ok: the member's answer (status 200).
  HttpResponse response;
};

/// Whether a request is one member's sub-request of another's cluster-wide listing, to be
/// answered from this member's own queries only (never fanned out again): it carries
/// kForwardedByHeader and, with authentication, a forwarded principal (the authentication hook
/// let it through only with a valid signature). A client that sets the marker without a signed
/// principal is ignored (gets the cluster view) when authentication is on; without
/// authentication the marker only narrows what the client sees, so it is honoured.
bool IsLocalOnlyRequest(const HttpRequest& req, bool authentication);

/// The sub-request of a cluster-wide listing asked by 'req': the same method and target, the
/// client's Host (so the members' URIs name the address the client used) and protocol user
/// headers, and the authenticated user to be signed across the hop.
Forwarder::Outgoing SubRequestOf(const HttpRequest& req);

/// The cluster-wide view of the listings (issue 19 item 3, docs/architecture.md "The cluster
/// view"): asks every other live member for its part of a listing in parallel, over the
/// forwarder's keep-alive pools, each request bounded by one deadline, and hands back each
/// member's answer or why there is none. Nothing blocks an I/O thread: FanOut() runs on the
/// io_context given and calls back on it; FanOutBlocking() is for executor threads only.
/// Thread-safety: all methods are thread-safe.
/// Lifecycle: construct after the forwarder, which it borrows and which outlives it (and
/// every fan-out in flight) -> set_membership() -> (fan out).
class ClusterView {
 public:
  struct Options {
    /// How long the members may take to answer (--cluster_view_timeout_ms).
    std::chrono::milliseconds timeout{2000};
  };

  /// Upper bounds of the latency histogram's buckets, in seconds.
  static constexpr std::array<double, 10> kLatencyBucketsSeconds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10};

  /// For the qr_cluster_view_* metrics.
  struct Stats {
    int64_t fan_outs = 0;
    int64_t member_requests = 0;
    int64_t member_failures = 0;
    /// Cumulative counts of the fan-outs' latency; the last one (+Inf) is their count.
    std::array<int64_t, kLatencyBucketsSeconds.size() + 1> latency_buckets{};
    double latency_seconds_sum = 0;
  };

  ClusterView(Options options, Forwarder* forwarder);

  /// Until set, there are no other members. 'membership' must outlive the fan-outs.
  void set_membership(const Membership* membership) {
    membership_.store(membership, std::memory_order_release);
  }

  using Done = std::function<void(std::vector<MemberAnswer> others)>;

  /// The live members other than this one, as the membership's watch last saw them.
  std::vector<ClusterMember> OtherMembers() const;
  /// This member as the others see it (id and advertised URI; id 0 before registration).
  ClusterMember Self() const;

  /// Sends 'request' to every other live member in parallel on 'io' and calls 'done' once,
  /// on 'io''s thread, when all answered or the deadline passed, with one answer per member
  /// (ordered by member id). A member's answer other than 200 counts as a failure.
  void FanOut(const Forwarder::Outgoing& request, boost::asio::io_context& io, Done done);

  /// FanOut() on 'io' waited for on the calling thread, at most the deadline and a margin:
  /// for executor threads (system.runtime.queries), never for an I/O thread.
  std::vector<MemberAnswer> FanOutBlocking(const Forwarder::Outgoing& request,
                                           boost::asio::io_context& io);

  std::chrono::milliseconds timeout() const { return options_.timeout; }
  Stats GetStats() const;

  struct Counters;

 private:
  const Options options_;
  Forwarder* const forwarder_;
  std::atomic<const Membership*> membership_{nullptr};
  std::shared_ptr<Counters> counters_;
};

}  // namespace qr
