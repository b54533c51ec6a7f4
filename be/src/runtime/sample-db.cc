#include "runtime/sample-db.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "runtime/sample-db-generator.h"

namespace qr {

namespace {

using sample_db::DbPtr;
using sample_db::kGeneratorVersion;
using sample_db::kTables;
using sample_db::ScaleString;
using sample_db::SqliteError;
using sample_db::StmtPtr;

constexpr double kMinScale = 0.0001;
constexpr double kMaxScale = 100;

}  // namespace

int RemoveStaleGenerations(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  std::vector<std::filesystem::path> journals;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // ".tpch-sf<scale>.db.XXXXXX" (mkstemp) and its SQLite journal.
    if (name.rfind(".tpch-sf", 0) != 0 || name.find(".db.") == std::string::npos) continue;
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
    if (name.ends_with("-journal")) {
      journals.push_back(entry.path());
      continue;
    }
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // Free to lock: no generation holds it, so it is what a crash left behind.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(entry.path().c_str()) == 0) ++removed;
    ::close(fd);
  }
  for (const auto& journal : journals) {
    std::string db = journal.string();
    db.resize(db.size() - strlen("-journal"));
    if (!std::filesystem::exists(db, ec) && std::filesystem::remove(journal, ec)) ++removed;
  }
  if (removed > 0) {
    LOG(INFO) << "Removed " << removed << " files of interrupted sample-database generations in "
              << dir;
  }
  return removed;
}

namespace {

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* text = sqlite3_column_text(s, i);
  return text != nullptr ? reinterpret_cast<const char*>(text) : "";
}

/// OK when 'path' holds a complete sample database of 'scale'; otherwise says what is wrong.
Status Validate(const std::string& path, double scale) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  DbPtr db(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, path, "opening");
  std::map<std::string, std::string> meta;
  sqlite3_stmt* raw_stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(), "SELECT key, value FROM qr_sample_metadata", -1, &raw_stmt,
                         nullptr) != SQLITE_OK) {
    return SqliteError(db.get(), path, "reading the metadata of");
  }
  StmtPtr stmt(raw_stmt);
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    meta[ColumnText(stmt.get(), 0)] = ColumnText(stmt.get(), 1);
  }
  if (rc != SQLITE_DONE) return SqliteError(db.get(), path, "reading the metadata of");
  if (meta["generator"] != kGeneratorVersion || meta["scale_factor"] != ScaleString(scale)) {
    return InvalidArgument("'" + path + "' was made by another generator or scale factor");
  }
  for (const char* table : kTables) {
    std::string sql = std::string("SELECT count(*) FROM ") + table;
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &raw_stmt, nullptr) != SQLITE_OK) {
      return SqliteError(db.get(), path, "counting the rows of");
    }
    stmt.reset(raw_stmt);
    if (sqlite3_step(stmt.get()) != SQLITE_ROW) return SqliteError(db.get(), path, "counting");
    if (std::to_string(sqlite3_column_int64(stmt.get(), 0)) != meta[std::string("rows_") + table]) {
      return InvalidArgument("'" + path + "': the row count of " + table + " does not match");
    }
  }
  return Status::OK();
}

}  // namespace

Status EnsureSampleDatabase(const std::string& data_dir, double scale_factor, std::string* path) {
  if (!(scale_factor >= kMinScale && scale_factor <= kMaxScale)) {
    return InvalidArgument("the sample database scale factor must be between " +
                           ScaleString(kMinScale) + " and " + ScaleString(kMaxScale) + ", got " +
                           ScaleString(scale_factor));
  }
  if (data_dir.empty()) return InvalidArgument("the data directory must not be empty");
  std::error_code ec;
  if (std::filesystem::exists(data_dir, ec) && !std::filesystem::is_directory(data_dir, ec)) {
    return Internal("the data directory '" + data_dir + "' exists but is not a directory");
  }
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return Internal("cannot create the data directory '" + data_dir + "': " + ec.message());
  }
  RemoveStaleGenerations(data_dir);
  const std::string final_path = data_dir + "/tpch-sf" + ScaleString(scale_factor) + ".db";
  struct stat st;
  if (::stat(final_path.c_str(), &st) == 0) {
    Status valid = Validate(final_path, scale_factor);
    if (valid.ok()) {
      *path = final_path;
      return Status::OK();
    }
    LOG(WARNING) << "Regenerating the sample database: " << valid.message();
  }
  QR_RETURN_IF_ERROR(sample_db::Generate(data_dir, final_path, scale_factor));
  *path = final_path;
  return Status::OK();
}

}  // namespace qr
