#include "runtime/spill-accounting.h"

#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <new>
#include <string_view>
#include <type_traits>

#include <glog/logging.h>

#include "util/mutex.h"
#include "util/thread-annotations.h"

namespace qr {

const char kSpillAccountingVfsName[] = "qr-spill-accounting";

namespace {

thread_local QuerySpillScope* t_current_scope = nullptr;

}  // namespace

std::string SpillRefusalToString(const SpillRefusal& refusal) {
  const std::string need = std::to_string(refusal.requested_bytes) + " more bytes";
  if (refusal.limit == SpillLimit::kQuery) {
    return "the query's temporary files (sorts, GROUP BY, DISTINCT) needed " + need +
           " with " + std::to_string(refusal.used_bytes) + " bytes in use, beyond the " +
           "per-query spill limit of " + std::to_string(refusal.limit_bytes) + " bytes";
  }
  return "the temporary files of all running queries needed " + need + " with " +
         std::to_string(refusal.used_bytes) + " bytes in use, beyond the total spill limit " +
         "of " + std::to_string(refusal.limit_bytes) + " bytes";
}

// ---------------------------------------------------------------------------------------------
// SpillAccount and QuerySpillScope

bool SpillAccount::TryReserve(int64_t bytes, bool record_refusal) {
  int64_t before;
  if (!ReserveWithin(&used_bytes_, limit_bytes_, bytes, &before)) {
    if (record_refusal) {
      budget_->CountQueryRefusal();
      RecordRefusal({SpillLimit::kQuery, limit_bytes_, bytes, before});
    }
    return false;
  }
  if (!budget_->TryReserve(bytes)) {
    used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    if (record_refusal) {
      RecordRefusal({SpillLimit::kTotal, budget_->limit_bytes(), bytes, budget_->used_bytes()});
    }
    return false;
  }
  RaisePeak(&peak_bytes_, before + bytes);
  return true;
}

void SpillAccount::Release(int64_t bytes) {
  used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  budget_->Release(bytes);
}

std::optional<SpillRefusal> SpillAccount::refusal() const {
  MutexLock l(&mu_);
  return refusal_;
}

void SpillAccount::RecordRefusal(const SpillRefusal& refusal) {
  MutexLock l(&mu_);
  if (!refusal_) refusal_ = refusal;
}

QuerySpillScope::QuerySpillScope(std::shared_ptr<SpillAccount> account)
    : account_(std::move(account)), previous_(t_current_scope) {
  DCHECK(account_ != nullptr);
  t_current_scope = this;
}

QuerySpillScope::QuerySpillScope(SpillBudget* budget, int64_t query_limit_bytes)
    : account_(std::make_shared<SpillAccount>(budget, query_limit_bytes)),
      previous_(t_current_scope) {
  DCHECK(budget != nullptr);
  DCHECK_GT(query_limit_bytes, 0);
  t_current_scope = this;
}

QuerySpillScope::~QuerySpillScope() {
  DCHECK(t_current_scope == this) << "QuerySpillScopes must end in reverse order, on one thread";
  t_current_scope = previous_;
}

int64_t QuerySpillScope::used_bytes() const { return account_->used_bytes(); }
int64_t QuerySpillScope::peak_bytes() const { return account_->peak_bytes(); }
int64_t QuerySpillScope::limit_bytes() const { return account_->limit_bytes(); }
std::optional<SpillRefusal> QuerySpillScope::refusal() const { return account_->refusal(); }

QuerySpillScope* QuerySpillScope::Current() { return t_current_scope; }

std::shared_ptr<SpillAccount> QuerySpillScope::CurrentAccount() {
  return t_current_scope != nullptr ? t_current_scope->account_ : nullptr;
}

/// The VFS's access to the current scope's account (QuerySpillScope keeps it private).
class SpillAccountingVfs {
 public:
  static std::shared_ptr<SpillAccount> CurrentAccount() {
    return QuerySpillScope::CurrentAccount();
  }
};

// ---------------------------------------------------------------------------------------------
// The VFS

namespace {

/// The default VFS the accounting VFS forwards to, and the budget of temporary files opened
/// with no scope current. Set once by InstallSpillAccountingVfs() before any connection
/// exists; read-only afterwards.
sqlite3_vfs* g_inner_vfs = nullptr;
SpillBudget* g_default_budget = nullptr;
sqlite3_vfs g_spill_vfs;

/// The flags that make a file temporary whatever its name.
constexpr int kTempFileFlags = SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL |
                               SQLITE_OPEN_TRANSIENT_DB | SQLITE_OPEN_SUBJOURNAL |
                               SQLITE_OPEN_DELETEONCLOSE;

bool IsTempFile(const char* name, int flags) {
  return name == nullptr || (flags & kTempFileFlags) != 0;
}

/// A temporary file: the accounting state, followed (at kInnerOffset) by the inner VFS's file.
/// Only the connection owning the file uses it, one call at a time, so the fields are plain.
struct SpillFile {
  sqlite3_file base;  // First: SQLite sees a SpillFile* as a sqlite3_file*.
  sqlite3_file* inner;
  /// The query the file is charged to, or nullptr for 'budget' alone.
  std::shared_ptr<SpillAccount> account;
  SpillBudget* budget;
  /// The charged size: the highest offset + amount written since the last truncation below.
  int64_t charged_bytes;

  bool Reserve(int64_t bytes) {
    return account ? account->TryReserve(bytes) : budget->TryReserve(bytes);
  }
  void Release(int64_t bytes) {
    if (account) {
      account->Release(bytes);
    } else {
      budget->Release(bytes);
    }
  }
};
static_assert(std::is_standard_layout_v<SpillFile>, "SpillFile must start with its sqlite3_file");
constexpr size_t kInnerOffset =
    (sizeof(SpillFile) + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) *
    alignof(std::max_align_t);

SpillFile* AsSpill(sqlite3_file* file) { return reinterpret_cast<SpillFile*>(file); }
sqlite3_file* Inner(sqlite3_file* file) { return AsSpill(file)->inner; }
const sqlite3_io_methods& InnerMethods(sqlite3_file* file) { return *Inner(file)->pMethods; }

int SpillClose(sqlite3_file* file) {
  SpillFile* f = AsSpill(file);
  const int rc = f->inner->pMethods->xClose(f->inner);
  f->Release(f->charged_bytes);
  f->~SpillFile();
  return rc;
}

int SpillWrite(sqlite3_file* file, const void* buf, int amount, sqlite3_int64 offset) {
  SpillFile* f = AsSpill(file);
  const int64_t growth = offset + amount - f->charged_bytes;
  if (growth > 0 && !f->Reserve(growth)) return SQLITE_FULL;
  const int rc = f->inner->pMethods->xWrite(f->inner, buf, amount, offset);
  if (growth > 0) {
    if (rc == SQLITE_OK) {
      f->charged_bytes += growth;
    } else {
      f->Release(growth);
    }
  }
  return rc;
}

int SpillTruncate(sqlite3_file* file, sqlite3_int64 size) {
  SpillFile* f = AsSpill(file);
  const int rc = f->inner->pMethods->xTruncate(f->inner, size);
  // Growing by truncation makes a sparse file: charged when the bytes are written.
  if (rc == SQLITE_OK && size < f->charged_bytes) {
    f->Release(f->charged_bytes - size);
    f->charged_bytes = size;
  }
  return rc;
}

int SpillFileControl(sqlite3_file* file, int op, void* arg) {
  // A size hint may preallocate or map the file, both outside xWrite: a hint may be ignored.
  if (op == SQLITE_FCNTL_SIZE_HINT) return SQLITE_OK;
  return InnerMethods(file).xFileControl(Inner(file), op, arg);
}

int SpillFetch(sqlite3_file* /*file*/, sqlite3_int64 /*offset*/, int /*amount*/, void** out) {
  // Writes through a mapping would bypass SpillWrite; without one SQLite uses xRead/xWrite.
  *out = nullptr;
  return SQLITE_OK;
}

int SpillUnfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
  auto fn = InnerMethods(file).xUnfetch;
  return fn != nullptr ? fn(Inner(file), offset, p) : SQLITE_OK;
}

int SpillShmMap(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
  auto fn = InnerMethods(file).xShmMap;
  return fn != nullptr ? fn(Inner(file), region, size, extend, out) : SQLITE_IOERR_SHMMAP;
}

int SpillShmLock(sqlite3_file* file, int offset, int n, int flags) {
  auto fn = InnerMethods(file).xShmLock;
  return fn != nullptr ? fn(Inner(file), offset, n, flags) : SQLITE_IOERR_SHMLOCK;
}

void SpillShmBarrier(sqlite3_file* file) {
  auto fn = InnerMethods(file).xShmBarrier;
  if (fn != nullptr) fn(Inner(file));
}

int SpillShmUnmap(sqlite3_file* file, int delete_flag) {
  auto fn = InnerMethods(file).xShmUnmap;
  return fn != nullptr ? fn(Inner(file), delete_flag) : SQLITE_OK;
}

/// The io_methods of a temporary file whose inner file has methods of version 'version':
/// the same version, each method forwarding, writes and truncations accounted.
constexpr sqlite3_io_methods MakeSpillMethods(int version) {
  sqlite3_io_methods m{};
  m.iVersion = version;
  m.xClose = SpillClose;
  m.xRead = [](sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
    return InnerMethods(f).xRead(Inner(f), buf, n, off);
  };
  m.xWrite = SpillWrite;
  m.xTruncate = SpillTruncate;
  m.xSync = [](sqlite3_file* f, int flags) { return InnerMethods(f).xSync(Inner(f), flags); };
  m.xFileSize = [](sqlite3_file* f, sqlite3_int64* size) {
    return InnerMethods(f).xFileSize(Inner(f), size);
  };
  m.xLock = [](sqlite3_file* f, int level) { return InnerMethods(f).xLock(Inner(f), level); };
  m.xUnlock = [](sqlite3_file* f, int level) {
    return InnerMethods(f).xUnlock(Inner(f), level);
  };
  m.xCheckReservedLock = [](sqlite3_file* f, int* out) {
    return InnerMethods(f).xCheckReservedLock(Inner(f), out);
  };
  m.xFileControl = SpillFileControl;
  m.xSectorSize = [](sqlite3_file* f) { return InnerMethods(f).xSectorSize(Inner(f)); };
  m.xDeviceCharacteristics = [](sqlite3_file* f) {
    return InnerMethods(f).xDeviceCharacteristics(Inner(f));
  };
  if (version >= 2) {
    m.xShmMap = SpillShmMap;
    m.xShmLock = SpillShmLock;
    m.xShmBarrier = SpillShmBarrier;
    m.xShmUnmap = SpillShmUnmap;
  }
  if (version >= 3) {
    m.xFetch = SpillFetch;
    m.xUnfetch = SpillUnfetch;
  }
  return m;
}

constexpr sqlite3_io_methods kSpillMethods[3] = {MakeSpillMethods(1), MakeSpillMethods(2),
                                                 MakeSpillMethods(3)};

int SpillOpen(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
              int* out_flags) {
  sqlite3_vfs* inner_vfs = static_cast<sqlite3_vfs*>(vfs->pAppData);
  // Other files are the inner VFS's own, with its own methods: no cost after this call.
  if (!IsTempFile(name, flags)) return inner_vfs->xOpen(inner_vfs, name, file, flags, out_flags);

  SpillFile* f = new (file) SpillFile{};
  f->inner = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kInnerOffset);
  f->inner->pMethods = nullptr;
  f->account = SpillAccountingVfs::CurrentAccount();
  f->budget = g_default_budget;
  const int rc = inner_vfs->xOpen(inner_vfs, name, f->inner, flags, out_flags);
  if (rc != SQLITE_OK || f->inner->pMethods == nullptr) {
    if (f->inner->pMethods != nullptr) f->inner->pMethods->xClose(f->inner);
    f->~SpillFile();
    file->pMethods = nullptr;  // SQLite calls no xClose on a file whose xOpen failed.
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  const int version = std::clamp(f->inner->pMethods->iVersion, 1, 3);
  f->base.pMethods = &kSpillMethods[version - 1];
  return SQLITE_OK;
}

sqlite3_vfs* InnerVfs(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

/// Fills 'out' with methods that forward to 'inner' (xOpen aside), of the same version.
void MakeSpillVfs(sqlite3_vfs* inner, sqlite3_vfs* out) {
  *out = sqlite3_vfs{};
  out->iVersion = inner->iVersion;
  out->szOsFile = static_cast<int>(kInnerOffset) + inner->szOsFile;
  out->mxPathname = inner->mxPathname;
  out->zName = kSpillAccountingVfsName;
  out->pAppData = inner;
  out->xOpen = SpillOpen;
  out->xDelete = [](sqlite3_vfs* v, const char* name, int sync_dir) {
    return InnerVfs(v)->xDelete(InnerVfs(v), name, sync_dir);
  };
  out->xAccess = [](sqlite3_vfs* v, const char* name, int flags, int* out_res) {
    return InnerVfs(v)->xAccess(InnerVfs(v), name, flags, out_res);
  };
  out->xFullPathname = [](sqlite3_vfs* v, const char* name, int n, char* out_path) {
    return InnerVfs(v)->xFullPathname(InnerVfs(v), name, n, out_path);
  };
  // The loader methods may be null in a build without extension loading.
  if (inner->xDlOpen != nullptr) {
    out->xDlOpen = [](sqlite3_vfs* v, const char* name) {
      return InnerVfs(v)->xDlOpen(InnerVfs(v), name);
    };
  }
  if (inner->xDlError != nullptr) {
    out->xDlError = [](sqlite3_vfs* v, int n, char* msg) {
      InnerVfs(v)->xDlError(InnerVfs(v), n, msg);
    };
  }
  if (inner->xDlSym != nullptr) {
    out->xDlSym = [](sqlite3_vfs* v, void* handle, const char* symbol) -> void (*)(void) {
      return InnerVfs(v)->xDlSym(InnerVfs(v), handle, symbol);
    };
  }
  if (inner->xDlClose != nullptr) {
    out->xDlClose = [](sqlite3_vfs* v, void* handle) {
      InnerVfs(v)->xDlClose(InnerVfs(v), handle);
    };
  }
  out->xRandomness = [](sqlite3_vfs* v, int n, char* buf) {
    return InnerVfs(v)->xRandomness(InnerVfs(v), n, buf);
  };
  out->xSleep = [](sqlite3_vfs* v, int us) { return InnerVfs(v)->xSleep(InnerVfs(v), us); };
  out->xCurrentTime = [](sqlite3_vfs* v, double* now) {
    return InnerVfs(v)->xCurrentTime(InnerVfs(v), now);
  };
  out->xGetLastError = [](sqlite3_vfs* v, int n, char* buf) {
    return InnerVfs(v)->xGetLastError(InnerVfs(v), n, buf);
  };
  if (inner->iVersion >= 2 && inner->xCurrentTimeInt64 != nullptr) {
    out->xCurrentTimeInt64 = [](sqlite3_vfs* v, sqlite3_int64* now) {
      return InnerVfs(v)->xCurrentTimeInt64(InnerVfs(v), now);
    };
  }
  if (inner->iVersion >= 3) {
    out->xSetSystemCall = [](sqlite3_vfs* v, const char* name, sqlite3_syscall_ptr fn) {
      return InnerVfs(v)->xSetSystemCall(InnerVfs(v), name, fn);
    };
    out->xGetSystemCall = [](sqlite3_vfs* v, const char* name) {
      return InnerVfs(v)->xGetSystemCall(InnerVfs(v), name);
    };
    out->xNextSystemCall = [](sqlite3_vfs* v, const char* name) {
      return InnerVfs(v)->xNextSystemCall(InnerVfs(v), name);
    };
  }
}

/// Creates 'dir' if missing and checks that a file can be created in it; '*absolute' gets
/// its absolute path.
Status PrepareTempDir(const std::string& dir, std::string* absolute) {
  if (dir.empty()) return InvalidArgument("the spill directory must not be empty");
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(dir, ec);
  if (ec) return InvalidArgument("bad spill directory '" + dir + "': " + ec.message());
  std::filesystem::create_directories(abs, ec);
  if (ec || !std::filesystem::is_directory(abs, ec)) {
    return InvalidArgument("cannot create the spill directory '" + abs.string() +
                           "': " + (ec ? ec.message() : "exists and is not a directory"));
  }
  std::string probe = (abs / "qr-spill-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return InvalidArgument("cannot create files in the spill directory '" + abs.string() +
                           "': " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  *absolute = abs.string();
  return Status::OK();
}

}  // namespace

Status InstallSpillAccountingVfs(SpillBudget* budget, const std::string& temp_dir) {
  DCHECK(budget != nullptr);
  std::string dir;
  QR_RETURN_IF_ERROR(PrepareTempDir(temp_dir, &dir));
  if (g_inner_vfs != nullptr) return AlreadyExists("the spill accounting VFS is installed");
  if (sqlite3_initialize() != SQLITE_OK) return Internal("sqlite3_initialize failed");
  sqlite3_vfs* inner = sqlite3_vfs_find(nullptr);
  if (inner == nullptr) return Internal("SQLite has no default VFS");

  char* dir_copy = sqlite3_mprintf("%s", dir.c_str());
  if (dir_copy == nullptr) return Internal("out of memory setting sqlite3_temp_directory");
  MakeSpillVfs(inner, &g_spill_vfs);
  g_default_budget = budget;
  g_inner_vfs = inner;
  const int rc = sqlite3_vfs_register(&g_spill_vfs, /*makeDflt=*/1);
  if (rc != SQLITE_OK) {
    sqlite3_free(dir_copy);
    g_inner_vfs = nullptr;
    return Internal(std::string("sqlite3_vfs_register failed: ") + sqlite3_errstr(rc));
  }
  // SQLite's documented way: a string from sqlite3_mprintf(), set while no connection exists.
  sqlite3_free(sqlite3_temp_directory);
  sqlite3_temp_directory = dir_copy;
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Stale files

namespace {

bool IsSpillFileName(std::string_view name) {
  return name.starts_with("etilqs_") || name.starts_with("qr-spill-");
}

}  // namespace

Status RemoveStaleSpillFiles(const std::string& dir, int64_t* removed) {
  *removed = 0;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    if (errno == ENOENT) return Status::OK();
    return InvalidArgument("cannot open the spill directory '" + dir + "': " +
                           std::strerror(errno));
  }
  DIR* d = ::fdopendir(dir_fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(dir_fd);
    return Internal("cannot list the spill directory '" + dir + "': " + std::strerror(err));
  }
  Status status;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(d);
    if (entry == nullptr) {
      if (errno != 0) {
        status = Internal("cannot list the spill directory '" + dir + "': " +
                          std::strerror(errno));
      }
      break;
    }
    if (!IsSpillFileName(entry->d_name)) continue;
    struct stat st;
    // AT_SYMLINK_NOFOLLOW: a symlink is looked at, not through, and then left alone.
    if (::fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode)) continue;
    if (::unlinkat(dir_fd, entry->d_name, 0) == 0) {
      ++*removed;
    } else if (errno != ENOENT) {
      status = Internal("cannot remove the stale spill file '" + dir + "/" + entry->d_name +
                        "': " + std::strerror(errno));
      break;
    }
  }
  ::closedir(d);  // Closes 'dir_fd' too.
  return status;
}

}  // namespace qr
