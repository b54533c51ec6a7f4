#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "soak/soak-http.h"

namespace qr::soak {

/// A coordinatord child process: started with a free port, its stdout read for the port, its
/// stderr (glog) written to a file, stopped with SIGTERM.
/// Thread-safety: not thread-safe.
class DaemonProcess {
 public:
  DaemonProcess() = default;
  /// Kills the daemon if it is still running.
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  /// Starts 'binary' with 'flags' plus --http_port=0, logging to 'log_path'; waits (until
  /// 'deadline') for the line that names the port. False with 'error' set on failure.
  bool Start(const std::string& binary, const std::vector<std::string>& flags,
             const std::string& log_path, Clock::time_point deadline, std::string* error);
  /// Sends SIGTERM and waits for the exit until 'deadline' (then SIGKILL). True if it exited
  /// with status 0; otherwise 'error' says how it ended.
  bool Stop(Clock::time_point deadline, std::string* error);
  /// Waits until the daemon has exited (without reaping it: Stop() still reports how it ended)
  /// or 'deadline'; true if it has exited. The wait is a poll() on a pidfd, woken by the exit.
  bool WaitForExit(Clock::time_point deadline) const;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  /// VmRSS from /proc/<pid>/status, in KiB (0 if unreadable).
  int64_t RssKb() const;
  /// The last 'max_bytes' of the daemon's log.
  std::string LogTail(size_t max_bytes) const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_fd_ = -1;
  int pidfd_ = -1;  // readable once the daemon has exited
  std::string log_path_;
};

}  // namespace qr::soak
