// Utf8CharLength: well-formed sequences step whole, each maximal ill-formed subpart steps as
// one (the counts the Unicode standard's U+FFFD substitution uses).

#include "runtime/utf8.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace qr {
namespace {

struct Step {
  size_t length;
  bool valid;
  bool operator==(const Step&) const = default;
};

std::vector<Step> Steps(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  std::vector<Step> steps;
  while (p < end) {
    bool valid = false;
    const size_t n = Utf8CharLength(p, end, &valid);
    steps.push_back({n, valid});
    p += n;
  }
  return steps;
}

TEST(Utf8Test, WellFormedSequencesStepWhole) {
  EXPECT_EQ(Steps("a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x8E\x89"),
            (std::vector<Step>{{1, true}, {2, true}, {3, true}, {4, true}}));
  // The extremes of each length: U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF.
  EXPECT_EQ(Steps("\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"),
            (std::vector<Step>{{2, true}, {2, true}, {3, true}, {3, true}, {4, true}, {4, true}}));
  EXPECT_EQ(Steps(std::string_view("\0x", 2)), (std::vector<Step>{{1, true}, {1, true}}));
}

TEST(Utf8Test, IllFormedSubpartsStepAsOne) {
  // Stray continuation bytes and bytes that never start a sequence: one each.
  EXPECT_EQ(Steps("\x80\xBF"), (std::vector<Step>{{1, false}, {1, false}}));
  EXPECT_EQ(Steps("\xC0\xAF"), (std::vector<Step>{{1, false}, {1, false}}));  // overlong '/'
  EXPECT_EQ(Steps("\xF5\x80"), (std::vector<Step>{{1, false}, {1, false}}));
  // Overlong three- and four-byte forms, a surrogate, a code point above U+10FFFF: the lead
  // byte alone, then the continuation bytes one by one.
  EXPECT_EQ(Steps("\xE0\x80\x80"), (std::vector<Step>{{1, false}, {1, false}, {1, false}}));
  EXPECT_EQ(Steps("\xF0\x8F\xBF\xBF").size(), 4u);
  EXPECT_EQ(Steps("\xED\xA0\x80"), (std::vector<Step>{{1, false}, {1, false}, {1, false}}));
  EXPECT_EQ(Steps("\xF4\x90\x80\x80").front(), (Step{1, false}));
  // A sequence cut short takes the bytes it has: by the end of input, or by another byte.
  EXPECT_EQ(Steps("\xE6\x97"), (std::vector<Step>{{2, false}}));
  EXPECT_EQ(Steps("\xF0\x9F\x8Ex"), (std::vector<Step>{{3, false}, {1, true}}));
  EXPECT_EQ(Steps("\xC3"), (std::vector<Step>{{1, false}}));
}

TEST(Utf8Test, StringViewOverloadStepsFromAnIndex) {
  const std::string_view s = "a\xC3\xA9\x80z";
  EXPECT_EQ(Utf8CharLength(s, 0), 1u);
  EXPECT_EQ(Utf8CharLength(s, 1), 2u);
  EXPECT_EQ(Utf8CharLength(s, 3), 1u);
  EXPECT_EQ(Utf8CharLength(s, 4), 1u);
}

}  // namespace
}  // namespace qr
