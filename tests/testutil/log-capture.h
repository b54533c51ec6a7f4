#pragma once

#include <string>
#include <vector>

#include <glog/logging.h>

#include "util/mutex.h"

namespace qr::testing {

/// Collects the text of every glog message logged while it exists (any thread).
/// Thread-safety: thread-safe.
class LogCapture : public google::LogSink {
 public:
  LogCapture() { google::AddLogSink(this); }
  ~LogCapture() override { google::RemoveLogSink(this); }

  using google::LogSink::send;
  void send(google::LogSeverity, const char*, const char*, int, const std::tm*,
            const char* message, size_t message_len) override {
    MutexLock l(&mu_);
    lines_.emplace_back(message, message_len);
  }

  std::vector<std::string> Lines() {
    MutexLock l(&mu_);
    return lines_;
  }
  /// Lines containing 'needle'.
  std::vector<std::string> Matching(const std::string& needle) {
    std::vector<std::string> out;
    for (const std::string& line : Lines()) {
      if (line.find(needle) != std::string::npos) out.push_back(line);
    }
    return out;
  }

 private:
  Mutex mu_;
  std::vector<std::string> lines_ QR_GUARDED_BY(mu_);
};

}  // namespace qr::testing
