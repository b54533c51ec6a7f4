#include "cluster/membership.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

#include <boost/asio/ssl/context.hpp>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "cluster/etcd-client.h"
#include "cluster/etcd-json.h"
#include "util/unique-id.h"

namespace qr {
namespace {

constexpr std::chrono::milliseconds kMinBackoff{100};

/// The member id of a key '<prefix><id>'; 0 when the key is not a member key.
uint32_t MemberIdOfKey(std::string_view prefix, std::string_view key) {
  if (key.substr(0, prefix.size()) != prefix) return 0;
  std::string_view rest = key.substr(prefix.size());
  uint32_t id = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), id);
  if (ec != std::errc() || end != rest.data() + rest.size()) return 0;
  return id <= kMaxQueryOwner ? id : 0;
}

/// The claim cursor's value (the id claimed last), 0 when absent, malformed or out of range.
uint32_t ParseCursor(std::string_view value, uint32_t max_member_id) {
  uint32_t id = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), id);
  if (ec != std::errc() || end != value.data() + value.size() || id > max_member_id) return 0;
  return id;
}

std::string MemberKey(const std::string& prefix, uint32_t id) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%05u", id);
  return prefix + buf;
}

}  // namespace

std::vector<uint32_t> MemberIdCandidates(uint32_t earlier, uint32_t cursor,
                                         uint32_t max_member_id, const std::set<uint32_t>& taken) {
  std::vector<uint32_t> out;
  if (earlier != 0 && earlier <= max_member_id) out.push_back(earlier);
  if (max_member_id == 0) return out;
  for (uint32_t step = 1; step <= max_member_id; ++step) {
    const uint32_t id = (cursor + step - 1) % max_member_id + 1;
    if (id != earlier && !taken.contains(id)) out.push_back(id);
  }
  return out;
}

const char* ClusterStateName(ClusterState state) {
  switch (state) {
    case ClusterState::kDisabled: return "disabled";
    case ClusterState::kConnecting: return "connecting";
    case ClusterState::kRegistered: return "registered";
    case ClusterState::kUnreachable: return "unreachable";
  }
  return "unknown";
}

std::string EncodeMember(const ClusterMember& m) {
  return nlohmann::json{{"id", m.id},
                        {"uri", m.uri},
                        {"version", m.version},
                        {"start_time_ms", m.start_time_ms}}
      .dump();
}

bool DecodeMember(std::string_view value, ClusterMember* m) {
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto id = j.find("id"), uri = j.find("uri"), version = j.find("version"),
       start = j.find("start_time_ms");
  if (id == j.end() || !id->is_number_unsigned() || uri == j.end() || !uri->is_string() ||
      version == j.end() || !version->is_string() || start == j.end() ||
      !start->is_number_integer()) {
    return false;
  }
  m->id = id->get<uint32_t>();
  m->uri = uri->get<std::string>();
  m->version = version->get<std::string>();
  m->start_time_ms = start->get<int64_t>();
  return true;
}

Membership::Membership(Options options)
    : options_(std::move(options)),
      cluster_prefix_("/coordinatord/" + options_.cluster_name + "/"),
      members_prefix_(cluster_prefix_ + "members/"),
      cursor_key_(cluster_prefix_ + "last-member-id") {
  lease_etcd_ = NewEtcdClient();
  watch_etcd_ = NewEtcdClient();
}

bool Membership::uses_etcd_tls() const {
  return std::any_of(options_.endpoints.begin(), options_.endpoints.end(),
                     [](const std::string& e) { return IsTlsEtcdEndpoint(e); });
}

Status Membership::ReloadEtcdTls() {
  if (!uses_etcd_tls()) return InvalidArgument("no --etcd_endpoints is https://");
  // A context per client, as at start-up: no TLS state is shared between the two threads.
  std::shared_ptr<boost::asio::ssl::context> lease_tls, watch_tls;
  QR_RETURN_IF_ERROR(CreateClusterTlsContext(options_.etcd_tls, &lease_tls));
  QR_RETURN_IF_ERROR(CreateClusterTlsContext(options_.etcd_tls, &watch_tls));
  lease_etcd_->ReplaceTlsContext(std::move(lease_tls));
  watch_etcd_->ReplaceTlsContext(std::move(watch_tls));
  return Status::OK();
}

std::unique_ptr<EtcdClient> Membership::NewEtcdClient() const {
  std::shared_ptr<boost::asio::ssl::context> tls;
  if (uses_etcd_tls()) {
    // The files were checked at start-up; should one be broken since (Stop()'s fresh client),
    // that client's https:// requests fail, logged.
    Status s = CreateClusterTlsContext(options_.etcd_tls, &tls);
    if (!s.ok()) LOG(ERROR) << "Cluster " << options_.cluster_name << ": " << s.message();
  }
  return std::make_unique<EtcdClient>(options_.endpoints, options_.request_timeout,
                                      std::move(tls));
}

Membership::~Membership() { Stop(); }

void Membership::Start() {
  started_ = true;
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

void Membership::Stop() {
  {
    MutexLock l(&lock_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  lease_etcd_->Cancel();
  watch_etcd_->Cancel();
  if (!started_) return;
  lease_thread_.join();
  watch_thread_.join();
  if (lease_ != 0) {
    // A fresh client: the lease thread's is canceled. One attempt, bounded by the timeout.
    std::unique_ptr<EtcdClient> etcd = NewEtcdClient();
    std::string ignored;
    Status s = etcd->Call("/v3/lease/revoke", etcd::LeaseIdRequest(lease_), &ignored);
    LOG(INFO) << "Cluster " << options_.cluster_name << ": left as member " << member_id()
              << (s.ok() ? "" : " (lease not revoked, it expires by itself: " + s.message() + ")");
  }
}

Membership::Snapshot Membership::GetSnapshot() const {
  Snapshot s;
  s.member_id = member_id();
  s.etcd_errors = etcd_errors_.load(std::memory_order_relaxed);
  s.lease_renewals = lease_renewals_.load(std::memory_order_relaxed);
  s.registrations = registrations_.load(std::memory_order_relaxed);
  MutexLock l(&lock_);
  s.state = state_;
  s.last_error = last_error_;
  s.members.reserve(members_.size());
  for (const auto& [id, m] : members_) s.members.push_back(m);
  return s;
}

void Membership::SetState(ClusterState state) {
  MutexLock l(&lock_);
  state_ = state;
}

void Membership::RecordError(const Status& s, bool lease_thread) {
  if (s.code() == StatusCode::kCancelled) return;
  etcd_errors_.fetch_add(1, std::memory_order_relaxed);
  LOG(WARNING) << "Cluster " << options_.cluster_name << ": " << s.message()
               << " (retrying with backoff; queries are served meanwhile)";
  MutexLock l(&lock_);
  last_error_ = s.message();
  if (lease_thread && s.code() == StatusCode::kUnavailable) state_ = ClusterState::kUnreachable;
}

bool Membership::WaitFor(std::chrono::milliseconds d) {
  const auto deadline = std::chrono::steady_clock::now() + d;
  MutexLock l(&lock_);
  while (!stopping_ && std::chrono::steady_clock::now() < deadline) {
    stop_cv_.WaitUntil(&lock_, deadline);
  }
  return !stopping_;
}

std::chrono::milliseconds Membership::KeepAliveInterval() const {
  return std::max(std::chrono::milliseconds(100),
                  std::chrono::milliseconds(options_.lease_ttl_s * 1000 / 3));
}

Status Membership::ClaimMemberId(EtcdClient* etcd, int64_t lease) {
  // One read of the cluster's keys: the member keys and the claim cursor.
  std::string body;
  QR_RETURN_IF_ERROR(etcd->Call("/v3/kv/range", etcd::RangePrefixRequest(cluster_prefix_), &body));
  std::vector<etcd::KeyValue> kvs;
  int64_t revision = 0;
  QR_RETURN_IF_ERROR(etcd::ParseRange(body, &kvs, &revision));
  std::set<uint32_t> taken;
  uint32_t cursor = 0;
  for (const auto& kv : kvs) {
    if (kv.key == cursor_key_) {
      cursor = ParseCursor(kv.value, options_.max_member_id);
    } else {
      taken.insert(MemberIdOfKey(members_prefix_, kv.key));
    }
  }
  const std::vector<uint32_t> candidates =
      MemberIdCandidates(member_id(), cursor, options_.max_member_id, taken);
  ClusterMember self{0, options_.advertised_uri, options_.version, options_.start_time_ms};
  for (uint32_t id : candidates) {
    self.id = id;
    bool won = false;
    QR_RETURN_IF_ERROR(etcd->Call(
        "/v3/kv/txn",
        etcd::PutIfAbsentRequest(MemberKey(members_prefix_, id), EncodeMember(self), lease,
                                 cursor_key_, std::to_string(id)),
        &body));
    QR_RETURN_IF_ERROR(etcd::ParseTxnSucceeded(body, &won));
    if (!won) continue;  // another member claimed it since the read
    const uint32_t old = member_id_.exchange(id, std::memory_order_acq_rel);
    LOG(INFO) << "Cluster " << options_.cluster_name << ": registered as member " << id
              << " (" << options_.advertised_uri << ") on lease " << lease << " with a TTL of "
              << options_.lease_ttl_s << " s";
    if (old != id && on_member_id_) on_member_id_(id);
    return Status::OK();
  }
  return Status(StatusCode::kResourceExhausted,
                "no free member id: all of 1.." + std::to_string(options_.max_member_id) +
                    " are taken (--cluster_max_members)");
}

Status Membership::Register(EtcdClient* etcd) {
  std::string body;
  QR_RETURN_IF_ERROR(
      etcd->Call("/v3/lease/grant", etcd::LeaseGrantRequest(options_.lease_ttl_s), &body));
  int64_t lease = 0, ttl = 0;
  QR_RETURN_IF_ERROR(etcd::ParseLeaseGrant(body, &lease, &ttl));
  Status s = ClaimMemberId(etcd, lease);
  if (!s.ok()) {
    std::string ignored;  // best effort: it expires by itself otherwise
    (void)etcd->Call("/v3/lease/revoke", etcd::LeaseIdRequest(lease), &ignored);
    return s;
  }
  lease_ = lease;
  registrations_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

void Membership::LeaseLoop() {
  std::chrono::milliseconds backoff = kMinBackoff;
  auto retry = [&](const Status& s) {
    RecordError(s, /*lease_thread=*/true);
    bool go_on = WaitFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
    return go_on;
  };
  // A renewal failed: the next try comes after the backoff alone, not after another
  // interval too, since the lease runs out one TTL after the last renewal that succeeded (a
  // blip of etcd a third of the TTL long would otherwise cost the member its key).
  bool renew_now = false;
  while (true) {
    if (lease_ == 0) {
      Status s = Register(lease_etcd_.get());
      if (!s.ok()) {
        if (!retry(s)) return;
        continue;
      }
      SetState(ClusterState::kRegistered);
      backoff = kMinBackoff;
    }
    if (!renew_now && !WaitFor(KeepAliveInterval())) return;
    renew_now = false;
    std::string body;
    int64_t ttl = 0;
    Status s = lease_etcd_->Call("/v3/lease/keepalive", etcd::LeaseIdRequest(lease_), &body);
    if (s.ok()) s = etcd::ParseKeepAlive(body, &ttl);
    if (!s.ok()) {
      // Several tries fit in the TTL, whatever Options::max_backoff allows.
      backoff = std::min(backoff, KeepAliveInterval() / 4);
      if (!retry(s)) return;
      renew_now = true;
      continue;
    }
    if (ttl <= 0) {
      // etcd let the lease expire (unreachable past the TTL): the member key went with it.
      LOG(WARNING) << "Cluster " << options_.cluster_name << ": lease " << lease_
                   << " expired; registering again";
      lease_ = 0;
      SetState(ClusterState::kConnecting);
      continue;
    }
    lease_renewals_.fetch_add(1, std::memory_order_relaxed);
    SetState(ClusterState::kRegistered);
    backoff = kMinBackoff;
  }
}

void Membership::ApplyMember(const std::string& key, const std::string& value, bool is_delete) {
  const uint32_t id = MemberIdOfKey(members_prefix_, key);
  if (id == 0) return;
  ClusterMember m;
  if (is_delete) {
    MarkDeparted(id);
  } else if (DecodeMember(value, &m) && m.id == id) {
    departed_.erase(id);
    members_[id] = std::move(m);
  } else {
    LOG(WARNING) << "Cluster " << options_.cluster_name << ": ignoring member key " << key
                 << " with a value that is not a member: " << QuoteForError(value);
  }
}

void Membership::MarkDeparted(uint32_t id) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  DepartedMember& d = departed_[id];
  d.member = std::move(it->second);
  d.gone_since_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  members_.erase(it);
}

bool Membership::LookupMember(uint32_t id, ClusterMember* live, DepartedMember* departed) const {
  MutexLock l(&lock_);
  auto it = members_.find(id);
  if (it != members_.end()) {
    *live = it->second;
    return true;
  }
  auto d = departed_.find(id);
  *departed = d != departed_.end() ? d->second : DepartedMember{};
  departed->member.id = id;
  return false;
}

Status Membership::ReadAndWatch(EtcdClient* etcd) {
  std::string body;
  QR_RETURN_IF_ERROR(etcd->Call("/v3/kv/range", etcd::RangePrefixRequest(members_prefix_), &body));
  std::vector<etcd::KeyValue> kvs;
  int64_t revision = 0;
  QR_RETURN_IF_ERROR(etcd::ParseRange(body, &kvs, &revision));
  {
    MutexLock l(&lock_);
    // Members that left while the watch was down are departed from now on.
    std::map<uint32_t, ClusterMember> before = std::move(members_);
    members_.clear();
    for (const auto& kv : kvs) ApplyMember(kv.key, kv.value, /*is_delete=*/false);
    for (auto& [id, m] : before) {
      if (members_.contains(id)) continue;
      members_[id] = std::move(m);
      MarkDeparted(id);
    }
  }
  std::vector<etcd::WatchEvent> events;
  return etcd->Stream(
      "/v3/watch", etcd::WatchPrefixRequest(members_prefix_, revision + 1),
      [&](std::string_view message) {
        int64_t at = 0;
        QR_RETURN_IF_ERROR(etcd::ParseWatchMessage(message, &events, &at));
        MutexLock l(&lock_);
        for (const auto& e : events) ApplyMember(e.kv.key, e.kv.value, e.is_delete);
        return Status::OK();
      });
}

void Membership::WatchLoop() {
  std::chrono::milliseconds backoff = kMinBackoff;
  while (true) {
    const auto started = std::chrono::steady_clock::now();
    Status s = ReadAndWatch(watch_etcd_.get());
    RecordError(s, /*lease_thread=*/false);
    // A watch that ran a while was healthy: start the backoff over.
    if (std::chrono::steady_clock::now() - started > options_.max_backoff) backoff = kMinBackoff;
    if (!WaitFor(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

}  // namespace qr
