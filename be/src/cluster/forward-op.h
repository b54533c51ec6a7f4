#pragma once

// What forwarder.cc and forward-op.cc share, internal to qr_cluster (not installed): the
// connection pool of a Forwarder, its connection type, the header-name helpers, and the start
// of one forwarded request (ForwardOp, forward-op.cc).

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "cluster/forwarder.h"
#include "cluster/maybe-tls-stream.h"
#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

/// A connection to a member, plain or TLS (its advertised URI's scheme).
class Forwarder::Connection : public MaybeTlsStream {
 public:
  using MaybeTlsStream::MaybeTlsStream;
};

/// The idle connections per member and the counters; shared with the operations in flight,
/// which may end after the Forwarder is gone.
struct Forwarder::Pool {
  explicit Pool(size_t max_idle) : max_idle(max_idle) {}

  std::unique_ptr<Connection> Take(const std::string& key) QR_EXCLUDES(mu) {
    MutexLock l(&mu);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    std::unique_ptr<Connection> s = std::move(it->second.back());
    it->second.pop_back();
    return s;
  }

  void Put(const std::string& key, std::unique_ptr<Connection> s) QR_EXCLUDES(mu) {
    MutexLock l(&mu);
    std::vector<std::unique_ptr<Connection>>& v = idle[key];
    if (closed || v.size() >= max_idle) return;  // 's' closes as it goes
    v.push_back(std::move(s));
  }

  /// Counts a request answered without a hop (the owner is gone): no latency.
  void RecordNoHop(int result) { results[result].fetch_add(1, std::memory_order_relaxed); }

  void Record(int result, std::chrono::steady_clock::duration took) {
    results[result].fetch_add(1, std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(took).count();
    for (size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
      if (s <= kLatencyBucketsSeconds[i]) buckets[i].fetch_add(1, std::memory_order_relaxed);
    }
    buckets.back().fetch_add(1, std::memory_order_relaxed);
    latency_us.fetch_add(static_cast<int64_t>(s * 1e6), std::memory_order_relaxed);
  }

  const size_t max_idle;
  mutable Mutex mu;
  bool closed QR_GUARDED_BY(mu) = false;
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle QR_GUARDED_BY(mu);
  std::array<std::atomic<int64_t>, kNumResults> results{};
  std::array<std::atomic<int64_t>, kLatencyBucketsSeconds.size() + 1> buckets{};
  std::atomic<int64_t> latency_us{0};
  std::atomic<int64_t> busy{0};
  std::atomic<int64_t> opened{0};
  std::atomic<int64_t> bytes_relayed{0};
};

namespace forwarding {

/// ASCII case-insensitive equality (header names).
bool IEquals(std::string_view a, std::string_view b);

/// Headers that belong to one hop (RFC 9110 7.6.1) or that the server sets itself. Expect
/// is one here: the member answered the client's 100-continue itself and read the body, so
/// the owner must not answer one (its 100 would be read as the answer).
bool IsHopHeader(std::string_view name);

/// Starts one forwarded request on 'io' (see ForwardOp in forward-op.cc): connects to
/// 'host':'port' (over TLS with 'tls', a pooled connection of 'pool' if one is idle), writes
/// 'request', reads the answer within 'deadline' (each read of a streamed body within
/// 'bound') and calls 'done' with it. 'stream': the answer's body is relayed as a BodySource;
/// else read whole. 'what' names the owner in messages.
void StartForwardOp(std::shared_ptr<Forwarder::Pool> pool, boost::asio::io_context& io,
                    std::shared_ptr<boost::asio::ssl::context> tls, std::string host,
                    std::string port,
                    boost::beast::http::request<boost::beast::http::string_body> request,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds bound, Forwarder::SendCallback done,
                    std::string what, bool stream);

}  // namespace forwarding
}  // namespace qr
