#include "http/file-limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace qr {

Status RaiseFileLimit(FileLimit* out) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return Status(StatusCode::kInternal,
                  std::string("getrlimit(RLIMIT_NOFILE) failed: ") + strerror(errno));
  }
  out->soft_before = out->soft = rl.rlim_cur;
  out->hard = rl.rlim_max;
  if (rl.rlim_cur >= rl.rlim_max) return Status::OK();
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return Status(StatusCode::kInternal, "cannot raise the open file limit from " +
                                             std::to_string(out->soft_before) + " to " +
                                             std::to_string(out->hard) + ": " + strerror(errno));
  }
  out->soft = rl.rlim_cur;
  return Status::OK();
}

}  // namespace qr
