#include "runtime/sample-db-generator.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <glog/logging.h>

namespace qr::sample_db {

namespace {

constexpr uint64_t kSeed = 0x5eed'7bc4'0001'2024ULL;

/// splitmix64: tiny, fast, and its output is fixed by its definition, unlike the std::random
/// distributions whose results differ between standard library versions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi] (the modulo bias is irrelevant for sample data).
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <size_t N>
  const char* Pick(const std::array<const char*, N>& a) { return a[Uniform(0, N - 1)]; }

 private:
  uint64_t state_;
};

constexpr std::array<const char*, 5> kRegions = {"AFRICA", "AMERICA", "ASIA", "EUROPE",
                                                 "MIDDLE EAST"};
struct Nation {
  const char* name;
  int region;
};
constexpr std::array<Nation, 25> kNations = {{
    {"ALGERIA", 0}, {"ARGENTINA", 1}, {"BRAZIL", 1}, {"CANADA", 1}, {"EGYPT", 4},
    {"ETHIOPIA", 0}, {"FRANCE", 3}, {"GERMANY", 3}, {"INDIA", 2}, {"INDONESIA", 2},
    {"IRAN", 4}, {"IRAQ", 4}, {"JAPAN", 2}, {"JORDAN", 4}, {"KENYA", 0},
    {"MOROCCO", 0}, {"MOZAMBIQUE", 0}, {"PERU", 1}, {"CHINA", 2}, {"ROMANIA", 3},
    {"SAUDI ARABIA", 4}, {"VIETNAM", 2}, {"RUSSIA", 3}, {"UNITED KINGDOM", 3},
    {"UNITED STATES", 1},
}};
constexpr std::array<const char*, 5> kSegments = {"AUTOMOBILE", "BUILDING", "FURNITURE",
                                                  "MACHINERY", "HOUSEHOLD"};
constexpr std::array<const char*, 5> kPriorities = {"1-URGENT", "2-HIGH", "3-MEDIUM",
                                                    "4-NOT SPECIFIED", "5-LOW"};
constexpr std::array<const char*, 4> kInstructions = {"DELIVER IN PERSON", "COLLECT COD", "NONE",
                                                      "TAKE BACK RETURN"};
constexpr std::array<const char*, 7> kShipModes = {"REG AIR", "AIR", "RAIL", "SHIP",
                                                   "TRUCK", "MAIL", "FOB"};
constexpr std::array<const char*, 24> kWords = {
    "furiously", "quickly", "carefully", "blithely", "slyly", "final", "regular", "express",
    "special", "pending", "ironic", "bold", "packages", "requests", "accounts", "deposits",
    "foxes", "ideas", "theodolites", "instructions", "sleep", "haggle", "nag", "cajole"};

constexpr const char* kSchema = R"sql(
CREATE TABLE region (r_regionkey INTEGER PRIMARY KEY, r_name CHAR(25) NOT NULL,
  r_comment VARCHAR(152));
CREATE TABLE nation (n_nationkey INTEGER PRIMARY KEY, n_name CHAR(25) NOT NULL,
  n_regionkey INTEGER NOT NULL, n_comment VARCHAR(152));
CREATE TABLE customer (c_custkey INTEGER PRIMARY KEY, c_name VARCHAR(25) NOT NULL,
  c_address VARCHAR(40) NOT NULL, c_nationkey INTEGER NOT NULL, c_phone CHAR(15) NOT NULL,
  c_acctbal DOUBLE NOT NULL, c_mktsegment CHAR(10) NOT NULL, c_comment VARCHAR(117) NOT NULL);
CREATE TABLE orders (o_orderkey INTEGER PRIMARY KEY, o_custkey INTEGER NOT NULL,
  o_orderstatus CHAR(1) NOT NULL, o_totalprice DOUBLE NOT NULL, o_orderdate DATE NOT NULL,
  o_orderpriority CHAR(15) NOT NULL, o_clerk CHAR(15) NOT NULL,
  o_shippriority INTEGER NOT NULL, o_comment VARCHAR(79) NOT NULL);
CREATE TABLE lineitem (l_orderkey INTEGER NOT NULL, l_partkey INTEGER NOT NULL,
  l_suppkey INTEGER NOT NULL, l_linenumber INTEGER NOT NULL, l_quantity DOUBLE NOT NULL,
  l_extendedprice DOUBLE NOT NULL, l_discount DOUBLE NOT NULL, l_tax DOUBLE NOT NULL,
  l_returnflag CHAR(1) NOT NULL, l_linestatus CHAR(1) NOT NULL, l_shipdate DATE NOT NULL,
  l_commitdate DATE NOT NULL, l_receiptdate DATE NOT NULL, l_shipinstruct CHAR(25) NOT NULL,
  l_shipmode CHAR(10) NOT NULL, l_comment VARCHAR(44) NOT NULL);
CREATE TABLE qr_sample_metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql";

/// Row counts, in the order of 'kTables'.
using Counts = std::array<int64_t, 5>;

// Days since 1970-01-01 from a civil date, and back (H. Hinnant's algorithms).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::string FormatDate(int64_t days) {
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2);
  // By hand: snprintf showed up in profiles of the generator.
  char buf[10];
  auto put = [&buf](int pos, int64_t v, int digits) {
    for (int i = digits - 1; i >= 0; --i, v /= 10) buf[pos + i] = static_cast<char>('0' + v % 10);
  };
  put(0, y, 4);
  buf[4] = '-';
  put(5, m, 2);
  buf[7] = '-';
  put(8, d, 2);
  return std::string(buf, sizeof(buf));
}

std::string Comment(Rng* rng, int max_len) {
  std::string s;
  for (int64_t n = rng->Uniform(2, 6); n > 0; --n) {
    const char* w = rng->Pick(kWords);
    if (s.size() + 1 + std::strlen(w) > static_cast<size_t>(max_len)) break;
    if (!s.empty()) s += ' ';
    s += w;
  }
  return s;
}

std::string RandomText(Rng* rng, int min_len, int max_len) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,";
  std::string s(rng->Uniform(min_len, max_len), ' ');
  for (char& c : s) c = kAlphabet[rng->Uniform(0, sizeof(kAlphabet) - 2)];
  return s;
}

std::string Numbered(const char* prefix, int64_t n) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s#%09lld", prefix, static_cast<long long>(n));
  return buf;
}
int64_t Scaled(double base, double scale) {
  return std::max<int64_t>(1, std::llround(base * scale));
}
/// One generated lineitem, kept until its order's totals are known.
struct Line {
  int64_t partkey, suppkey, quantity, price_cents, discount_pct, tax_pct;
  int64_t ship, commit, receipt;
  char returnflag, linestatus;
};

/// Writes the sample data into an open, empty database.
class Generator {
 public:
  Generator(sqlite3* db, std::string path, double scale)
      : db_(db), path_(std::move(path)), scale_(scale) {}

  Status Run(Counts* counts);

 private:
  Status Exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqliteError(db_, path_, "writing");
    }
    return Status::OK();
  }
  Status Prepare(const char* sql, StmtPtr* out) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
      return SqliteError(db_, path_, "preparing an insert into");
    }
    out->reset(s);
    return Status::OK();
  }
  void Bind(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
  void Bind(sqlite3_stmt* s, int i, int v) { sqlite3_bind_int64(s, i, v); }
  void Bind(sqlite3_stmt* s, int i, double v) { sqlite3_bind_double(s, i, v); }
  void Bind(sqlite3_stmt* s, int i, const std::string& v) { Bind(s, i, std::string_view(v)); }
  void Bind(sqlite3_stmt* s, int i, std::string_view v) {
    // SQLITE_STATIC: every argument outlives the sqlite3_step() in Insert().
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  template <typename... Args>
  Status Insert(sqlite3_stmt* s, const Args&... args) {
    int i = 0;
    (Bind(s, ++i, args), ...);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? Status::OK() : SqliteError(db_, path_, "writing");
  }
  Status WriteFixedTables();
  Status WriteCustomers(int64_t n);
  Status WriteOrders(int64_t n, int64_t customers, int64_t* lineitems);
  Status InsertLine(sqlite3_stmt* s, Rng* rng, int64_t orderkey, int number, const Line& l);
  Status WriteMetadata(const Counts& counts);

  sqlite3* const db_;
  const std::string path_;
  const double scale_;
};

Status Generator::WriteFixedTables() {
  Rng rng(kSeed ^ 1);
  StmtPtr region, nation;
  QR_RETURN_IF_ERROR(Prepare("INSERT INTO region VALUES (?, ?, ?)", &region));
  QR_RETURN_IF_ERROR(Prepare("INSERT INTO nation VALUES (?, ?, ?, ?)", &nation));
  for (int i = 0; i < static_cast<int>(kRegions.size()); ++i) {
    const std::string comment = Comment(&rng, 152);
    QR_RETURN_IF_ERROR(Insert(region.get(), i, std::string_view(kRegions[i]), comment));
  }
  for (int i = 0; i < static_cast<int>(kNations.size()); ++i) {
    const std::string comment = Comment(&rng, 152);
    QR_RETURN_IF_ERROR(Insert(nation.get(), i, std::string_view(kNations[i].name),
                           kNations[i].region, comment));
  }
  return Status::OK();
}

// Every random value is drawn into a named local, in a fixed order, before it is used: the
// evaluation order of function arguments differs between compilers, the data must not.

Status Generator::WriteCustomers(int64_t n) {
  Rng rng(kSeed ^ 2);
  StmtPtr s;
  QR_RETURN_IF_ERROR(Prepare("INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?)", &s));
  for (int64_t key = 1; key <= n; ++key) {
    const int64_t nation = rng.Uniform(0, kNations.size() - 1);
    const std::string address = RandomText(&rng, 10, 40);
    const int64_t p1 = rng.Uniform(100, 999), p2 = rng.Uniform(100, 999);
    const int64_t p3 = rng.Uniform(1000, 9999);
    char phone[32];
    std::snprintf(phone, sizeof(phone), "%02d-%03d-%03d-%04d", static_cast<int>(nation + 10),
                  static_cast<int>(p1), static_cast<int>(p2), static_cast<int>(p3));
    const double acctbal = static_cast<double>(rng.Uniform(-99999, 999999)) / 100.0;
    const std::string_view segment = rng.Pick(kSegments);
    const std::string comment = Comment(&rng, 117);
    QR_RETURN_IF_ERROR(Insert(s.get(), key, Numbered("Customer", key), address, nation,
                           std::string_view(phone), acctbal, segment, comment));
  }
  return Status::OK();
}

/// A lineitem of an order placed on day 'order_date' (TPC-H's rules, simplified).
Line RandomLine(Rng* rng, int64_t order_date, int64_t parts, int64_t suppliers) {
  static const int64_t kCurrentDate = DaysFromCivil(1995, 6, 17);
  Line l;
  l.partkey = rng->Uniform(1, parts);
  l.suppkey = rng->Uniform(1, suppliers);
  l.quantity = rng->Uniform(1, 50);
  // TPC-H's retail price of a part, in cents, times the quantity.
  l.price_cents = l.quantity * (90000 + (l.partkey / 10) % 20001 + 100 * (l.partkey % 1000));
  l.discount_pct = rng->Uniform(0, 10);
  l.tax_pct = rng->Uniform(0, 8);
  l.ship = order_date + rng->Uniform(1, 121);
  l.commit = order_date + rng->Uniform(30, 90);
  l.receipt = l.ship + rng->Uniform(1, 30);
  const bool returned = rng->Uniform(0, 1) == 1;
  l.returnflag = l.receipt <= kCurrentDate ? (returned ? 'R' : 'A') : 'N';
  l.linestatus = l.ship > kCurrentDate ? 'O' : 'F';
  return l;
}

Status Generator::InsertLine(sqlite3_stmt* s, Rng* rng, int64_t orderkey, int number,
                             const Line& l) {
  const std::string_view instruction = rng->Pick(kInstructions);
  const std::string_view mode = rng->Pick(kShipModes);
  const std::string comment = Comment(rng, 44);
  const char flags[2] = {l.returnflag, l.linestatus};
  return Insert(s, orderkey, l.partkey, l.suppkey, number, static_cast<double>(l.quantity),
                static_cast<double>(l.price_cents) / 100.0,
                static_cast<double>(l.discount_pct) / 100.0,
                static_cast<double>(l.tax_pct) / 100.0, std::string_view(&flags[0], 1),
                std::string_view(&flags[1], 1), FormatDate(l.ship), FormatDate(l.commit),
                FormatDate(l.receipt), instruction, mode, comment);
}

Status Generator::WriteOrders(int64_t n, int64_t customers, int64_t* lineitems) {
  Rng rng(kSeed ^ 3);
  const int64_t parts = Scaled(200000, scale_), suppliers = Scaled(10000, scale_);
  const int64_t clerks = Scaled(1000, scale_);
  const int64_t start = DaysFromCivil(1992, 1, 1), end = DaysFromCivil(1998, 12, 31) - 151;
  StmtPtr order_stmt, line_stmt;
  QR_RETURN_IF_ERROR(Prepare("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", &order_stmt));
  QR_RETURN_IF_ERROR(Prepare(
      "INSERT INTO lineitem VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", &line_stmt));
  std::array<Line, 7> lines;
  for (int64_t key = 1; key <= n; ++key) {
    const int64_t custkey = rng.Uniform(1, customers), date = rng.Uniform(start, end);
    const int num_lines = static_cast<int>(rng.Uniform(1, 7));
    int64_t total_cents = 0;
    int num_open = 0;
    for (int i = 0; i < num_lines; ++i) {
      const Line& l = lines[i] = RandomLine(&rng, date, parts, suppliers);
      num_open += l.linestatus == 'O';
      total_cents += (l.price_cents * (100 + l.tax_pct) * (100 - l.discount_pct) + 5000) / 10000;
    }
    const char* status = num_open == num_lines ? "O" : num_open == 0 ? "F" : "P";
    const std::string_view priority = rng.Pick(kPriorities);
    const int64_t clerk = rng.Uniform(1, clerks);
    const std::string comment = Comment(&rng, 79);
    QR_RETURN_IF_ERROR(Insert(order_stmt.get(), key, custkey, std::string_view(status),
                           static_cast<double>(total_cents) / 100.0, FormatDate(date), priority,
                           Numbered("Clerk", clerk), 0, comment));
    for (int i = 0; i < num_lines; ++i) {
      QR_RETURN_IF_ERROR(InsertLine(line_stmt.get(), &rng, key, i + 1, lines[i]));
    }
    *lineitems += num_lines;
  }
  return Status::OK();
}

Status Generator::WriteMetadata(const Counts& counts) {
  StmtPtr s;
  QR_RETURN_IF_ERROR(Prepare("INSERT INTO qr_sample_metadata VALUES (?, ?)", &s));
  QR_RETURN_IF_ERROR(
      Insert(s.get(), std::string_view("generator"), std::string_view(kGeneratorVersion)));
  QR_RETURN_IF_ERROR(Insert(s.get(), std::string_view("scale_factor"), ScaleString(scale_)));
  for (size_t i = 0; i < kTables.size(); ++i) {
    QR_RETURN_IF_ERROR(
        Insert(s.get(), std::string("rows_") + kTables[i], std::to_string(counts[i])));
  }
  return Status::OK();
}

Status Generator::Run(Counts* counts) {
  // The file is private until renamed into place and is fsync()ed explicitly at the end, so no
  // journal and no intermediate syncs are needed.
  QR_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                       "PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=-32768; BEGIN;"));
  QR_RETURN_IF_ERROR(Exec(kSchema));
  QR_RETURN_IF_ERROR(WriteFixedTables());
  const int64_t customers = Scaled(150000, scale_), orders = Scaled(1500000, scale_);
  int64_t lineitems = 0;
  QR_RETURN_IF_ERROR(WriteCustomers(customers));
  QR_RETURN_IF_ERROR(WriteOrders(orders, customers, &lineitems));
  *counts = {static_cast<int64_t>(kRegions.size()), static_cast<int64_t>(kNations.size()),
             customers, orders, lineitems};
  QR_RETURN_IF_ERROR(WriteMetadata(*counts));
  QR_RETURN_IF_ERROR(Exec("CREATE INDEX lineitem_orderkey ON lineitem (l_orderkey); COMMIT;"));
  return Status::OK();
}

Status ErrnoError(const std::string& what, const std::string& path) {
  return Internal(what + " '" + path + "': " + std::strerror(errno));
}

Status FsyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open for fsync", path);
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return rc == 0 ? Status::OK() : ErrnoError("cannot fsync", path);
}
}  // namespace

std::string ScaleString(double scale) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), scale);
  return std::string(buf, r.ptr);
}
Status SqliteError(sqlite3* db, const std::string& path, const char* what) {
  return Internal(std::string("SQLite error while ") + what + " '" + path + "': " +
                  (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}
/// Generates the database into a fresh temporary file in 'dir' and renames it to 'path'.
Status Generate(const std::string& dir, const std::string& path, double scale) {
  std::string tmp = dir + "/." + std::filesystem::path(path).filename().string() + ".XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create a temporary file in the data directory", dir);
  // Held until the file is renamed or removed: RemoveStaleGenerations() of another process
  // must not take a generation in progress for the leftover of a crash. (SQLite's own locks
  // are fcntl locks, independent of this one.)
  ::flock(fd, LOCK_EX);
  Status st = [&]() -> Status {
    sqlite3* raw = nullptr;
    int rc = sqlite3_open_v2(tmp.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    DbPtr db(raw);
    if (rc != SQLITE_OK) return SqliteError(raw, tmp, "opening");
    Counts counts;
    QR_RETURN_IF_ERROR(Generator(db.get(), tmp, scale).Run(&counts));
    if (sqlite3_close(db.release()) != SQLITE_OK) return Internal("cannot close '" + tmp + "'");
    QR_RETURN_IF_ERROR(FsyncPath(tmp, O_RDONLY));
    if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("cannot rename into", path);
    LOG(INFO) << "Generated the TPC-H sample database '" << path << "' (scale factor " << scale
              << ", " << counts[4] << " lineitem rows)";
    return FsyncPath(dir, O_RDONLY | O_DIRECTORY);
  }();
  if (!st.ok()) ::unlink(tmp.c_str());
  ::close(fd);
  return st;
}
}  // namespace qr::sample_db
