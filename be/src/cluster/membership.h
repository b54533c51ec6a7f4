#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster-tls.h"
#include "util/mutex.h"
#include "util/status.h"

namespace qr {

class EtcdClient;

/// Where a coordinator stands in its cluster.
enum class ClusterState {
  kDisabled,     // no --etcd_endpoints: it runs alone
  kConnecting,   // no lease and member id yet (first start, or the lease expired)
  kRegistered,   // its lease is alive and its member key is in etcd
  kUnreachable,  // etcd did not answer the last request; it retries with backoff
};
/// "disabled", "connecting", "registered", "unreachable".
const char* ClusterStateName(ClusterState state);

/// One live coordinator of the cluster, as its member key in etcd describes it.
struct ClusterMember {
  uint32_t id = 0;
  std::string uri;
  std::string version;
  int64_t start_time_ms = 0;  // Unix epoch
};

/// A member that left this member's view (its key was deleted, or was gone when the watch
/// read the keys again): its last known value and since when it is gone.
struct DepartedMember {
  ClusterMember member;
  int64_t gone_since_ms = 0;  // Unix epoch; 0: never seen
};

/// The value of a member key: JSON with the fields of ClusterMember.
std::string EncodeMember(const ClusterMember& m);
/// False when 'value' is not EncodeMember()'s JSON.
bool DecodeMember(std::string_view value, ClusterMember* m);

/// The order in which a registering member tries member ids (1..max_member_id): its earlier id
/// first ('earlier', 0 when none), so that its running queries keep naming it; then the ids
/// after the cluster's claim cursor ('cursor', the id claimed last), wrapping around, skipping
/// the 'taken' ones. Starting after the last claim rather than at the smallest free id gives a
/// restarted process a fresh id: the dead process's query ids stay unowned (REMOTE_HOST_GONE)
/// until max_member_id - 1 other claims have passed.
std::vector<uint32_t> MemberIdCandidates(uint32_t earlier, uint32_t cursor,
                                         uint32_t max_member_id, const std::set<uint32_t>& taken);

/// A coordinator's membership of a cluster in etcd. Two threads of its own, each with its own
/// EtcdClient: the lease thread grants a lease, claims a member id (MemberIdCandidates' order)
/// with a put-if-absent transaction on '<prefix>members/<id>' that also moves the claim cursor
/// '<prefix>last-member-id' to it, and keeps the lease alive every TTL/3; the watch thread
/// reads the member keys and watches them. Any etcd error is logged, counted and retried with
/// exponential backoff; it never reaches the caller, so a coordinator whose etcd is gone keeps
/// serving its own queries.
/// Thread-safety: all methods are thread-safe. Start() and Stop() from one thread.
/// Lifecycle: construct -> Start() -> Stop() (or destroy).
class Membership {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // "[http[s]://]host:port" (ParseEtcdEndpoints())
    /// TLS towards https:// endpoints: the --etcd_* files (checked at start-up). Each
    /// EtcdClient gets a context of its own, so no TLS state is shared between the threads
    /// (OpenSSL's certificate store caches are what TSan saw raced when two handshakes shared
    /// one).
    ClusterTlsFiles etcd_tls;
    std::string cluster_name = "default";
    /// How other members and clients reach this one (http[s]://host:port).
    std::string advertised_uri;
    std::string version;
    int64_t start_time_ms = 0;
    int64_t lease_ttl_s = 10;
    /// Member ids are 1..max_member_id (at most kMaxQueryOwner).
    uint32_t max_member_id = 1024;
    std::chrono::milliseconds request_timeout{2000};
    std::chrono::milliseconds max_backoff{5000};
  };

  /// What the metrics, /healthz and system.runtime.nodes show.
  struct Snapshot {
    ClusterState state = ClusterState::kDisabled;
    uint32_t member_id = 0;
    /// The members the watch last saw (this one included once registered), by id.
    std::vector<ClusterMember> members;
    int64_t etcd_errors = 0;
    int64_t lease_renewals = 0;
    int64_t registrations = 0;
    std::string last_error;
  };

  explicit Membership(Options options);
  ~Membership();

  /// Starts the threads; they register in the background (never blocks on etcd).
  void Start();
  /// Stops the threads and revokes the lease (bounded by the request timeout), so the others
  /// see this member leave at once rather than after the TTL. Idempotent.
  void Stop();

  /// True when an etcd endpoint is https:// (its TLS files can be reloaded).
  bool uses_etcd_tls() const;
  /// Re-reads the etcd TLS files (--etcd_ca_file, --etcd_client_cert_file and its key, SIGHUP):
  /// the lease and watch threads' next connections use them; the open ones (a watch stream,
  /// a kept-alive lease connection) keep theirs until they close. An error (naming the flag and
  /// the file) leaves the old files' contexts in use. Thread-safe.
  Status ReloadEtcdTls();

  /// The member id, 0 before the first registration. Keeps its value while etcd is
  /// unreachable; changes only when a lost lease forces a new claim and the old id is taken.
  uint32_t member_id() const { return member_id_.load(std::memory_order_acquire); }
  /// Called on the lease thread with each new member id. Set before Start().
  void set_on_member_id(std::function<void(uint32_t)> cb) { on_member_id_ = std::move(cb); }

  Snapshot GetSnapshot() const QR_EXCLUDES(lock_);
  /// Member 'id' in this member's view, without copying the list: true with '*live' set when
  /// it is a live member; false otherwise, with '*departed' set when it was seen and left
  /// (departed->gone_since_ms stays 0 when it was never seen).
  bool LookupMember(uint32_t id, ClusterMember* live, DepartedMember* departed) const
      QR_EXCLUDES(lock_);
  /// The key prefix of this cluster's member keys.
  const std::string& members_prefix() const { return members_prefix_; }

 private:
  /// A client of the endpoints with a TLS context of its own (none without https://).
  std::unique_ptr<EtcdClient> NewEtcdClient() const;
  void LeaseLoop();
  void WatchLoop();
  /// Grants a lease and claims a member id on it.
  Status Register(EtcdClient* etcd);
  Status ClaimMemberId(EtcdClient* etcd, int64_t lease);
  /// Reads the member keys, then watches them until an error or Stop().
  Status ReadAndWatch(EtcdClient* etcd);
  void ApplyMember(const std::string& key, const std::string& value, bool is_delete)
      QR_REQUIRES(lock_);
  void RecordError(const Status& s, bool lease_thread) QR_EXCLUDES(lock_);
  void SetState(ClusterState state) QR_EXCLUDES(lock_);
  /// Waits for 'd' or Stop(); false once stopping.
  bool WaitFor(std::chrono::milliseconds d) QR_EXCLUDES(lock_);
  std::chrono::milliseconds KeepAliveInterval() const;

  const Options options_;
  /// "/coordinatord/<cluster_name>/": the members' keys and the claim cursor.
  const std::string cluster_prefix_;
  const std::string members_prefix_;
  const std::string cursor_key_;
  std::function<void(uint32_t)> on_member_id_;
  std::unique_ptr<EtcdClient> lease_etcd_;
  std::unique_ptr<EtcdClient> watch_etcd_;
  std::thread lease_thread_;
  std::thread watch_thread_;
  std::atomic<uint32_t> member_id_{0};
  std::atomic<int64_t> etcd_errors_{0};
  std::atomic<int64_t> lease_renewals_{0};
  std::atomic<int64_t> registrations_{0};
  /// The lease thread's own: the granted lease (0: none).
  int64_t lease_ = 0;

  /// Protects the state, the member view and the stop flag; a leaf lock.
  mutable Mutex lock_;
  CondVar stop_cv_;
  bool stopping_ QR_GUARDED_BY(lock_) = false;
  bool started_ = false;
  ClusterState state_ QR_GUARDED_BY(lock_) = ClusterState::kConnecting;
  std::map<uint32_t, ClusterMember> members_ QR_GUARDED_BY(lock_);
  /// Members that left, by id, until the id is live again (at most max_member_id entries).
  std::map<uint32_t, DepartedMember> departed_ QR_GUARDED_BY(lock_);
  /// Moves member 'id' (if live) to 'departed_' as gone now.
  void MarkDeparted(uint32_t id) QR_REQUIRES(lock_);
  std::string last_error_ QR_GUARDED_BY(lock_);
};

}  // namespace qr
