#include "runtime/registry-flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include "runtime/query-exec-mgr.h"
#include "util/sharded-query-map-util.h"

namespace qr {
namespace {

TEST(RegistryFlagsTest, DefaultIsTheLibraryDefault) {
  EXPECT_EQ(FLAGS_registry_num_shards, kDefaultNumShards);
}

TEST(RegistryFlagsTest, FlagRejectsBadShardCounts) {
  gflags::FlagSaver saver;
  // gflags runs the validator: an empty result means the value was refused.
  EXPECT_EQ(gflags::SetCommandLineOption("registry_num_shards", "3"), "");
  EXPECT_EQ(gflags::SetCommandLineOption("registry_num_shards", "0"), "");
  EXPECT_EQ(gflags::SetCommandLineOption("registry_num_shards", "8192"), "");
  EXPECT_NE(gflags::SetCommandLineOption("registry_num_shards", "16"), "");
  EXPECT_EQ(FLAGS_registry_num_shards, 16);
}

}  // namespace
}  // namespace qr
