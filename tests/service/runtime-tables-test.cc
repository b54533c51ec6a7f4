// system.runtime.queries and system.runtime.nodes: the coordinator's registry and query log
// read in SQL, each query exactly once while queries complete, filtered by who asks.

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http/base64.h"
#include "http/password-file.h"
#include "runtime/system-tables.h"
#include "service/debug-pages.h"
#include "service-test-util.h"

namespace qr::testing {
namespace {

using nlohmann::json;

constexpr const char* kQueries = "system.runtime.queries";

class RuntimeTablesTest : public ServiceTest {
 protected:
  void TearDown() override {
    if (server_) server_->Shutdown(0);
  }
  void Start(CoordinatorServer::Options o) {
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    port_ = server_->port();
  }
  /// Starts with authentication: alice, bob and root (the admin), each with password
  /// "<user>-pw", in password file 'name' of the data directory.
  void StartWithAuthentication(const std::string& name) {
    const std::string file = data_dir_ + "/" + name;
    {
      std::ofstream out(file);
      for (const char* user : {"alice", "bob", "root"}) {
        std::string line;
        ASSERT_TRUE(MakePasswordEntryLine(user, std::string(user) + "-pw",
                                          kMinPasswordIterations, &line)
                        .ok());
        out << line << "\n";
      }
    }
    CoordinatorServer::Options o = DefaultOptions();
    o.auth_password_file = file;
    o.allow_insecure_auth = true;
    o.admin_users = "root";
    Start(o);
  }
  /// A client authenticated as 'user' (no user header: the authenticated user is the user).
  static StatementOptions As(const std::string& user) {
    StatementOptions so;
    so.user = "";
    so.headers = {{"Authorization", "Basic " + Base64Encode(user + ":" + user + "-pw")}};
    return so;
  }
  /// Runs 'sql' to FINISHED as 'options' and returns its rows.
  std::vector<json> Rows(const std::string& sql, StatementOptions options = {}) {
    StatementResult r = RunStatement(port_, sql, std::move(options));
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_EQ(r.final_state, "FINISHED") << sql << ": " << r.error.dump();
    return r.rows;
  }
  /// How often each query id of user 'user' appears in system.runtime.queries.
  std::map<std::string, int> Listed(const std::string& user) {
    std::map<std::string, int> seen;
    for (const json& row :
         Rows(std::string("SELECT query_id FROM ") + kQueries + " WHERE user = '" + user + "'")) {
      ++seen[row[0].get<std::string>()];
    }
    return seen;
  }

  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};


/// Three queries of 64 KiB statements; counts how often it is asked.
class CountingSource : public SystemTablesSource {
 public:
  std::vector<RuntimeQueryRow> Queries(const SqlViewer&) override {
    ++calls;
    std::vector<RuntimeQueryRow> rows(3);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].query_id = "q" + std::to_string(i);
      rows[i].state = "RUNNING";
      rows[i].user = "u";
      rows[i].query = statement;
    }
    return rows;
  }
  std::vector<RuntimeNodeRow> Nodes() override { return {}; }
  int calls = 0;
  const std::shared_ptr<const std::string> statement =
      std::make_shared<const std::string>(64 << 10, 'x');
};

// SQLite scans a virtual table again for each outer row of a join: each scan asked the
// source again (a copy of every statement, and in a cluster a fan-out to every member, per
// outer row). A statement now takes one snapshot, and its rows share the statements.
TEST(SystemTablesTest, AStatementTakesOneSnapshotOfTheQueries) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  CountingSource source;
  std::unique_ptr<SystemTables> tables;
  ASSERT_TRUE(SystemTables::Register(db, &source, &tables).ok());
  SqlViewer viewer;
  tables->set_viewer(&viewer);
  const std::string sql = std::string("SELECT count(*), sum(length(a.query)) FROM ") +
                          kRuntimeQueriesTable + " a, " + kRuntimeQueriesTable + " b, " +
                          kRuntimeQueriesTable + " c";
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(stmt, 0), 27);
  EXPECT_EQ(sqlite3_column_int64(stmt, 1), int64_t{27} * (64 << 10));
  sqlite3_finalize(stmt);
  EXPECT_EQ(source.calls, 1);
  EXPECT_EQ(source.statement.use_count(), 4) << "the snapshot shares the statement";
  // The next statement (a new viewer) takes a snapshot of its own.
  tables->set_viewer(nullptr);
  EXPECT_EQ(source.statement.use_count(), 1);
  tables->set_viewer(&viewer);
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  sqlite3_finalize(stmt);
  EXPECT_EQ(source.calls, 2);
  tables->set_viewer(nullptr);
  sqlite3_close(db);
}

TEST(TimestampFormatTest, SqlAndIsoStylesOfOneInstant) {
  // 2026-11-26 07:05:23.123 UTC; and one millisecond before the epoch rounds down.
  EXPECT_EQ(FormatTimestampMillis(1795676723123), "2026-11-26 07:05:23.123");
  EXPECT_EQ(FormatTimestampMillis(1795676723123, TimestampStyle::kIso), "2026-11-26T07:05:23.123Z");
  EXPECT_EQ(FormatTimestampMillis(-1), "1969-12-31 23:59:59.999");
  EXPECT_EQ(FormatTimestampMillis(0, TimestampStyle::kIso), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(debug_pages::FormatIsoTime(std::chrono::system_clock::time_point(std::chrono::milliseconds(1))),
            "1970-01-01T00:00:00.001Z");
}

TEST_F(RuntimeTablesTest, ColumnsAreTrinosAndAQueryShowsItself) {
  Start(DefaultOptions());
  StatementOptions so;
  so.user = "carol";
  so.post_headers = {{"X-Trino-Source", "runtime-test"},
                     {"X-Trino-Client-Info", "info-1"},
                     {"X-Trino-Client-Tags", "a, b"}};
  StatementResult r = RunStatement(
      port_,
      std::string("SELECT query_id, state, user, source, query, queued_time_ms >= 0, "
                  "created IS NOT NULL, started IS NOT NULL, \"end\", error_code, client_info, "
                  "client_tags FROM ") +
          kQueries + " WHERE user = 'carol'",
      so);
  ASSERT_EQ(r.final_state, "FINISHED") << r.error.dump();
  ASSERT_EQ(r.rows.size(), 1u);
  const json& row = r.rows[0];
  EXPECT_EQ(row[0], r.id) << "the running statement lists itself";
  EXPECT_EQ(row[1], "RUNNING");
  EXPECT_EQ(row[2], "carol");
  EXPECT_EQ(row[3], "runtime-test");
  EXPECT_NE(row[4].get<std::string>().find("WHERE user = 'carol'"), std::string::npos);
  EXPECT_EQ(row[5], 1);
  EXPECT_EQ(row[6], 1);
  EXPECT_EQ(row[7], 1);
  EXPECT_TRUE(row[8].is_null());
  EXPECT_TRUE(row[9].is_null());
  EXPECT_EQ(row[10], "info-1");
  EXPECT_EQ(row[11], R"(["a","b"])");

  // Once finished, the same query is in the log with its end, and a failed one with its error.
  StatementResult failed = RunStatement(port_, "SELECT * FROM no_such_table", so);
  ASSERT_EQ(failed.final_state, "FAILED");
  std::map<std::string, json> by_id;
  for (json& row :
       Rows(std::string("SELECT query_id, state, \"end\" IS NOT NULL, error_type, error_code, "
                        "rows FROM ") +
                kQueries + " WHERE user = 'carol'",
            so)) {
    by_id[row[0].get<std::string>()] = row;
  }
  ASSERT_EQ(by_id.size(), 3u) << "two ended, and the one running";
  const json& finished = by_id[r.id];
  EXPECT_EQ(finished[1], "FINISHED");
  EXPECT_EQ(finished[2], 1);
  EXPECT_EQ(finished[5], 1) << "the one row its client fetched";
  const json& error = by_id[failed.id];
  EXPECT_EQ(error[1], "FAILED");
  EXPECT_EQ(error[2], 1);
  EXPECT_EQ(error[3], "USER_ERROR");
  EXPECT_EQ(error[4], failed.error_name());
}

TEST_F(RuntimeTablesTest, NodesListsThisCoordinator) {
  Start(DefaultOptions());
  std::vector<json> rows =
      Rows("SELECT node_id, http_uri, node_version, coordinator, state FROM system.runtime.nodes");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1], "http://127.0.0.1:" + std::to_string(port_));
  EXPECT_FALSE(rows[0][2].get<std::string>().empty());
  EXPECT_EQ(rows[0][3], true) << "declared BOOLEAN";
  EXPECT_EQ(rows[0][4], "active");
}

TEST_F(RuntimeTablesTest, EveryQueryIsListedExactlyOnceWhileQueriesComplete) {
  // A thousand queries in flight (run, never fetched), then canceled one by one while the
  // table is read: each moves from the registry to the query log between two shards'
  // snapshots at any moment, and must still appear exactly once.
  constexpr int kQueriesInFlight = QR_TEST_UNDER_TSAN ? 300 : 1000;
  CoordinatorServer::Options o = DefaultOptions();
  o.coordinator.max_in_flight_queries = kQueriesInFlight + 100;
  o.coordinator.max_in_flight_queries_per_user = kQueriesInFlight + 100;
  o.coordinator.max_queued_queries = kQueriesInFlight + 100;
  o.coordinator.query_log_size = kQueriesInFlight + 100;
  o.coordinator.abandoned_query_timeout_ms = 0;
  Start(o);
  QueryCoordinator* coordinator = server_->coordinator();
  std::vector<ClientRequestStatePtr> load;
  std::set<std::string> ids;
  for (int i = 0; i < kQueriesInFlight; ++i) {
    SessionInfo s;
    s.user = "load";
    load.push_back(coordinator->Submit(std::make_shared<const std::string>("SELECT 1"), s));
    ids.insert(PrintId(load.back()->query_id()));
  }
  std::map<std::string, int> before = Listed("load");
  EXPECT_EQ(before.size(), ids.size());
  for (const auto& [id, n] : before) {
    EXPECT_EQ(n, 1) << id;
    EXPECT_TRUE(ids.contains(id)) << id;
  }

  // The canceler waits for a read to end after every few cancels, so the reads are spread
  // over the whole migration rather than done before it starts or after it ends.
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::thread canceler([&] {
    for (size_t i = 0; i < load.size(); ++i) {
      EXPECT_TRUE(coordinator->Cancel(load[i]->query_id()).ok());
      if (i % 25 == 24) {
        const int seen = reads.load();
        EXPECT_TRUE(WaitFor([&] { return reads.load() > seen; }));
      }
    }
    done.store(true);
  });
  do {
    std::map<std::string, int> seen = Listed("load");
    const int read = reads.fetch_add(1) + 1;
    EXPECT_EQ(seen.size(), ids.size()) << "read " << read;
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " in read " << read;
  } while (!done.load());
  canceler.join();
  EXPECT_GE(reads.load(), kQueriesInFlight / 25);
  std::vector<json> states = Rows(std::string("SELECT state, error_code, count(*) FROM ") +
                                  kQueries + " WHERE user = 'load' GROUP BY 1, 2");
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0][0], "FAILED");
  EXPECT_EQ(states[0][1], "USER_CANCELED");
  EXPECT_EQ(states[0][2], kQueriesInFlight);
}

TEST_F(RuntimeTablesTest, WithAuthenticationANonAdminSeesOnlyTheirOwnQueries) {
  StartWithAuthentication("runtime-tables.passwd");
  for (const char* user : {"alice", "bob"}) {
    ASSERT_EQ(RunStatement(port_, "SELECT 1", As(user)).final_state, "FINISHED");
  }
  const std::string users =
      std::string("SELECT DISTINCT user FROM ") + kQueries + " ORDER BY user";
  std::vector<json> alice = Rows(users, As("alice"));
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0][0], "alice");
  std::vector<json> root = Rows(users, As("root"));
  ASSERT_EQ(root.size(), 3u) << "the admin sees everyone's";
  EXPECT_EQ(root[0][0], "alice");
  EXPECT_EQ(root[1][0], "bob");
  EXPECT_EQ(root[2][0], "root");
}

TEST_F(RuntimeTablesTest, AnAggregateShowsLiveCpuAndProgressBeforeItsFirstRow) {
  // count(*) over an endless recursive CTE produces no row until it ends: its CPU time and
  // SQLite VM steps are the only sign of progress, and must move while it runs.
  Start(DefaultOptions());
  StatementClient client(port_);
  ASSERT_EQ(client.Submit(kEndlessQuery).status, 200);
  UniqueId id;
  ASSERT_TRUE(ParseId(client.result().id, &id).ok());
  ClientRequestStatePtr req = server_->coordinator()->Find(id);
  ASSERT_NE(req, nullptr);
  ASSERT_TRUE(WaitFor([&] {
    ClientRequestState::Info info = req->GetInfo();
    return info.vm_steps > 0 && info.cpu_time_ns > 0;
  }, 10s)) << req->GetInfo().vm_steps << " steps, " << req->GetInfo().cpu_time_ns << " ns, "
           << req->exec_elapsed_ms() << " ms executing";
  const ClientRequestState::Info first = req->GetInfo();
  ASSERT_TRUE(WaitFor([&] {
    ClientRequestState::Info info = req->GetInfo();
    return info.vm_steps > first.vm_steps && info.cpu_time_ns > first.cpu_time_ns;
  }));
  EXPECT_EQ(req->GetInfo().rows_produced, 0);
  std::vector<json> rows =
      Rows(std::string("SELECT vm_steps, rows FROM ") + kQueries + " WHERE query_id = '" +
           client.result().id + "'");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0][0].get<int64_t>(), first.vm_steps);
  EXPECT_EQ(rows[0][1], 0);
  EXPECT_EQ(client.Cancel().status, 204);
}

TEST_F(RuntimeTablesTest, KillQueryCancelsWithItsMessageUnderTheCancelRules) {
  StartWithAuthentication("kill-query.passwd");
  StatementClient alice(port_, As("alice"));
  ASSERT_EQ(alice.Submit(kEndlessQuery).status, 200);
  const std::string id = alice.result().id;
  auto kill = [&](const std::string& user, const std::string& call) {
    return RunStatement(port_, call, As(user));
  };
  // Bob may not see alice's query: answered as if it did not exist, and it keeps running.
  StatementResult denied =
      kill("bob", "CALL system.runtime.kill_query(query_id => '" + id + "', message => 'x')");
  EXPECT_EQ(denied.final_state, "FAILED");
  EXPECT_EQ(denied.error_name(), "NOT_FOUND") << denied.error.dump();
  UniqueId uid;
  ASSERT_TRUE(ParseId(id, &uid).ok());
  ClientRequestStatePtr req = server_->coordinator()->Find(uid);
  ASSERT_NE(req, nullptr);
  EXPECT_FALSE(ClientRequestState::IsTerminal(req->state()));
  // Positional arguments, the admin: the query ends with the message.
  StatementResult killed =
      kill("root", "CALL system.runtime.kill_query('" + id + "', 'too slow, sorry')");
  EXPECT_EQ(killed.final_state, "FINISHED") << killed.error.dump();
  ASSERT_TRUE(ClientRequestState::IsTerminal(req->state()));
  while (!alice.done()) alice.Advance();
  EXPECT_EQ(alice.result().final_state, "FAILED");
  EXPECT_EQ(alice.result().error_name(), "USER_CANCELED");
  EXPECT_EQ(alice.result().error.value("message", ""), "Query killed. Message: too slow, sorry");
  // Killing it again, a malformed call, an unknown procedure.
  StatementResult again = kill("alice", "CALL system.runtime.kill_query(query_id => '" + id + "')");
  EXPECT_EQ(again.error_name(), "GENERIC_USER_ERROR") << again.error.dump();
  EXPECT_NE(again.error.value("message", "").find("not running"), std::string::npos);
  EXPECT_EQ(kill("alice", "CALL system.runtime.kill_query(message => 'no id')").error_name(),
            "SYNTAX_ERROR");
  EXPECT_EQ(kill("alice", "CALL system.runtime.other('x')").error_name(), "NOT_SUPPORTED");
}

}  // namespace
}  // namespace qr::testing
