#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <query_registry/sharded-query-map-util.h>

namespace example {

/// One client session of a network server: who, from where, and when it was last active.
struct Session {
  Session(std::string user, std::string address, int64_t now)
      : user(std::move(user)), address(std::move(address)), last_active(now) {}
  const std::string user;
  const std::string address;
  /// Seconds of the server's clock; updated without the registry's lock.
  std::atomic<int64_t> last_active;
  std::atomic<uint64_t> requests{0};
};

/// The server's live sessions, keyed by a 64-bit session number: a ShardedQueryMap with an
/// integer key, so that request threads looking up different sessions rarely contend.
/// Thread-safety: all methods are thread-safe.
class SessionRegistry {
 public:
  using SessionId = uint64_t;

  explicit SessionRegistry(int num_shards = qr::kDefaultNumShards) : sessions_(num_shards) {}

  /// Registers a new session and returns its id.
  SessionId Open(std::string user, std::string address, int64_t now);
  /// The session 'id', or nullptr when it is closed; counts a request and refreshes it.
  std::shared_ptr<Session> Touch(SessionId id, int64_t now);
  /// Closes 'id'; false if it was not open.
  bool Close(SessionId id);
  /// Closes every session idle for more than 'max_idle' seconds; returns how many.
  size_t ExpireIdle(int64_t now, int64_t max_idle);
  /// Open sessions of 'user' (one pass over the shards, each under its lock).
  size_t CountForUser(const std::string& user);
  size_t size() const { return sessions_.Count(); }

 private:
  using Sessions = qr::ShardedQueryMap<std::shared_ptr<Session>, SessionId>;
  std::atomic<SessionId> next_id_{1};
  Sessions sessions_;
};

}  // namespace example
