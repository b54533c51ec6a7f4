#pragma once

// The daemon's --registry_num_shards flag: the shard count of each process-wide query registry
// (QueryExecMgr's and the coordinator's ShardedQueryMap). The library's map takes its shard
// count as an argument (default qr::kDefaultNumShards); the daemon passes this flag.

#include <gflags/gflags_declare.h>

DECLARE_int32(registry_num_shards);
