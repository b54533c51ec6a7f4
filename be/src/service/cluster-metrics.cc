// /metrics: the qr_cluster_* families (docs/operations.md#cluster).

#include "cluster/membership.h"
#include "service/metrics-format.h"

namespace qr::metrics {

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

}  // namespace qr::metrics
