#pragma once

// Fixtures shared by the BasicAuthenticator tests (http-auth-test.cc, http-auth-limits-test.cc):
// Basic credentials, a password file of two users, and limits with a window longer than any
// test.

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "http/base64.h"
#include "http/http-auth.h"
#include "http/password-file.h"

namespace qr {

/// The Authorization header value of Basic credentials 'user':'password'.
inline std::string Basic(const std::string& user, const std::string& password) {
  return "Basic " + Base64Encode(user + ":" + password);
}

/// alice (password "alice-pw") and bob ("bob-pw"), at the cheapest iteration count accepted.
inline PasswordFile Users() {
  std::string alice, bob;
  EXPECT_TRUE(MakePasswordEntryLine("alice", "alice-pw", kMinPasswordIterations, &alice).ok());
  EXPECT_TRUE(MakePasswordEntryLine("bob", "bob-pw", kMinPasswordIterations, &bob).ok());
  PasswordFile file;
  EXPECT_TRUE(PasswordFile::Parse(alice + "\n" + bob + "\n", "test", &file).ok());
  return file;
}

/// 'max_failures' failures per (user, address) within an hour.
inline BasicAuthenticator::Options Limits(int max_failures) {
  BasicAuthenticator::Options o;
  o.max_failures = max_failures;
  o.failure_window = std::chrono::seconds(3600);
  return o;
}

}  // namespace qr
