// Exercises SessionRegistry from several threads and checks every count: exit code 0 when all
// hold, 1 (with a message per failed check) otherwise.

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <query_registry/seqlock-tag-map.h>
#include <query_registry/unique-id.h>

#include "session-registry.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  constexpr int kThreads = 4;
  constexpr int kSessionsPerThread = 5000;
  example::SessionRegistry registry(64);

  // Each thread opens its sessions at time 0, touches every one at time 10, closes every
  // other one, and checks that a closed session is gone and an open one is found.
  std::vector<std::vector<example::SessionRegistry::SessionId>> kept(kThreads);
  std::vector<int> thread_failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string user = "user" + std::to_string(t);
      std::vector<example::SessionRegistry::SessionId> ids;
      for (int i = 0; i < kSessionsPerThread; ++i) {
        ids.push_back(registry.Open(user, "10.0.0." + std::to_string(t), /*now=*/0));
      }
      for (auto id : ids) {
        auto session = registry.Touch(id, /*now=*/10);
        if (session == nullptr || session->user != user) ++thread_failures[t];
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i % 2 == 0) {
          if (!registry.Close(ids[i])) ++thread_failures[t];
          if (registry.Touch(ids[i], 10) != nullptr) ++thread_failures[t];
          if (registry.Close(ids[i])) ++thread_failures[t];  // Closing twice fails.
        } else {
          kept[t].push_back(ids[i]);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    Expect(thread_failures[t] == 0, "thread " + std::to_string(t) + ": " +
                                        std::to_string(thread_failures[t]) + " wrong results");
  }

  const size_t open = kThreads * kSessionsPerThread / 2;
  Expect(registry.size() == open, "size " + std::to_string(registry.size()) + ", expected " +
                                      std::to_string(open));
  for (int t = 0; t < kThreads; ++t) {
    const size_t n = registry.CountForUser("user" + std::to_string(t));
    Expect(n == kSessionsPerThread / 2, "user" + std::to_string(t) + " has " +
                                            std::to_string(n) + " sessions");
  }

  // Thread 0's sessions become active again at 100; at 105 with a 30 s limit, the others
  // (last active at 10) expire, while lookups run concurrently on thread 0's sessions.
  for (auto id : kept[0]) registry.Touch(id, 100);
  std::thread reader([&] {
    for (auto id : kept[0]) {
      if (registry.Touch(id, 100) == nullptr) ++thread_failures[0];
    }
  });
  const size_t expired = registry.ExpireIdle(/*now=*/105, /*max_idle=*/30);
  reader.join();
  Expect(thread_failures[0] == 0, "a session active at 100 was not found during expiry");
  Expect(expired == open - kept[0].size(), "expired " + std::to_string(expired));
  Expect(registry.size() == kept[0].size(), "after expiry: " + std::to_string(registry.size()));

  // The default key type is the 128-bit qr::UniqueId.
  qr::ShardedQueryMap<int> by_query_id;
  const qr::UniqueId id = qr::GenerateQueryId();
  Expect(by_query_id.Add(id, 1).ok() && by_query_id.Get(id) == 1, "UniqueId-keyed map");
  Expect(by_query_id.num_shards() == qr::kDefaultNumShards, "default shard count");

  // SeqlockQueryMap holds pointers and looks them up without a lock: a writer adds and deletes
  // while readers look up the entries that stay, which must always be found with their value.
  static const int kValues[2] = {7, 8};
  qr::SeqlockQueryMap<const int*> pointers(16);
  std::vector<qr::UniqueId> stay(1000), churn(1000);
  for (auto& k : stay) {
    k = qr::GenerateQueryId();
    pointers.Add(k, &kValues[0]);
  }
  for (auto& k : churn) k = qr::GenerateQueryId();
  std::thread writer([&] {
    for (int round = 0; round < 20; ++round) {
      for (const auto& k : churn) pointers.Add(k, &kValues[1]);
      for (const auto& k : churn) pointers.Delete(k);
    }
  });
  int misses = 0;
  for (int round = 0; round < 20; ++round) {
    for (const auto& k : stay) {
      const int* v = nullptr;
      if (!pointers.Get(k, &v) || v != &kValues[0]) ++misses;
    }
  }
  writer.join();
  Expect(misses == 0, std::to_string(misses) + " lookups of SeqlockQueryMap missed");
  Expect(pointers.Count() == stay.size(), "SeqlockQueryMap count " +
                                              std::to_string(pointers.Count()));

  if (failures == 0) std::printf("session-registry: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
