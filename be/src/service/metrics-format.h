#pragma once

#include <cstdint>
#include <string>

namespace qr {
class ClusterView;
class Forwarder;
class Membership;
class QueryHistory;
struct HistoryReadStats;
}  // namespace qr

/// Writing the Prometheus text exposition format (version 0.0.4): every family as '# HELP',
/// '# TYPE', then all of its samples, as the format requires.

namespace qr::metrics {

/// Appends the comment lines of one metric family.
inline void Family(const char* name, const char* type, const char* help, std::string* out) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

/// Appends one sample line; 'labels' is "" or "{k=\"v\",...}".
inline void Sample(const char* name, const std::string& labels, const std::string& value,
                   std::string* out) {
  *out += name;
  *out += labels;
  *out += ' ';
  *out += value;
  *out += '\n';
}

inline void Sample(const char* name, const std::string& labels, int64_t value,
                   std::string* out) {
  Sample(name, labels, std::to_string(value), out);
}

/// A family with a single unlabeled sample.
inline void Scalar(const char* name, const char* type, const char* help, int64_t value,
                   std::string* out) {
  Family(name, type, help, out);
  Sample(name, "", value, out);
}

/// The standard process_* families (CPU, resident and virtual memory, open and maximum file
/// descriptors, threads, start time: the names Prometheus' client libraries use) and
/// qr_build_info{version,revision}.
void AppendProcessMetrics(std::string* out);

/// The query history writer's qr_history_* families (records, bytes, batches, syncs, drops,
/// the sync latency histogram, what the start read back); zeros when 'history' is null (off).
void AppendHistoryMetrics(const QueryHistory* history, const HistoryReadStats& restored,
                          std::string* out);

/// The cluster membership's qr_cluster_* families (state, member id, members, etcd errors,
/// lease renewals, registrations); state "disabled" and zeros when 'membership' is null.
void AppendClusterMetrics(const Membership* membership, std::string* out);
/// qr_cluster_forward* (zero when 'forwarder' is null: the coordinator runs alone).
void AppendForwardMetrics(const Forwarder* forwarder, std::string* out);
/// qr_cluster_view_*: the cluster-wide listings' fan-outs (zeros when 'view' is null).
void AppendClusterViewMetrics(const ClusterView* view, std::string* out);

}  // namespace qr::metrics
