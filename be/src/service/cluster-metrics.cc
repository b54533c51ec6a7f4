// /metrics: the qr_cluster_* families (docs/operations.md#cluster).

#include <cstdio>

#include "cluster/cluster-view.h"
#include "cluster/forwarder.h"
#include "cluster/membership.h"
#include "service/metrics-format.h"

namespace qr::metrics {
namespace {

std::string Seconds(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

void AppendClusterMetrics(const Membership* membership, std::string* out) {
  const Membership::Snapshot s =
      membership != nullptr ? membership->GetSnapshot() : Membership::Snapshot{};
  Family("qr_cluster_state", "gauge",
         "1 for the coordinator's state in its cluster: disabled (no --etcd_endpoints), "
         "connecting (no lease yet, or it expired), registered, unreachable (etcd did not "
         "answer; retrying).",
         out);
  for (ClusterState state : {ClusterState::kDisabled, ClusterState::kConnecting,
                             ClusterState::kRegistered, ClusterState::kUnreachable}) {
    Sample("qr_cluster_state", std::string("{state=\"") + ClusterStateName(state) + "\"}",
           s.state == state ? 1 : 0, out);
  }
  Scalar("qr_cluster_member_id", "gauge",
         "This coordinator's member id, carried by the ids of its queries (0: none).",
         s.member_id, out);
  Scalar("qr_cluster_members", "gauge", "Members of the cluster the etcd watch last saw.",
         static_cast<int64_t>(s.members.size()), out);
  Scalar("qr_cluster_etcd_errors_total", "counter",
         "Failed requests to etcd (each is logged and retried with backoff).", s.etcd_errors,
         out);
  Scalar("qr_cluster_lease_renewals_total", "counter", "Keep-alives of the member lease.",
         s.lease_renewals, out);
  Scalar("qr_cluster_registrations_total", "counter",
         "Member keys put in etcd: the first registration and one after each lost lease.",
         s.registrations, out);
}

void AppendForwardMetrics(const Forwarder* forwarder, std::string* out) {
  const Forwarder::Stats s = forwarder != nullptr ? forwarder->GetStats() : Forwarder::Stats{};
  Family("qr_cluster_forwarded_requests_total", "counter",
         "Follow-up requests for other members' queries: forwarded and answered by the owner "
         "(ok), answered REMOTE_HOST_GONE because the owner is not a live member (gone), or "
         "because it did not answer in time (timeout) or could not be reached (error).",
         out);
  for (int r = 0; r < Forwarder::kNumResults; ++r) {
    Sample("qr_cluster_forwarded_requests_total",
           std::string("{result=\"") + Forwarder::ResultName(r) + "\"}", s.results[r], out);
  }
  const char* name = "qr_cluster_forward_seconds";
  Family(name, "histogram",
         "Latency of forwarded requests, from the forwarding member's decision to the owner's "
         "answer (a long poll's wait included).",
         out);
  for (size_t i = 0; i < Forwarder::kLatencyBucketsSeconds.size(); ++i) {
    Sample("qr_cluster_forward_seconds_bucket",
           "{le=\"" + Seconds(Forwarder::kLatencyBucketsSeconds[i]) + "\"}",
           s.latency_buckets[i], out);
  }
  Sample("qr_cluster_forward_seconds_bucket", "{le=\"+Inf\"}", s.latency_buckets.back(), out);
  Sample("qr_cluster_forward_seconds_sum", "", Seconds(s.latency_seconds_sum), out);
  Sample("qr_cluster_forward_seconds_count", "", s.latency_buckets.back(), out);
  Family("qr_cluster_forward_connections", "gauge",
         "Connections to other members for forwarded requests: idle in the pool, or busy.",
         out);
  Sample("qr_cluster_forward_connections", "{state=\"idle\"}", s.connections_idle, out);
  Sample("qr_cluster_forward_connections", "{state=\"busy\"}", s.connections_busy, out);
  Scalar("qr_cluster_forward_connections_opened_total", "counter",
         "Connections opened to other members for forwarded requests.", s.connections_opened,
         out);
  Scalar("qr_cluster_forwarded_bytes_total", "counter",
         "Body bytes of the owners' answers relayed to clients for forwarded requests (streamed "
         "in chunks of at most 64 KiB each).",
         s.bytes_relayed, out);
}

void AppendClusterViewMetrics(const ClusterView* view, std::string* out) {
  const ClusterView::Stats s = view != nullptr ? view->GetStats() : ClusterView::Stats{};
  Scalar("qr_cluster_view_requests_total", "counter",
         "Cluster-wide listings (/queries?json, /v1/query, system.runtime.queries) that asked "
         "the other members.",
         s.fan_outs, out);
  Scalar("qr_cluster_view_member_requests_total", "counter",
         "Requests to other members for their part of a cluster-wide listing.",
         s.member_requests, out);
  Scalar("qr_cluster_view_member_failures_total", "counter",
         "Members that did not answer their part of a cluster-wide listing (not in time, not "
         "reachable, or not with 200): marked in the answer, their queries left out.",
         s.member_failures, out);
  const char* name = "qr_cluster_view_seconds";
  Family(name, "histogram",
         "Latency of a cluster-wide listing's fan-out, until the last member answered or the "
         "deadline (--cluster_view_timeout_ms) passed.",
         out);
  for (size_t i = 0; i < ClusterView::kLatencyBucketsSeconds.size(); ++i) {
    Sample("qr_cluster_view_seconds_bucket",
           "{le=\"" + Seconds(ClusterView::kLatencyBucketsSeconds[i]) + "\"}",
           s.latency_buckets[i], out);
  }
  Sample("qr_cluster_view_seconds_bucket", "{le=\"+Inf\"}", s.latency_buckets.back(), out);
  Sample("qr_cluster_view_seconds_sum", "", Seconds(s.latency_seconds_sum), out);
  Sample("qr_cluster_view_seconds_count", "", s.latency_buckets.back(), out);
}

}  // namespace qr::metrics
