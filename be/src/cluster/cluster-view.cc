#include "cluster/cluster-view.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "cluster/forward-auth.h"
#include "util/mutex.h"

namespace qr {

bool IsLocalOnlyRequest(const HttpRequest& req, bool authentication) {
  if (req.Header(kForwardedByHeader).empty()) return false;
  return !authentication || !req.Header(kForwardedPrincipalHeader).empty();
}

Forwarder::Outgoing SubRequestOf(const HttpRequest& req) {
  Forwarder::Outgoing out;
  out.method = req.method_string.empty() ? "GET" : req.method_string;
  out.target = req.target;
  for (const char* name : {"Host", "X-Trino-User", "X-Presto-User"}) {
    std::string_view v = req.Header(name);
    if (!v.empty()) out.headers.emplace_back(name, std::string(v));
  }
  out.principal = req.authenticated_user;
  out.secure = req.secure;
  return out;
}

struct ClusterView::Counters {
  std::atomic<int64_t> fan_outs{0};
  std::atomic<int64_t> member_requests{0};
  std::atomic<int64_t> member_failures{0};
  std::array<std::atomic<int64_t>, kLatencyBucketsSeconds.size() + 1> buckets{};
  std::atomic<int64_t> latency_us{0};

  void Record(std::chrono::steady_clock::duration took) {
    const double s = std::chrono::duration<double>(took).count();
    for (size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
      if (s <= kLatencyBucketsSeconds[i]) buckets[i].fetch_add(1, std::memory_order_relaxed);
    }
    buckets.back().fetch_add(1, std::memory_order_relaxed);
    latency_us.fetch_add(static_cast<int64_t>(s * 1e6), std::memory_order_relaxed);
  }
};

namespace {

/// One fan-out: the answers so far; the last one in calls 'done'.
struct FanOutState {
  Mutex mu;
  std::vector<MemberAnswer> answers QR_GUARDED_BY(mu);
  size_t pending QR_GUARDED_BY(mu) = 0;
  ClusterView::Done done;
  std::shared_ptr<ClusterView::Counters> counters;
  std::chrono::steady_clock::time_point started;
};

std::string Snippet(const std::string& body) {
  std::string s = body.substr(0, 200);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

ClusterView::ClusterView(Options options, Forwarder* forwarder)
    : options_(options), forwarder_(forwarder), counters_(std::make_shared<Counters>()) {}

std::vector<ClusterMember> ClusterView::OtherMembers() const {
  std::vector<ClusterMember> out;
  const Membership* membership = membership_.load(std::memory_order_acquire);
  if (membership == nullptr) return out;
  const uint32_t self = membership->member_id();
  for (ClusterMember& m : membership->GetSnapshot().members) {
    if (m.id != self) out.push_back(std::move(m));
  }
  return out;
}

ClusterMember ClusterView::Self() const {
  ClusterMember m;
  const Membership* membership = membership_.load(std::memory_order_acquire);
  if (membership == nullptr) return m;
  DepartedMember departed;
  const uint32_t id = membership->member_id();
  if (id == 0 || !membership->LookupMember(id, &m, &departed)) m.id = id;
  return m;
}

void ClusterView::FanOut(const Forwarder::Outgoing& request, boost::asio::io_context& io,
                         Done done) {
  std::vector<ClusterMember> members = OtherMembers();
  counters_->fan_outs.fetch_add(1, std::memory_order_relaxed);
  auto state = std::make_shared<FanOutState>();
  state->done = std::move(done);
  state->counters = counters_;
  state->started = std::chrono::steady_clock::now();
  if (members.empty()) {
    counters_->Record(std::chrono::steady_clock::duration::zero());
    state->done({});
    return;
  }
  {
    MutexLock l(&state->mu);
    state->pending = members.size();
    state->answers.resize(members.size());
    for (size_t i = 0; i < members.size(); ++i) state->answers[i].member = members[i];
  }
  counters_->member_requests.fetch_add(static_cast<int64_t>(members.size()),
                                       std::memory_order_relaxed);
  for (size_t i = 0; i < members.size(); ++i) {
    forwarder_->Send(
        members[i], request, options_.timeout, io,
        [state, i](int result, HttpResponse response, std::string error) {
          std::vector<MemberAnswer> all;
          {
            MutexLock l(&state->mu);
            MemberAnswer& a = state->answers[i];
            if (result != Forwarder::kOk) {
              a.error = std::move(error);
            } else if (response.status != 200) {
              a.error = "Coordinator member " + std::to_string(a.member.id) + " at " +
                        a.member.uri + " answered HTTP " + std::to_string(response.status) +
                        ": " + Snippet(response.body);
            } else {
              a.ok = true;
              a.response = std::move(response);
            }
            if (!a.ok) state->counters->member_failures.fetch_add(1, std::memory_order_relaxed);
            if (--state->pending > 0) return;
            all = std::move(state->answers);
          }
          state->counters->Record(std::chrono::steady_clock::now() - state->started);
          state->done(std::move(all));
        });
  }
}

std::vector<MemberAnswer> ClusterView::FanOutBlocking(const Forwarder::Outgoing& request,
                                                      boost::asio::io_context& io) {
  struct Wait {
    Mutex mu;
    CondVar cv;
    bool finished QR_GUARDED_BY(mu) = false;
    std::vector<MemberAnswer> answers QR_GUARDED_BY(mu);
  };
  auto wait = std::make_shared<Wait>();
  std::vector<ClusterMember> members = OtherMembers();
  FanOut(request, io, [wait](std::vector<MemberAnswer> answers) {
    MutexLock l(&wait->mu);
    wait->answers = std::move(answers);
    wait->finished = true;
    wait->cv.NotifyAll();
  });
  // Each request ends by its own deadline; the margin covers the hand-offs. An io_context
  // that stopped (shutdown) never calls back: the members are then marked as not answering.
  const auto until = std::chrono::steady_clock::now() + options_.timeout +
                     std::chrono::milliseconds(500);
  MutexLock l(&wait->mu);
  while (!wait->finished) {
    if (!wait->cv.WaitUntil(&wait->mu, until)) break;
  }
  if (wait->finished) return std::move(wait->answers);
  std::vector<MemberAnswer> none(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    none[i].member = members[i];
    none[i].error = "Coordinator member " + std::to_string(members[i].id) + " at " +
                    members[i].uri + " did not answer in time";
  }
  return none;
}

ClusterView::Stats ClusterView::GetStats() const {
  Stats s;
  s.fan_outs = counters_->fan_outs.load();
  s.member_requests = counters_->member_requests.load();
  s.member_failures = counters_->member_failures.load();
  for (size_t i = 0; i < s.latency_buckets.size(); ++i) {
    s.latency_buckets[i] = counters_->buckets[i].load();
  }
  s.latency_seconds_sum = static_cast<double>(counters_->latency_us.load()) / 1e6;
  return s;
}

}  // namespace qr
