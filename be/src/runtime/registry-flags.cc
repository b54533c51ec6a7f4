#include "runtime/registry-flags.h"

#include <cstdio>

#include <gflags/gflags.h>

#include "util/sharded-query-map-util.h"
#include "util/status.h"

DEFINE_int32(registry_num_shards, qr::kDefaultNumShards,
             "Shards of each process-wide query registry: a power of two in [1, 4096]. "
             "1 means a single global lock.");

namespace {
bool ValidateNumShardsFlag(const char* flagname, int32_t value) {
  qr::Status s = qr::ValidateNumShards(value);
  if (!s.ok()) fprintf(stderr, "--%s: %s\n", flagname, s.message().c_str());
  return s.ok();
}
}  // namespace
DEFINE_validator(registry_num_shards, &ValidateNumShardsFlag);
