#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace qr {

/// An anonymous file of encoded result pages (O_TMPFILE in the spill directory: it has no name,
/// so nothing is left behind by a crash), written once, front to back, and read back at known
/// offsets. Writes are gathered (pwritev of many pages at once), reads go straight into the
/// page's own buffer: each byte is copied once on the way in and once on the way out. What
/// has been read is punched out of the file as the reader advances (PunchHole()).
/// Thread-safety: one writer; readers may read concurrently any range already written.
class SpoolFile {
 public:
  /// Opens a new spool file in 'dir'. Errors name the directory and the reason.
  static Status Create(const std::string& dir, std::unique_ptr<SpoolFile>* out);
  ~SpoolFile();
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;

  /// Writes 'pages' back to back at 'offset' (one pwritev per IOV_MAX pages).
  Status WriteAt(int64_t offset, const std::vector<std::shared_ptr<const std::string>>& pages);
  /// Reads 'length' bytes at 'offset' into '*out' (resized to fit).
  Status ReadAt(int64_t offset, int64_t length, std::string* out) const;
  /// Frees the disk blocks of [offset, offset + length), already read and never read again
  /// (fallocate PUNCH_HOLE; the file keeps its size). Fails on a file system that cannot
  /// punch holes (the caller then keeps the range, and its quota, until the file closes).
  Status PunchHole(int64_t offset, int64_t length);

  /// Process-wide counters, for /metrics and the benchmarks (syscalls per MB).
  struct Stats {
    std::atomic<int64_t> files{0}, write_calls{0}, bytes_written{0}, read_calls{0},
        bytes_read{0}, quota_waits{0}, punch_calls{0}, bytes_punched{0};
  };
  static Stats& stats();

 private:
  explicit SpoolFile(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace qr
