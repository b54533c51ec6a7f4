#include "util/unique-id.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

// A child of fork() inherits its thread's generator and secure pool: without new seeds it
// made the very ids and secrets (nextUri slugs) its parent made next.
TEST(UniqueIdTest, AForkedChildDrawsNewSeeds) {
  // Both generators in use (seeded, a pool with values left) before the fork.
  (void)GenerateQueryId();
  (void)SecureRandomU64();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t values[3] = {GenerateQueryId().hi, SecureRandomU64(), RandomU64()};
    const bool ok = write(fds[1], values, sizeof(values)) == sizeof(values);
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  uint64_t child[3] = {};
  size_t got = 0;
  while (got < sizeof(child)) {
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(child) + got, sizeof(child) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, sizeof(child));
  const uint64_t parent[3] = {GenerateQueryId().hi, SecureRandomU64(), RandomU64()};
  EXPECT_NE(child[0], parent[0]) << "the same query id in parent and child";
  EXPECT_NE(child[1], parent[1]) << "the same secret in parent and child";
  EXPECT_NE(child[2], parent[2]);
}

TEST(UniqueIdTest, PrintParseRoundTrip) {
  for (int i = 0; i < 1000; ++i) {
    UniqueId id = GenerateQueryId();
    std::string s = PrintId(id);
    ASSERT_EQ(s.size(), 33u);
    UniqueId back;
    ASSERT_TRUE(ParseId(s, &back).ok()) << s;
    EXPECT_EQ(back, id);
  }
  UniqueId id{0x0123456789abcdefULL, 0xfedcba9800000000ULL};
  EXPECT_EQ(PrintId(id), "0123456789abcdef:fedcba9800000000");
}

TEST(UniqueIdTest, ParseAcceptsUppercase) {
  UniqueId id;
  ASSERT_TRUE(ParseId("0123456789ABCDEF:FEDCBA9876543210", &id).ok());
  EXPECT_EQ(id.hi, 0x0123456789abcdefULL);
  EXPECT_EQ(id.lo, 0xfedcba9876543210ULL);
}

TEST(UniqueIdTest, ParseRejectsMalformedInput) {
  const std::string kBad[] = {
      "",
      ":",
      "0123456789abcdef0123456789abcdef0",   // no colon
      "0123456789abcde:0123456789abcdef",    // 15 digits in hi
      "0123456789abcdef:0123456789abcde",    // 15 digits in lo
      "0123456789abcdef0:123456789abcdef",   // colon misplaced
      "0123456789abcdef1:0123456789abcdef",  // 17 digits in hi
      "0123456789abcdef:0123456789abcdef1",  // 17 digits in lo
      "0123456789abcdeg:0123456789abcdef",   // non-hex
      "0123456789abcdef:0123456789abcdeZ",   // non-hex
      " 123456789abcdef:0123456789abcdef",   // space
      "0123456789abcdef:0123456789abcde ",   // trailing space
      "+123456789abcdef:0123456789abcdef",   // sign
      "-123456789abcdef:0123456789abcdef",   // sign
      "0x23456789abcdef:0123456789abcdef",   // prefix
      "0123456789abcdef:",                   // empty lo
      ":0123456789abcdef",                   // empty hi
      std::string("0123456789abcdef:0123456789abcde\0", 33),
  };
  for (const std::string& s : kBad) {
    UniqueId id{1, 2};
    Status st = ParseId(s, &id);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "accepted " << QuoteForError(s);
    EXPECT_EQ(id, (UniqueId{1, 2})) << "output written on failure";
  }
}

TEST(UniqueIdTest, ParseErrorQuotesTruncatedInput) {
  UniqueId id;
  Status st = ParseId("not-an-id", &id);
  EXPECT_NE(st.message().find("'not-an-id'"), std::string::npos) << st.message();
  std::string huge(10 * 1024, 'a');
  st = ParseId(huge, &id);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_LT(st.message().size(), 300u);
  EXPECT_NE(st.message().find("10240 bytes"), std::string::npos) << st.message();
}

TEST(UniqueIdTest, GeneratedIdsHaveZeroLowBits) {
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(GenerateQueryId().lo & 0xffffffffULL, 0u);
}

TEST(UniqueIdTest, MillionIdsFromFourThreadsAreUnique) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250000;
  std::vector<std::vector<UniqueId>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      per_thread[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) per_thread[t].push_back(GenerateQueryId());
    });
  }
  for (auto& th : threads) th.join();
  std::vector<UniqueId> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  ASSERT_EQ(all.size(), size_t{kThreads} * kPerThread);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate id generated";
}

TEST(UniqueIdTest, HashSeparatesIdsThatDifferOnlyInLo) {
  UniqueIdHash h;
  EXPECT_NE(h(UniqueId{1, 0}), h(UniqueId{1, 1ULL << 32}));
  EXPECT_NE(h(UniqueId{1, 0}), h(UniqueId{0, 1}));
}

}  // namespace
}  // namespace qr

namespace qr {
namespace {

TEST(QueryOwnerTest, OwnerRoundTripsThroughIdAndText) {
  for (uint32_t owner : {1u, 2u, 7u, 1024u, 40000u, kMaxQueryOwner}) {
    for (int i = 0; i < 100; ++i) {
      const UniqueId id = GenerateQueryId(owner);
      EXPECT_EQ(QueryOwner(id), owner);
      UniqueId parsed;
      ASSERT_TRUE(ParseId(PrintId(id), &parsed).ok());
      EXPECT_EQ(QueryOwner(parsed), owner) << PrintId(id);
    }
  }
}

TEST(QueryOwnerTest, NoOwnerIsZero) {
  EXPECT_EQ(QueryOwner(GenerateQueryId(0)), 0u);
  EXPECT_EQ(QueryOwner(WithQueryOwner(GenerateQueryId(5), 0)), 0u);
}

TEST(QueryOwnerTest, OnlyTheOwnerBitsChange) {
  const UniqueId id{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  const UniqueId owned = WithQueryOwner(id, 0x1234);
  EXPECT_EQ(owned.hi, id.hi);
  // Fragment bits (0..31) and the random bits below the owner (32..47) stay.
  EXPECT_EQ(owned.lo & 0x0000ffffffffffffULL, id.lo & 0x0000ffffffffffffULL);
  EXPECT_EQ(owned.lo, 0x1234ba9876543210ULL);
  EXPECT_EQ(QueryOwner(owned), 0x1234u);
  // Re-owning replaces, never ORs.
  EXPECT_EQ(QueryOwner(WithQueryOwner(owned, 0x0001)), 0x0001u);
  EXPECT_EQ(WithQueryOwner(owned, 0x0001).lo & 0x0000ffffffffffffULL,
            id.lo & 0x0000ffffffffffffULL);
}

TEST(QueryOwnerTest, OwnedIdsKeepFragmentBitsZeroAndDiffer) {
  std::vector<UniqueId> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(GenerateQueryId(3));
  for (const UniqueId& id : ids) EXPECT_EQ(id.lo & 0xffffffffULL, 0u);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}

}  // namespace
}  // namespace qr
