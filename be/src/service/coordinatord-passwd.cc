// coordinatord-passwd: prints a line for coordinatord's --auth_password_file.
//
//   coordinatord-passwd [--iterations=N] USER < password-on-stdin >> users.passwd
//
// The password is read from stdin (its first line, without the line end), never from the
// command line, where other users could see it in the process list. On a terminal it is asked
// for twice without echo. See docs/operations.md#security.

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include <gflags/gflags.h>

#include "http/password-file.h"

DEFINE_int32(iterations, qr::kDefaultPasswordIterations,
             "PBKDF2 iterations (each login of a new connection costs this many HMAC-SHA256).");

namespace {

/// Reads one line from stdin, echo off when it is a terminal. False at end of input.
bool ReadPasswordLine(const char* prompt, std::string* out) {
  const bool tty = isatty(STDIN_FILENO) != 0;
  termios saved{};
  if (tty) {
    fprintf(stderr, "%s", prompt);
    tcgetattr(STDIN_FILENO, &saved);
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  bool ok = static_cast<bool>(std::getline(std::cin, *out));
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    fprintf(stderr, "\n");
  }
  if (!out->empty() && out->back() == '\r') out->pop_back();
  return ok;
}

int Run(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: coordinatord-passwd [--iterations=N] USER < password\n");
    return 2;
  }
  std::string password;
  if (!ReadPasswordLine("Password: ", &password)) {
    fprintf(stderr, "coordinatord-passwd: no password on stdin\n");
    return 1;
  }
  if (isatty(STDIN_FILENO) != 0) {
    std::string again;
    if (!ReadPasswordLine("Again: ", &again) || again != password) {
      fprintf(stderr, "coordinatord-passwd: the passwords differ\n");
      return 1;
    }
  }
  std::string line;
  qr::Status s = qr::MakePasswordEntryLine(argv[1], password, FLAGS_iterations, &line);
  if (!s.ok()) {
    fprintf(stderr, "coordinatord-passwd: %s\n", s.message().c_str());
    return 1;
  }
  printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "coordinatord-passwd [--iterations=N] USER < password: prints a password file line");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return Run(argc, argv);
}
