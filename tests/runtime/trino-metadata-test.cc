// SHOW, DESCRIBE, EXPLAIN, information_schema and system.jdbc as Trino answers them, run
// through the engine over a database with declared DATE, TIMESTAMP and DECIMAL columns; the
// JDBC and SQLAlchemy queries are copied from trino-jdbc's TrinoDatabaseMetaData and
// trino-python-client's trino/sqlalchemy/dialect.py.

#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sqlite-engine.h"
#include "runtime-test-util.h"

namespace qr {
namespace {

using qr::testing::QueryOutcome;
using qr::testing::ScopedTempDir;
using Json = nlohmann::json;

void WriteEventsDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
    CREATE TABLE events (id INTEGER PRIMARY KEY, day DATE NOT NULL, at TIMESTAMP,
                         amount DECIMAL(10,2), name VARCHAR(20) DEFAULT 'x', ok BOOLEAN);
    INSERT INTO events VALUES (1, '2024-02-29', '2024-02-29 13:45:06.123456', 12.5, 'a', 1);
    INSERT INTO events VALUES (2, '2024-03-01T00:00:00', '2024-03-01T08:09', '-0.5', 'b', 0);
    INSERT INTO events VALUES (3, 86400, 1.5, 7, NULL, NULL);
    INSERT INTO events VALUES (4, 'not a date', 'later', 'n/a', 'd', 'true');
    CREATE VIEW v_events AS SELECT id, day FROM events WHERE ok;
  )sql";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

class TrinoMetadataTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    path_ = dir_->path() + "/events.db";
    WriteEventsDatabase(path_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    SqliteEngine::Options options;
    options.database_path = path_;
    options.num_threads = 1;
    Status st = SqliteEngine::Create(options, &engine_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  QueryOutcome Run(const std::string& sql) {
    return qr::testing::Run(&mgr_, engine_.get(), sql);
  }
  /// The rows of a query that must succeed.
  Json Rows(const std::string& sql) {
    QueryOutcome out = Run(sql);
    EXPECT_TRUE(out.ended) << sql;
    EXPECT_FALSE(out.error) << sql << ": " << (out.error ? out.error->message : "");
    return Json::parse(out.RowsJson());
  }
  /// "name type" of each result column.
  std::vector<std::string> Columns(const std::string& sql) {
    QueryOutcome out = Run(sql);
    EXPECT_FALSE(out.error) << sql << ": " << (out.error ? out.error->message : "");
    std::vector<std::string> cols;
    for (const Column& c : out.columns) cols.push_back(c.name + " " + c.type);
    return cols;
  }
  QueryError Fails(const std::string& sql) {
    QueryOutcome out = Run(sql);
    EXPECT_TRUE(out.error.has_value()) << sql;
    return out.error.value_or(QueryError());
  }

  static ScopedTempDir* dir_;
  static std::string path_;
  QueryExecMgr mgr_{4};
  std::unique_ptr<SqliteEngine> engine_;
};

ScopedTempDir* TrinoMetadataTest::dir_ = nullptr;
std::string TrinoMetadataTest::path_;

TEST_F(TrinoMetadataTest, ShowCatalogsSchemasAndTables) {
  EXPECT_EQ(Columns("SHOW CATALOGS"), std::vector<std::string>{"Catalog varchar"});
  EXPECT_EQ(Rows("SHOW CATALOGS"), Json::parse(R"js([["sqlite"],["system"]])js"));
  EXPECT_EQ(Rows("show catalogs like 'sq%';"), Json::parse(R"js([["sqlite"]])js"));
  EXPECT_EQ(Columns("SHOW SCHEMAS"), std::vector<std::string>{"Schema varchar"});
  EXPECT_EQ(Rows("SHOW SCHEMAS"), Json::parse(R"js([["information_schema"],["main"]])js"));
  EXPECT_EQ(Rows("SHOW SCHEMAS FROM sqlite LIKE 'ma%'"), Json::parse(R"js([["main"]])js"));
  EXPECT_EQ(Rows("SHOW SCHEMAS IN system"),
            Json::parse(R"js([["jdbc"],["metadata"],["runtime"]])js"));
  EXPECT_EQ(Columns("SHOW TABLES"), std::vector<std::string>{"Table varchar"});
  EXPECT_EQ(Rows("SHOW TABLES"), Json::parse(R"js([["events"],["v_events"]])js"));
  EXPECT_EQ(Rows("SHOW TABLES FROM sqlite.main LIKE 'v\\_%' ESCAPE '\\'"),
            Json::parse(R"js([["v_events"]])js"));
  EXPECT_EQ(Rows("SHOW TABLES IN main"), Json::parse(R"js([["events"],["v_events"]])js"));
  EXPECT_EQ(Rows("SHOW TABLES FROM information_schema"),
            Json::parse(R"js([["columns"],["schemata"],["tables"],["views"]])js"));
  EXPECT_EQ(Rows("SHOW TABLES FROM system.metadata"),
            Json::parse(R"js([["catalogs"],["table_comments"]])js"));
  EXPECT_EQ(Fails("SHOW TABLES FROM nope").name, "SCHEMA_NOT_FOUND");
  EXPECT_EQ(Fails("SHOW TABLES FROM hive.main").name, "CATALOG_NOT_FOUND");
  EXPECT_EQ(Fails("SHOW SCHEMAS FROM hive").code, 44);
  EXPECT_EQ(Fails("SHOW TABLES FROM").name, "SYNTAX_ERROR");
}

TEST_F(TrinoMetadataTest, ShowColumnsAndDescribe) {
  const std::vector<std::string> shape = {"Column varchar", "Type varchar", "Extra varchar",
                                          "Comment varchar"};
  const Json expected = Json::parse(R"js([["id","bigint","",""],["day","date","",""],
      ["at","timestamp(3)","",""],["amount","decimal(10,2)","",""],
      ["name","varchar(20)","",""],["ok","boolean","",""]])js");
  for (const char* sql : {"SHOW COLUMNS FROM events", "DESCRIBE events", "desc main.events",
                          "DESCRIBE sqlite.main.events", "describe \"EVENTS\";",
                          "SHOW COLUMNS IN sqlite.main.events"}) {
    EXPECT_EQ(Columns(sql), shape) << sql;
    EXPECT_EQ(Rows(sql), expected) << sql;
  }
  EXPECT_EQ(Rows("SHOW COLUMNS FROM events LIKE 'a%'"),
            Json::parse(R"js([["at","timestamp(3)","",""],["amount","decimal(10,2)","",""]])js"));
  EXPECT_EQ(Rows("DESCRIBE v_events"),
            Json::parse(R"js([["id","bigint","",""],["day","date","",""]])js"));
  EXPECT_EQ(Rows("DESCRIBE system.jdbc.table_types"),
            Json::parse(R"js([["TABLE_TYPE","varchar","",""]])js"));
  QueryError e = Fails("DESCRIBE missing");
  EXPECT_EQ(e.name, "TABLE_NOT_FOUND");
  EXPECT_EQ(e.message, "Table 'sqlite.main.missing' does not exist");
  EXPECT_EQ(Fails("DESCRIBE other.events").name, "SCHEMA_NOT_FOUND");
}

TEST_F(TrinoMetadataTest, ShowSessionAndFunctions) {
  EXPECT_EQ(Columns("SHOW SESSION"),
            (std::vector<std::string>{"Name varchar", "Value varchar", "Default varchar",
                                      "Type varchar", "Description varchar"}));
  EXPECT_EQ(Rows("SHOW SESSION LIKE 'query%'"), Json::array());
  EXPECT_EQ(Rows("SHOW FUNCTIONS LIKE 'abs'"),
            Json::parse(R"js([["abs","","1 argument","scalar","true",""]])js"));
  const Json all = Rows("SHOW FUNCTIONS");
  EXPECT_GT(all.size(), 50u);
  for (const Json& row : all) EXPECT_NE(row[0].get<std::string>().rfind("qr_", 0), 0u) << row;
}

// The statements TrinoDatabaseMetaData sends, with the filters a client passes.
TEST_F(TrinoMetadataTest, JdbcDriverQueries) {
  EXPECT_EQ(Rows("SELECT TABLE_CAT\nFROM system.jdbc.catalogs\nORDER BY TABLE_CAT"),
            Json::parse(R"js([["sqlite"],["system"]])js"));
  EXPECT_EQ(Rows("SELECT TABLE_SCHEM, TABLE_CATALOG\nFROM system.jdbc.schemas\n"
                 "WHERE TABLE_CATALOG = 'sqlite' AND TABLE_SCHEM LIKE 'm%' ESCAPE '\\'\n"
                 "ORDER BY TABLE_CATALOG, TABLE_SCHEM"),
            Json::parse(R"js([["main","sqlite"]])js"));
  EXPECT_EQ(Rows("SELECT TABLE_SCHEM, TABLE_CATALOG\nFROM system.jdbc.schemas\n"
                 "ORDER BY TABLE_CATALOG, TABLE_SCHEM").size(), 5u);
  EXPECT_EQ(Rows("SELECT TABLE_CAT, TABLE_SCHEM, TABLE_NAME, TABLE_TYPE, REMARKS,\n"
                 "  TYPE_CAT, TYPE_SCHEM, TYPE_NAME,   SELF_REFERENCING_COL_NAME, REF_GENERATION\n"
                 "FROM system.jdbc.tables\n"
                 "WHERE TABLE_CAT = 'sqlite' AND TABLE_SCHEM LIKE 'main' ESCAPE '\\' AND "
                 "TABLE_NAME LIKE '%' ESCAPE '\\' AND TABLE_TYPE IN ('TABLE', 'VIEW')\n"
                 "ORDER BY TABLE_TYPE, TABLE_CAT, TABLE_SCHEM, TABLE_NAME"),
            Json::parse(R"js([["sqlite","main","events","TABLE",null,null,null,null,null,null],
                ["sqlite","main","v_events","VIEW",null,null,null,null,null,null]])js"));
  const Json cols = Rows(
      "SELECT TABLE_CAT, TABLE_SCHEM, TABLE_NAME, COLUMN_NAME, DATA_TYPE,\n"
      "  TYPE_NAME, COLUMN_SIZE, BUFFER_LENGTH, DECIMAL_DIGITS, NUM_PREC_RADIX,\n"
      "  NULLABLE, REMARKS, COLUMN_DEF, SQL_DATA_TYPE, SQL_DATETIME_SUB,\n"
      "  CHAR_OCTET_LENGTH, ORDINAL_POSITION, IS_NULLABLE,\n"
      "  SCOPE_CATALOG, SCOPE_SCHEMA, SCOPE_TABLE,\n"
      "  SOURCE_DATA_TYPE, IS_AUTOINCREMENT, IS_GENERATEDCOLUMN\n"
      "FROM system.jdbc.columns\n"
      "WHERE TABLE_CAT = 'sqlite' AND TABLE_SCHEM LIKE 'main' ESCAPE '\\' AND TABLE_NAME LIKE "
      "'events' ESCAPE '\\' AND COLUMN_NAME LIKE '%' ESCAPE '\\'\n"
      "ORDER BY TABLE_CAT, TABLE_SCHEM, TABLE_NAME, ORDINAL_POSITION");
  ASSERT_EQ(cols.size(), 6u);
  EXPECT_EQ(cols[0][4], -5);  // java.sql.Types.BIGINT: negative codes are not NULL
  EXPECT_EQ(cols[1], Json::parse(R"js(["sqlite","main","events","day",91,"date",10,null,null,
      null,0,null,null,null,null,null,2,"NO",null,null,null,null,"NO","NO"])js"));
  EXPECT_EQ(cols[3], Json::parse(R"js(["sqlite","main","events","amount",3,"decimal(10,2)",10,
      null,2,10,1,null,null,null,null,null,4,"YES",null,null,null,null,"NO","NO"])js"));
  EXPECT_EQ(cols[4][4], 12);
  EXPECT_EQ(cols[4][6], 20);
  EXPECT_EQ(cols[4][12], "'x'");
  EXPECT_EQ(Rows("SELECT TABLE_TYPE\nFROM system.jdbc.table_types\nORDER BY TABLE_TYPE"),
            Json::parse(R"js([["TABLE"],["VIEW"]])js"));
  const Json types = Rows(
      "SELECT TYPE_NAME, DATA_TYPE, PRECISION, LITERAL_PREFIX, LITERAL_SUFFIX,\n"
      "CREATE_PARAMS, NULLABLE, CASE_SENSITIVE, SEARCHABLE, UNSIGNED_ATTRIBUTE,\n"
      "FIXED_PREC_SCALE, AUTO_INCREMENT, LOCAL_TYPE_NAME, MINIMUM_SCALE, MAXIMUM_SCALE,\n"
      "SQL_DATA_TYPE, SQL_DATETIME_SUB, NUM_PREC_RADIX\n"
      "FROM system.jdbc.types\n"
      "ORDER BY DATA_TYPE");
  ASSERT_EQ(types.size(), 8u);
  EXPECT_EQ(types[0][0], "bigint");
  EXPECT_EQ(types[5][0], "boolean");
  EXPECT_EQ(types[7][0], "timestamp");
  EXPECT_EQ(Rows("SELECT  CAST(NULL AS varchar) TABLE_CAT,  CAST(NULL AS varchar) TABLE_SCHEM, "
                 " CAST(NULL AS varchar) TABLE_NAME,  CAST(NULL AS varchar) COLUMN_NAME,  "
                 "CAST(NULL AS smallint) KEY_SEQ,  CAST(NULL AS varchar) PK_NAME WHERE false"),
            Json::array());
  for (const char* empty : {
           "SELECT PROCEDURE_CAT, PROCEDURE_SCHEM, PROCEDURE_NAME,\n  REMARKS, PROCEDURE_TYPE, "
           "SPECIFIC_NAME\nFROM system.jdbc.procedures\nORDER BY PROCEDURE_CAT, "
           "PROCEDURE_SCHEM, PROCEDURE_NAME, SPECIFIC_NAME LIMIT 0",
           "SELECT TYPE_CAT, TYPE_SCHEM, TYPE_NAME,\n  CLASS_NAME, DATA_TYPE, REMARKS, BASE_TYPE\n"
           "FROM system.jdbc.udts\nORDER BY DATA_TYPE, TYPE_CAT, TYPE_SCHEM, TYPE_NAME LIMIT 0",
           "SELECT TABLE_CAT, TABLE_SCHEM, TABLE_NAME, SUPERTABLE_NAME\n"
           "FROM system.jdbc.super_tables\nORDER BY TABLE_CAT, TABLE_SCHEM, TABLE_NAME LIMIT 0",
       }) {
    EXPECT_EQ(Rows(empty), Json::array()) << empty;
  }
}

// The statements trino-python-client's SQLAlchemy dialect sends (its :schema and :table
// parameters written in as literals).
TEST_F(TrinoMetadataTest, SqlAlchemyDialectQueries) {
  EXPECT_EQ(Rows("SELECT \"schema_name\"\nFROM \"information_schema\".\"schemata\""),
            Json::parse(R"js([["information_schema"],["main"]])js"));
  EXPECT_EQ(Rows("SELECT \"table_name\"\nFROM \"information_schema\".\"tables\"\n"
                 "WHERE \"table_schema\" = 'main'"),
            Json::parse(R"js([["events"],["v_events"]])js"));
  EXPECT_EQ(Rows("SELECT \"table_name\"\nFROM \"information_schema\".\"tables\"\n"
                 "WHERE \"table_schema\" = 'main'\n  AND \"table_name\" = 'events'"),
            Json::parse(R"js([["events"]])js"));
  EXPECT_EQ(Rows("SELECT\n    \"column_name\",\n    \"data_type\",\n    \"column_default\",\n"
                 "    UPPER(\"is_nullable\") AS \"is_nullable\"\n"
                 "FROM \"information_schema\".\"columns\"\n"
                 "WHERE \"table_schema\" = 'main'\n  AND \"table_name\" = 'v_events'\n"
                 "ORDER BY \"ordinal_position\" ASC"),
            Json::parse(R"js([["id","bigint",null,"YES"],["day","date",null,"YES"]])js"));
  EXPECT_EQ(Rows("SELECT \"table_name\"\nFROM \"information_schema\".\"views\"\n"
                 "WHERE \"table_schema\" = 'main'"),
            Json::parse(R"js([["v_events"]])js"));
  EXPECT_EQ(Rows("SELECT \"view_definition\"\nFROM \"information_schema\".\"views\"\n"
                 "WHERE \"table_schema\" = 'main'\n  AND \"table_name\" = 'v_events'"),
            Json::parse(R"js([["SELECT id, day FROM events WHERE ok"]])js"));
  EXPECT_EQ(Rows("SELECT \"comment\"\nFROM \"system\".\"metadata\".\"table_comments\"\n"
                 "WHERE \"schema_name\" = 'main'\nAND \"table_name\" = 'events'"),
            Json::parse("[[null]]"));
  EXPECT_EQ(Rows("SELECT * FROM system.metadata.catalogs ORDER BY 1"),
            Json::parse(R"js([["sqlite","sqlite","sqlite"],["system","system","system"]])js"));
}

// An empty answer has Trino's column types too: the views' columns are expressions, which
// SQLite gives no declared type, and a client types a column from the first page's columns.
TEST_F(TrinoMetadataTest, EmptyAnswersAreTyped) {
  EXPECT_EQ(Columns("SELECT * FROM information_schema.tables WHERE table_name = 'nope'"),
            (std::vector<std::string>{"table_catalog varchar", "table_schema varchar",
                                      "table_name varchar", "table_type varchar",
                                      "table_comment varchar"}));
  EXPECT_EQ(Columns("SELECT table_name, ordinal_position AS pos FROM information_schema.columns "
                    "WHERE table_name = 'nope' ORDER BY 2"),
            (std::vector<std::string>{"table_name varchar", "pos bigint"}));
  const std::vector<std::string> jdbc_columns =
      Columns("SELECT * FROM system.jdbc.columns WHERE TABLE_NAME LIKE 'nope%' ESCAPE '\\' "
              "ORDER BY TABLE_CAT, TABLE_SCHEM, TABLE_NAME, ORDINAL_POSITION");
  ASSERT_EQ(jdbc_columns.size(), 24u);
  EXPECT_EQ(jdbc_columns[4], "DATA_TYPE bigint");
  EXPECT_EQ(jdbc_columns[5], "TYPE_NAME varchar");
  EXPECT_EQ(jdbc_columns[16], "ORDINAL_POSITION bigint");
  EXPECT_EQ(Columns("SELECT * FROM system.jdbc.procedures"),
            (std::vector<std::string>{"PROCEDURE_CAT varchar", "PROCEDURE_SCHEM varchar",
                                      "PROCEDURE_NAME varchar", "REMARKS varchar",
                                      "PROCEDURE_TYPE bigint", "SPECIFIC_NAME varchar"}));
  // Trino's system.jdbc.types has four boolean columns.
  const std::vector<std::string> types = Columns("SELECT * FROM system.jdbc.types");
  ASSERT_EQ(types.size(), 18u);
  EXPECT_EQ(types[7], "CASE_SENSITIVE boolean");
  EXPECT_EQ(types[11], "AUTO_INCREMENT boolean");
  EXPECT_EQ(Rows("SELECT TYPE_NAME, CASE_SENSITIVE FROM system.jdbc.types "
                 "WHERE TYPE_NAME IN ('bigint', 'varchar') ORDER BY 1"),
            Json::parse(R"js([["bigint",false],["varchar",true]])js"));
  // The listings and DESCRIBE agree with the answers.
  EXPECT_EQ(Rows("SELECT TYPE_NAME FROM system.jdbc.columns WHERE TABLE_SCHEM = 'jdbc' "
                 "AND TABLE_NAME = 'types' AND COLUMN_NAME IN ('DATA_TYPE', 'CASE_SENSITIVE', "
                 "'TYPE_NAME') ORDER BY ORDINAL_POSITION"),
            Json::parse(R"js([["varchar"],["bigint"],["boolean"]])js"));
  EXPECT_EQ(Rows("SELECT data_type FROM information_schema.columns WHERE table_schema = "
                 "'information_schema' AND table_name = 'columns' AND column_name IN "
                 "('table_name', 'ordinal_position') ORDER BY ordinal_position"),
            Json::parse(R"js([["varchar"],["bigint"]])js"));
  EXPECT_EQ(Rows("DESCRIBE system.jdbc.procedures")[4],
            Json::parse(R"js(["PROCEDURE_TYPE","bigint","",""])js"));
  EXPECT_EQ(Columns("SHOW TABLES LIKE 'nope'"), std::vector<std::string>{"Table varchar"});
  EXPECT_EQ(Columns("SHOW SCHEMAS LIKE 'nope'"), std::vector<std::string>{"Schema varchar"});
  EXPECT_EQ(Columns("SHOW CATALOGS LIKE 'nope'"), std::vector<std::string>{"Catalog varchar"});
  EXPECT_EQ(Columns("SHOW COLUMNS FROM events LIKE 'nope'"),
            (std::vector<std::string>{"Column varchar", "Type varchar", "Extra varchar",
                                      "Comment varchar"}));
  EXPECT_EQ(Columns("SHOW FUNCTIONS LIKE 'nope'").size(), 6u);
  EXPECT_EQ(Columns("SHOW FUNCTIONS LIKE 'nope'")[0], "Function varchar");
}

TEST_F(TrinoMetadataTest, TwoAndThreePartNamesResolve) {
  for (const char* sql :
       {"SELECT count(*) FROM events", "SELECT count(*) FROM main.events",
        "SELECT count(*) FROM sqlite.main.events",
        "SELECT count(*) FROM \"sqlite\".\"main\".events",
        "SELECT count(*) FROM SQLITE.Main.events e WHERE e.id > 0",
        "SELECT count(*) FROM sqlite . main . events"}) {
    EXPECT_EQ(Rows(sql), Json::parse("[[4]]")) << sql;
  }
  // Literals, quoted names and comments are not names to rewrite.
  EXPECT_EQ(Rows("SELECT 'sqlite.main.events', \"sqlite.main.x\" FROM (SELECT 1 AS "
                 "\"sqlite.main.x\") -- sqlite.main.events"),
            Json::parse(R"js([["sqlite.main.events",1]])js"));
  EXPECT_EQ(Rows("SELECT count(*) FROM sqlite.information_schema.tables WHERE "
                 "table_name = 'events'"),
            Json::parse("[[1]]"));
  // There is one catalog: another one's three-part name is CATALOG_NOT_FOUND.
  EXPECT_EQ(Fails("SELECT * FROM hive.main.events").name, "CATALOG_NOT_FOUND");
  EXPECT_EQ(Fails("SELECT * FROM system.jdbc.nope").name, "TABLE_NOT_FOUND");
}

TEST_F(TrinoMetadataTest, DeclaredTypesAreTrinoTypes) {
  EXPECT_EQ(Columns("SELECT * FROM events"),
            (std::vector<std::string>{"id bigint", "day date", "at timestamp(3)",
                                      "amount decimal(10,2)", "name varchar(20)", "ok boolean"}));
  EXPECT_EQ(Rows("SELECT * FROM events ORDER BY id"), Json::parse(R"js([
      [1,"2024-02-29","2024-02-29 13:45:06.123","12.50","a",true],
      [2,"2024-03-01","2024-03-01 08:09:00.000","-0.50","b",false],
      [3,"1970-01-02","1970-01-01 00:00:01.500","7.00",null,null],
      [4,null,null,null,"d",true]])js"));
  QueryOutcome out = Run("SELECT amount FROM events");
  ASSERT_EQ(out.columns.size(), 1u);
  EXPECT_EQ(out.columns[0].type_signature_json,
            "{\"rawType\":\"decimal\",\"arguments\":[{\"kind\":\"LONG\",\"value\":10},"
            "{\"kind\":\"LONG\",\"value\":2}]}");
  // The stored value stays reachable.
  EXPECT_EQ(Rows("SELECT CAST(day AS TEXT) FROM events WHERE id = 4"),
            Json::parse(R"js([["not a date"]])js"));
}

TEST_F(TrinoMetadataTest, ExplainAnswersInTrinosShape) {
  EXPECT_EQ(Columns("EXPLAIN SELECT * FROM events ORDER BY name"),
            std::vector<std::string>{"Query Plan varchar"});
  const Json plan = Rows("EXPLAIN SELECT * FROM sqlite.main.events ORDER BY name");
  ASSERT_EQ(plan.size(), 1u);
  const std::string text = plan[0][0];
  EXPECT_NE(text.find("- SCAN main.events"), std::string::npos) << text;
  EXPECT_NE(text.find("ORDER BY"), std::string::npos) << text;
  EXPECT_EQ(Rows("EXPLAIN (TYPE LOGICAL, FORMAT TEXT) SELECT 1").size(), 1u);
  EXPECT_EQ(Columns("EXPLAIN (TYPE VALIDATE) SELECT * FROM events"),
            std::vector<std::string>{"Valid boolean"});
  EXPECT_EQ(Rows("EXPLAIN (TYPE VALIDATE) SELECT * FROM events"), Json::parse("[[true]]"));
  EXPECT_EQ(Fails("EXPLAIN (FORMAT JSON) SELECT 1").name, "NOT_SUPPORTED");
  EXPECT_EQ(Fails("EXPLAIN SELECT * FROM missing").name, "TABLE_NOT_FOUND");
  EXPECT_EQ(Fails("EXPLAIN DELETE FROM events").name, "PERMISSION_DENIED");
  // SQLite's own EXPLAIN QUERY PLAN is unchanged.
  EXPECT_EQ(Columns("EXPLAIN QUERY PLAN SELECT * FROM events").size(), 4u);
  // An EXPLAIN of an EXPLAIN is refused: each level prepared the next, so 20,000 of them
  // (160 KB) overflowed the executor's stack and crashed the daemon.
  EXPECT_EQ(Fails("EXPLAIN EXPLAIN SELECT 1").name, "NOT_SUPPORTED");
  EXPECT_EQ(Fails("EXPLAIN (TYPE VALIDATE) explain (type validate) SELECT 1").name,
            "NOT_SUPPORTED");
  std::string nested;
  for (int i = 0; i < 20000; ++i) nested += "EXPLAIN ";
  EXPECT_EQ(Fails(nested + "SELECT 1").name, "NOT_SUPPORTED");
}

TEST_F(TrinoMetadataTest, MetadataViewsCannotBeChanged) {
  for (const char* sql : {"DROP VIEW temp.\"information_schema.tables\"",
                          "DELETE FROM temp.qr_valid", "INSERT INTO temp.qr_valid VALUES (0)",
                          "CREATE TEMP VIEW x AS SELECT 1",
                          "CREATE TEMP TABLE t2 (a)", "DROP TABLE temp.qr_valid"}) {
    EXPECT_EQ(Fails(sql).name, "PERMISSION_DENIED") << sql;
  }
  EXPECT_EQ(Rows("EXPLAIN (TYPE VALIDATE) SELECT 1"), Json::parse("[[true]]"));
}

TEST_F(TrinoMetadataTest, CatalogNameIsConfigurable) {
  SqliteEngine::Options options;
  options.database_path = path_;
  options.num_threads = 1;
  options.catalog_name = "warehouse";
  std::unique_ptr<SqliteEngine> engine;
  ASSERT_TRUE(SqliteEngine::Create(options, &engine).ok());
  QueryOutcome out = qr::testing::Run(&mgr_, engine.get(), "SHOW CATALOGS");
  EXPECT_EQ(Json::parse(out.RowsJson()), Json::parse(R"js([["system"],["warehouse"]])js"));
  out = qr::testing::Run(&mgr_, engine.get(), "SELECT count(*) FROM warehouse.main.events");
  EXPECT_EQ(Json::parse(out.RowsJson()), Json::parse("[[4]]"));
  for (const char* bad : {"System", "system", "", "9lives", "a-b"}) {
    options.catalog_name = bad;
    EXPECT_FALSE(SqliteEngine::Create(options, &engine).ok()) << bad;
  }
}

}  // namespace
}  // namespace qr
