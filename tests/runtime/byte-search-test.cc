// FindBytes (instr/replace's search): the same first match as memmem on random and
// adversarial inputs, through both of its paths and across its windows, and a check of the
// step's checkpoint every 64 KiB of haystack, which can stop it.

#include "runtime/byte-search.h"

#include <string.h>

#include <random>
#include <string>

#include <gtest/gtest.h>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

size_t Memmem(const std::string& hay, const std::string& needle) {
  const void* found = memmem(hay.data(), hay.size(), needle.data(), needle.size());
  return found == nullptr ? SIZE_MAX : static_cast<const char*>(found) - hay.data();
}

size_t Find(const std::string& hay, const std::string& needle) {
  WorkCheckpoints checkpoints;
  return FindBytes(reinterpret_cast<const unsigned char*>(hay.data()), hay.size(),
                   reinterpret_cast<const unsigned char*>(needle.data()), needle.size(),
                   &checkpoints);
}

TEST(ByteSearchTest, FirstMatchAsMemmemOnRandomInputs) {
  std::mt19937 rng(1127);
  auto text = [&](size_t n, int letters) {
    std::string s(n, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % letters);
    return s;
  };
  for (int i = 0; i < 400; ++i) {
    const int letters = 1 + static_cast<int>(rng() % 3);
    // Needles on both sides of kShortNeedle; haystacks across several 64 KiB windows.
    const size_t m = 1 + rng() % (i % 2 == 0 ? 40 : 3 * kShortNeedle);
    std::string hay = text(rng() % (3 * kCheckpointBytes), letters);
    std::string needle = text(m, letters);
    if (i % 3 == 0 && hay.size() > m) {  // plant it, sometimes across a window's end
      const size_t at = i % 6 == 0 ? kCheckpointBytes - m / 2 : rng() % (hay.size() - m + 1);
      if (at + m <= hay.size()) hay.replace(at, m, needle);
    }
    ASSERT_EQ(Find(hay, needle), Memmem(hay, needle)) << "i=" << i << " m=" << m;
  }
}

TEST(ByteSearchTest, AdversarialRunsAndEdges) {
  const std::string hay = std::string(1 << 20, 'a') + 'b';
  for (const size_t m : {size_t{1}, size_t{2}, size_t{1000}, kShortNeedle, kShortNeedle + 1,
                         size_t{300000}, size_t{1} << 19}) {
    const std::string needle = std::string(m - 1, 'a') + 'b';
    EXPECT_EQ(Find(hay, needle), hay.size() - m) << m;
    EXPECT_EQ(Find(hay, needle + 'a'), SIZE_MAX) << m;
    EXPECT_EQ(Find(hay, std::string(m, 'a')), 0u) << m;
  }
  EXPECT_EQ(Find("abc", "abcd"), SIZE_MAX);
  EXPECT_EQ(Find("abc", "abc"), 0u);
  EXPECT_EQ(Find(std::string("x\0y", 3), std::string("\0y", 2)), 1u);
  std::string zeros(2000, '\0');
  zeros.push_back('z');
  EXPECT_EQ(Find(std::string(5000, '\xff').append(zeros), zeros), 5000u);
}

struct Counter {
  int calls = 0;
  int stop_at = 0;  // 0: never
};

bool Count(void* arg, bool /*may_yield*/) {
  auto* counter = static_cast<Counter*>(arg);
  ++counter->calls;
  return counter->stop_at != 0 && counter->calls >= counter->stop_at;
}

TEST(ByteSearchTest, ChecksEvery64KiBAndStopsWhenTold) {
  const std::string hay(16 * kCheckpointBytes, 'a');
  for (const size_t m : {size_t{3}, kShortNeedle * 4}) {
    SCOPED_TRACE(m);
    const std::string needle = std::string(m - 1, 'a') + 'b';
    Counter counter;
    {
      const StepCheckpoint checkpoint(&Count, &counter);
      EXPECT_EQ(Find(hay, needle), SIZE_MAX);
    }
    EXPECT_GE(counter.calls, 14);
    EXPECT_LE(counter.calls, 17);
    counter = {.calls = 0, .stop_at = 3};
    WorkCheckpoints checkpoints;
    {
      const StepCheckpoint checkpoint(&Count, &counter);
      EXPECT_EQ(FindBytes(reinterpret_cast<const unsigned char*>(hay.data()), hay.size(),
                          reinterpret_cast<const unsigned char*>(needle.data()), m,
                          &checkpoints),
                SIZE_MAX);
    }
    EXPECT_TRUE(checkpoints.stopped());
    EXPECT_EQ(counter.calls, 3) << "no check after the one that said stop";
  }
  // Without an installed check, nothing is called and nothing stops.
  WorkCheckpoints checkpoints;
  EXPECT_FALSE(checkpoints.Advance(kCheckpointBytes * 2));
  EXPECT_FALSE(StepCheckpoint::Check());
}

}  // namespace
}  // namespace qr
