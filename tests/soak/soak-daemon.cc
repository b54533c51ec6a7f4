#include "soak/soak-daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "loadgen/loadgen-stats.h"

extern char** environ;

namespace qr::soak {

namespace {

/// Reads what the daemon prints on stdout until a line names its port, or 'deadline'.
int ReadPort(int fd, Clock::time_point deadline, std::string* out) {
  const std::string marker = "listening on http://127.0.0.1:";
  while (Clock::now() < deadline) {
    size_t at = out->find(marker);
    if (at != std::string::npos && out->find('\n', at) != std::string::npos) {
      return std::atoi(out->c_str() + at + marker.size());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return 0;  // the daemon exited
    out->append(buf, static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool DaemonProcess::Start(const std::string& binary, const std::vector<std::string>& flags,
                          const std::string& log_path, Clock::time_point deadline,
                          std::string* error) {
  log_path_ = log_path;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = {binary, "--http_port=0", "--http_bind_address=127.0.0.1"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // In a session of its own, as systemd starts a service: with the kernel's autogroups, the
  // nice value of its demoted long queries counts against its own threads only, not against
  // every process of the test run.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  int rc = posix_spawn(&pid_, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  stdout_fd_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    *error = "cannot start " + binary + ": " + std::strerror(rc);
    return false;
  }
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) {
    *error = std::string("pidfd_open: ") + std::strerror(errno);
    return false;
  }
  std::string printed;
  port_ = ReadPort(stdout_fd_, deadline, &printed);
  if (port_ <= 0) {
    *error = "coordinatord did not print its port; stdout: '" + printed + "'; log tail:\n" +
             LogTail(4000);
    return false;
  }
  return true;
}

bool DaemonProcess::Stop(Clock::time_point deadline, std::string* error) {
  if (pid_ <= 0) {
    *error = "not running";
    return false;
  }
  ::kill(pid_, SIGTERM);
  const bool exited = WaitForExit(deadline);
  if (!exited) ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  if (!exited) {
    *error = "did not exit within its deadline after SIGTERM (killed)";
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  *error = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                             : "killed by signal " + std::to_string(WTERMSIG(status));
  return false;
}

bool DaemonProcess::WaitForExit(Clock::time_point deadline) const {
  if (pidfd_ < 0) return false;
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{pidfd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;  // cannot wait: the caller treats it as running
    if (n == 0 && Clock::now() >= deadline) return false;
  }
}

int64_t DaemonProcess::RssKb() const {
  return pid_ > 0 ? loadgen::ReadRssKb({static_cast<int>(pid_)}) : 0;
}

std::string DaemonProcess::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace qr::soak
