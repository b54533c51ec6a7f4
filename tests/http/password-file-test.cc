// PasswordFile parsing (every error names the line and what is wrong) and the
// PBKDF2 entries made by MakePasswordEntryLine().

#include "http/password-file.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "testutil/log-capture.h"

namespace qr {
namespace {

// A low iteration count keeps the tests fast (the minimum the file accepts).
constexpr int kFastIterations = kMinPasswordIterations;

std::string Entry(const std::string& user, const std::string& password) {
  std::string line;
  Status s = MakePasswordEntryLine(user, password, kFastIterations, &line);
  EXPECT_TRUE(s.ok()) << s.message();
  return line;
}

std::string ParseError(const std::string& content) {
  PasswordFile file;
  Status s = PasswordFile::Parse(content, "users.passwd", &file);
  EXPECT_FALSE(s.ok()) << "accepted: " << content;
  return s.message();
}

TEST(PasswordFileTest, EntriesVerifyTheirPasswordOnly) {
  PasswordFile file;
  std::string content = "# users\n\n" + Entry("alice", "s3cret") + "\r\n" + Entry("bob", "pw");
  ASSERT_TRUE(PasswordFile::Parse(content, "f", &file).ok());
  EXPECT_EQ(file.size(), 2u);
  const PasswordEntry* alice = file.Find("alice");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->iterations, kFastIterations);
  EXPECT_EQ(alice->salt.size(), kPasswordSaltBytes);
  EXPECT_TRUE(VerifyPassword(*alice, "s3cret"));
  EXPECT_FALSE(VerifyPassword(*alice, "s3cret "));
  EXPECT_FALSE(VerifyPassword(*alice, "pw"));
  EXPECT_FALSE(VerifyPassword(*alice, ""));
  EXPECT_EQ(file.Find("carol"), nullptr);
}

// An unknown user is checked against a dummy entry with this count, so that it costs what a
// typical known user costs.
TEST(PasswordFileTest, TypicalIterationsIsTheMostCommonCount) {
  auto line = [](const char* user, int iterations) {
    std::string l;
    EXPECT_TRUE(MakePasswordEntryLine(user, "pw", iterations, &l).ok());
    return l + "\n";
  };
  const int a = kMinPasswordIterations, b = kMinPasswordIterations * 2;
  PasswordFile file;
  ASSERT_TRUE(PasswordFile::Parse(line("u1", a) + line("u2", b) + line("u3", a), "f", &file).ok());
  EXPECT_EQ(file.TypicalIterations(), a);
  ASSERT_TRUE(PasswordFile::Parse(line("u1", a) + line("u2", b), "f", &file).ok());
  EXPECT_EQ(file.TypicalIterations(), b) << "a tie goes to the larger count";
  EXPECT_EQ(PasswordFile().TypicalIterations(), kDefaultPasswordIterations);
}

TEST(PasswordFileTest, UserNameStartingWithHashIsRefused) {
  // Its line would be skipped as a comment: the user could never log in.
  std::string line;
  Status s = MakePasswordEntryLine("#x", "pw", kFastIterations, &line);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("comment"), std::string::npos) << s.message();
  EXPECT_TRUE(MakePasswordEntryLine("x#", "pw", kFastIterations, &line).ok());
}

TEST(PasswordFileTest, SaltsDiffer) {
  // The same password twice gives different lines (random salt).
  EXPECT_NE(Entry("alice", "same"), Entry("alice", "same"));
}

TEST(PasswordFileTest, ErrorsNameTheLineAndTheProblem) {
  const std::string good = Entry("alice", "pw");
  EXPECT_EQ(ParseError(good + "\n\nbob:pbkdf2-sha256:1000:AAAA\n"),
            "users.passwd:3: expected 5 ':'-separated fields "
            "user:pbkdf2-sha256:ITERATIONS:SALT_BASE64:HASH_BASE64 (make lines with "
            "coordinatord-passwd)");
  std::string fields = good.substr(good.find(':'));  // ":pbkdf2-sha256:..."
  EXPECT_NE(ParseError("bob" + fields.replace(1, 13, "md5") + "\n").find(
                "users.passwd:1: unknown hash scheme 'md5'"),
            std::string::npos);
  EXPECT_NE(ParseError("bob:pbkdf2-sha256:12:AAAAAAAAAAAAAAAAAAAAAA==:" +
                       good.substr(good.rfind(':') + 1))
                .find("users.passwd:1: bad iteration count '12'"),
            std::string::npos);
  EXPECT_NE(ParseError("bob:pbkdf2-sha256:1000:AAAA:" + good.substr(good.rfind(':') + 1))
                .find("users.passwd:1: bad salt"),
            std::string::npos);
  EXPECT_NE(ParseError("bob:pbkdf2-sha256:1000:AAAAAAAAAAAAAAAAAAAAAA==:AAAA")
                .find("users.passwd:1: bad hash: expected base64 of 32 bytes"),
            std::string::npos);
  EXPECT_NE(ParseError(good + "\n" + good + "\n")
                .find("users.passwd:2: user 'alice' appears twice"),
            std::string::npos);
  EXPECT_NE(ParseError(" bad user" + good.substr(5)).find("users.passwd:1: user name"),
            std::string::npos);
  EXPECT_EQ(ParseError("# nobody\n\n"),
            "users.passwd: no users (add lines made with coordinatord-passwd)");
}

TEST(PasswordFileTest, LoadNamesAMissingFile) {
  PasswordFile file;
  Status s = PasswordFile::Load("/nonexistent/users.passwd", &file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read the password file '/nonexistent/users.passwd'"),
            std::string::npos)
      << s.message();
}

// A file every local user may read gives away its hashes: loaded, with a WARNING saying so.
TEST(PasswordFileTest, AWorldReadableFileLoadsWithAWarning) {
  std::string dir = (std::filesystem::temp_directory_path() / "qr-passwd-test.XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/users.passwd";
  std::ofstream(path) << Entry("alice", "pw") << "\n";
  for (const mode_t mode : {mode_t{0600}, mode_t{0644}}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    testing::LogCapture log;
    PasswordFile file;
    ASSERT_TRUE(PasswordFile::Load(path, &file).ok());
    EXPECT_EQ(log.Matching("readable by every user").size(), mode == 0644 ? 1u : 0u) << mode;
  }
  std::filesystem::remove_all(dir);
}

TEST(PasswordFileTest, MakeEntryValidatesItsInput) {
  std::string line;
  EXPECT_FALSE(MakePasswordEntryLine("a:b", "pw", kFastIterations, &line).ok());
  EXPECT_FALSE(MakePasswordEntryLine("", "pw", kFastIterations, &line).ok());
  EXPECT_FALSE(MakePasswordEntryLine("alice", "", kFastIterations, &line).ok());
  EXPECT_FALSE(MakePasswordEntryLine("alice", "pw", 10, &line).ok());
}

}  // namespace
}  // namespace qr
