#include "runtime/spool-file.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace qr {

SpoolFile::Stats& SpoolFile::stats() {
  static Stats s;
  return s;
}

Status SpoolFile::Create(const std::string& dir, std::unique_ptr<SpoolFile>* out) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without O_TMPFILE: a named file, unlinked at once (a crash in between
    // leaves a qr-spill-* file that RemoveStaleSpillFiles() deletes at the next start).
    std::string path = dir + "/qr-spill-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(path.c_str());
  }
  if (fd < 0) {
    return Internal("cannot create a result spool file in '" + dir + "' (--spill_dir): " +
                    std::strerror(errno));
  }
  stats().files.fetch_add(1, std::memory_order_relaxed);
  out->reset(new SpoolFile(fd));
  return Status::OK();
}

SpoolFile::~SpoolFile() { ::close(fd_); }

Status SpoolFile::WriteAt(int64_t offset,
                          const std::vector<std::shared_ptr<const std::string>>& pages) {
  std::vector<iovec> iov;
  iov.reserve(std::min<size_t>(pages.size(), IOV_MAX));
  size_t next = 0;
  while (next < pages.size()) {
    iov.clear();
    for (; next < pages.size() && iov.size() < IOV_MAX; ++next) {
      iov.push_back({const_cast<char*>(pages[next]->data()), pages[next]->size()});
    }
    // A short write (disk full, a signal) resumes where it stopped.
    size_t first = 0;
    while (first < iov.size()) {
      const ssize_t n = ::pwritev(fd_, iov.data() + first, static_cast<int>(iov.size() - first),
                                  offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Internal(std::string("writing a result spool file: ") + std::strerror(errno));
      stats().write_calls.fetch_add(1, std::memory_order_relaxed);
      stats().bytes_written.fetch_add(n, std::memory_order_relaxed);
      offset += n;
      for (size_t done = static_cast<size_t>(n); done > 0 && first < iov.size();) {
        const size_t take = std::min(done, iov[first].iov_len);
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        done -= take;
        if (iov[first].iov_len == 0) ++first;
      }
    }
  }
  return Status::OK();
}

Status SpoolFile::ReadAt(int64_t offset, int64_t length, std::string* out) const {
  // Every byte is overwritten by the read: no need to zero it first (C++23's
  // resize_and_overwrite would say so; resize is what C++20 has).
  out->resize(static_cast<size_t>(length));
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out->data() + done, static_cast<size_t>(length - done),
                              offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Internal(std::string("reading a result spool file: ") +
                      (n == 0 ? "unexpected end of file" : std::strerror(errno)));
    }
    stats().read_calls.fetch_add(1, std::memory_order_relaxed);
    stats().bytes_read.fetch_add(n, std::memory_order_relaxed);
    done += n;
  }
  return Status::OK();
}

Status SpoolFile::PunchHole(int64_t offset, int64_t length) {
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0) {
    return Internal(std::string("punching a hole in a result spool file: ") +
                    std::strerror(errno));
  }
  stats().punch_calls.fetch_add(1, std::memory_order_relaxed);
  stats().bytes_punched.fetch_add(length, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace qr
