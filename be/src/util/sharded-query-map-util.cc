#include "util/sharded-query-map-util.h"

#include <gflags/gflags.h>

DEFINE_int32(registry_num_shards, 256,
             "Shards of each process-wide query registry: a power of two in [1, 4096]. "
             "1 means a single global lock.");

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

namespace {
bool ValidateNumShardsFlag(const char* flagname, int32_t value) {
  Status s = ValidateNumShards(value);
  if (!s.ok()) fprintf(stderr, "--%s: %s\n", flagname, s.message().c_str());
  return s.ok();
}
}  // namespace
DEFINE_validator(registry_num_shards, &ValidateNumShardsFlag);

namespace internal {
void DieOnReentry(const char* method) {
  LOG(FATAL) << "ShardedQueryMap::" << method
             << " called from inside a DoFuncForAllEntries callback on the same map: the "
                "callback runs under a shard lock and must not touch the map (this would "
                "deadlock). Use Snapshot() or ForEachUnlocked() instead.";
  __builtin_unreachable();
}
}  // namespace internal

}  // namespace qr
