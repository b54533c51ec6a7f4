#include "session-registry.h"

#include <utility>

namespace example {

SessionRegistry::SessionId SessionRegistry::Open(std::string user, std::string address,
                                                 int64_t now) {
  const SessionId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  auto session = std::make_shared<Session>(std::move(user), std::move(address), now);
  // Ids are never reused, so Add cannot find one registered.
  qr::Status s = sessions_.Add(id, std::move(session));
  QR_CHECK(s.ok(), s.message());
  return id;
}

std::shared_ptr<Session> SessionRegistry::Touch(SessionId id, int64_t now) {
  // Refreshed under the shard's shared lock: ExpireIdle() checks the time again under the
  // exclusive one, so a session is either refreshed before that check or found closed here,
  // never closed just after a request used it.
  return sessions_.VisitShared(
      id, [now](const std::shared_ptr<Session>* session) -> std::shared_ptr<Session> {
        if (session == nullptr) return nullptr;
        (*session)->last_active.store(now, std::memory_order_relaxed);
        (*session)->requests.fetch_add(1, std::memory_order_relaxed);
        return *session;
      });
}

bool SessionRegistry::Close(SessionId id) { return sessions_.Delete(id).ok(); }

size_t SessionRegistry::ExpireIdle(int64_t now, int64_t max_idle) {
  // Collect under the shard locks, delete after: a DoFuncForAllEntries callback must not call
  // back into the map.
  std::vector<SessionId> idle;
  sessions_.DoFuncForAllEntries([&](const SessionId& id, std::shared_ptr<Session>& session) {
    if (now - session->last_active.load(std::memory_order_relaxed) > max_idle) {
      idle.push_back(id);
    }
  });
  // Each one checked again under its shard's exclusive lock before it goes: a request may have
  // refreshed it since (Touch() refreshes under the shared lock). The session is released
  // after the lock.
  size_t closed = 0;
  for (SessionId id : idle) {
    std::shared_ptr<Session> victim;
    {
      Sessions::ScopedShardedMapRef ref(id, &sessions_);
      auto it = ref->find(id);
      if (it == ref->end() ||
          now - it->second->last_active.load(std::memory_order_relaxed) <= max_idle) {
        continue;
      }
      victim = std::move(it->second);
      ref->erase(it);
    }
    ++closed;
  }
  return closed;
}

size_t SessionRegistry::CountForUser(const std::string& user) {
  size_t n = 0;
  sessions_.DoFuncForAllEntries([&](const SessionId&, std::shared_ptr<Session>& session) {
    if (session->user == user) ++n;
  });
  return n;
}

}  // namespace example
