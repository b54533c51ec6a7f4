#include "util/status.h"

#include <gtest/gtest.h>

namespace qr {
namespace {

Status FailIfNegative(int v) {
  if (v < 0) return InvalidArgument("negative: " + std::to_string(v));
  return Status::OK();
}

Status Chain(int v) {
  QR_RETURN_IF_ERROR(FailIfNegative(v));
  return NotFound("reached the end");
}

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(sizeof(Status), sizeof(void*));
}

TEST(StatusTest, ReturnIfErrorPropagatesTheFirstError) {
  Status s = Chain(-3);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: negative: -3");
  EXPECT_EQ(Chain(1).code(), StatusCode::kNotFound);
}

TEST(StatusTest, CopiesAreIndependent) {
  Status a = Internal("boom");
  Status b = a;
  EXPECT_EQ(a, b);
  a = Status::OK();
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.message(), "boom");
}

TEST(StatusTest, StatusOrHoldsValueOrError) {
  StatusOr<std::string> v(std::string("x"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "x");
  StatusOr<std::string> e(NotFound("nope"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "nope");
}

TEST(StatusTest, QuoteForErrorTruncatesAndEscapes) {
  EXPECT_EQ(QuoteForError("abc"), "'abc'");
  EXPECT_EQ(QuoteForError(std::string("a\nb\0c", 5)), "'a\\x0ab\\x00c'");
  // A quote cannot end the quoting early (a forged log line), nor a backslash fake an escape.
  EXPECT_EQ(QuoteForError("x' from 203.0.113.9"), "'x\\x27 from 203.0.113.9'");
  EXPECT_EQ(QuoteForError("a\\x27"), "'a\\x5cx27'");
  std::string big(10000, 'z');
  std::string q = QuoteForError(big, 8);
  EXPECT_EQ(q, "'zzzzzzzz'...(10000 bytes)");
}

}  // namespace
}  // namespace qr
