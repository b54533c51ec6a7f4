#include "util/sharded-query-map-util.h"

#include <string>

namespace qr {

Status ValidateNumShards(int64_t num_shards) {
  if (num_shards < 1 || num_shards > kMaxRegistryShards ||
      (num_shards & (num_shards - 1)) != 0) {
    return InvalidArgument("invalid number of registry shards " + std::to_string(num_shards) +
                           ": must be a power of two between 1 and " +
                           std::to_string(kMaxRegistryShards));
  }
  return Status::OK();
}

namespace internal {
void DieOnReentry(const char* method, const char* holder) {
  CheckFailed(__FILE__, __LINE__, "no shard lock of this map held by this thread",
              std::string("ShardedQueryMap::") + method + " called from inside a " + holder +
                  " on the same map: that runs under a shard lock and must not touch the map "
                  "(this would deadlock). Copy what you need out first, or use Snapshot() or "
                  "ForEachUnlocked().");
}
}  // namespace internal

}  // namespace qr
