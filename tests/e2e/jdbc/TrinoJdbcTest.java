// The Trino JDBC driver (io.trino:trino-jdbc, pinned by scripts/fetch-trino-jar.sh) against a
// running coordinatord: DatabaseMetaData (catalogs, schemas, tables, columns, type info), a
// PreparedStatement with a parameter of each type in both of the driver's prepare modes, and
// the ResultSet types of DATE, TIMESTAMP and DECIMAL columns. Run by run-trino-jdbc-test.sh:
//   java -cp trino-jdbc.jar TrinoJdbcTest.java PORT
// Prints "ok: ..." per check; exits 1 at the first failed check, with what was expected.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Properties;

public class TrinoJdbcTest {
  private static String port;

  static void fail(String what) {
    System.out.println("FAIL: " + what);
    System.exit(1);
  }

  static void expect(String what, Object expected, Object got) {
    if (!Objects.equals(expected, got)) {
      fail(what + ": expected <" + expected + "> got <" + got + ">");
    }
  }

  static Connection connect(boolean explicitPrepare) throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", "e2e-jdbc");
    p.setProperty("explicitPrepare", Boolean.toString(explicitPrepare));
    return DriverManager.getConnection("jdbc:trino://127.0.0.1:" + port + "/sqlite/main", p);
  }

  /** The values of one column of every row of 'rs', as strings; closes 'rs'. */
  static List<String> column(ResultSet rs, String name) throws SQLException {
    List<String> values = new ArrayList<>();
    try (rs) {
      while (rs.next()) values.add(rs.getString(name));
    }
    return values;
  }

  static void metadata(Connection c) throws SQLException {
    DatabaseMetaData md = c.getMetaData();
    expect("getCatalogs", List.of("sqlite", "system"), column(md.getCatalogs(), "TABLE_CAT"));
    List<String> schemas = column(md.getSchemas("sqlite", null), "TABLE_SCHEM");
    if (!schemas.contains("main") || !schemas.contains("information_schema")) {
      fail("getSchemas(sqlite): no main or information_schema in " + schemas);
    }
    System.out.println("ok: getSchemas " + schemas);
    expect("getTables(sqlite, main, %, TABLE)",
        List.of("customer", "lineitem", "nation", "orders", "qr_sample_metadata", "region",
            "typed"),
        column(md.getTables("sqlite", "main", "%", new String[] {"TABLE"}), "TABLE_NAME"));
    System.out.println("ok: getTables");
    try (ResultSet rs = md.getColumns("sqlite", "main", "typed", null)) {
      List<String> got = new ArrayList<>();
      while (rs.next()) {
        got.add(rs.getString("COLUMN_NAME") + " " + rs.getInt("DATA_TYPE") + " "
            + rs.getString("TYPE_NAME") + " " + rs.getInt("ORDINAL_POSITION"));
      }
      expect("getColumns(typed)",
          List.of("id " + Types.BIGINT + " bigint 1", "d " + Types.DATE + " date 2",
              "ts " + Types.TIMESTAMP + " timestamp(3) 3",
              "amount " + Types.DECIMAL + " decimal(12,2) 4",
              "name " + Types.VARCHAR + " varchar(20) 5", "flag " + Types.BOOLEAN + " boolean 6"),
          got);
    }
    System.out.println("ok: getColumns");
    List<String> types = column(md.getTypeInfo(), "TYPE_NAME");
    for (String t : List.of("bigint", "double", "varchar", "date", "decimal", "boolean")) {
      if (!types.contains(t)) fail("getTypeInfo: no " + t + " in " + types);
    }
    System.out.println("ok: getTypeInfo " + types.size() + " types");
  }

  /** Binds one parameter of each type and reads each back through SELECT. */
  static void parameters(Connection c, String mode) throws SQLException {
    String sql = "SELECT ?, ?, ?, ?, ?, ?, ?, ?, hex(?), ?, count(*) FROM orders "
        + "WHERE o_orderdate < ?";
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setLong(1, -7L);
      ps.setInt(2, 42);
      ps.setDouble(3, 2.5);
      ps.setString(4, "naïve ' quote");
      ps.setBoolean(5, true);
      ps.setDate(6, Date.valueOf("2024-01-02"));
      ps.setTimestamp(7, Timestamp.valueOf("2024-01-02 03:04:05.123"));
      ps.setBigDecimal(8, new BigDecimal("1.25"));
      ps.setBytes(9, new byte[] {0, (byte) 0xff});
      ps.setNull(10, Types.VARCHAR);
      ps.setDate(11, Date.valueOf("1995-01-01"));
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) fail(mode + ": no row");
        expect(mode + " bigint", -7L, rs.getLong(1));
        expect(mode + " integer", 42, rs.getInt(2));
        expect(mode + " double", 2.5, rs.getDouble(3));
        expect(mode + " varchar", "naïve ' quote", rs.getString(4));
        // SQLite has no boolean storage class: an expression column of a boolean parameter
        // is a bigint 1 or 0 (a column declared BOOLEAN is boolean: resultTypes()).
        expect(mode + " boolean", 1L, rs.getLong(5));
        expect(mode + " date", "2024-01-02", rs.getString(6));
        expect(mode + " timestamp", "2024-01-02 03:04:05.123", rs.getString(7));
        expect(mode + " decimal", 1.25, rs.getDouble(8));
        expect(mode + " varbinary", "00FF", rs.getString(9));
        rs.getString(10);
        expect(mode + " null", true, rs.wasNull());
        if (rs.getLong(11) <= 0) fail(mode + ": no order before 1995-01-01");
      }
    }
    System.out.println("ok: PreparedStatement with every type, " + mode);
  }

  static void resultTypes(Connection c) throws SQLException {
    try (Statement s = c.createStatement();
         ResultSet rs = s.executeQuery("SELECT d, ts, amount, name, flag FROM typed ORDER BY id")) {
      ResultSetMetaData md = rs.getMetaData();
      expect("DATE column type", Types.DATE, md.getColumnType(1));
      expect("TIMESTAMP column type", Types.TIMESTAMP, md.getColumnType(2));
      expect("DECIMAL column type", Types.DECIMAL, md.getColumnType(3));
      expect("DECIMAL precision", 12, md.getPrecision(3));
      expect("DECIMAL scale", 2, md.getScale(3));
      expect("VARCHAR column type", Types.VARCHAR, md.getColumnType(4));
      expect("BOOLEAN column type", Types.BOOLEAN, md.getColumnType(5));
      if (!rs.next()) fail("typed: no first row");
      expect("getDate", Date.valueOf("2024-01-02"), rs.getDate(1));
      expect("getTimestamp", Timestamp.valueOf("2024-01-02 03:04:05.123"), rs.getTimestamp(2));
      expect("getBigDecimal", new BigDecimal("12.50"), rs.getBigDecimal(3));
      expect("getObject(decimal) class", BigDecimal.class, rs.getObject(3).getClass());
      expect("getString", "first", rs.getString(4));
      expect("getBoolean", true, rs.getBoolean(5));
      if (!rs.next()) fail("typed: no second row");
      expect("getBigDecimal rounded to the scale", new BigDecimal("-0.01"), rs.getBigDecimal(3));
      rs.getDate(1);
      expect("a NULL date", true, rs.wasNull());
      if (rs.next()) fail("typed: more than two rows");
    }
    System.out.println("ok: ResultSet types of DATE, TIMESTAMP, DECIMAL, VARCHAR, BOOLEAN");
  }

  static void error(Connection c) {
    try (Statement s = c.createStatement()) {
      s.executeQuery("SELECT * FROM missing");
      fail("SELECT from a missing table succeeded");
    } catch (SQLException e) {
      if (!e.getMessage().contains("missing")) fail("missing table: " + e.getMessage());
      System.out.println("ok: a failing query raises SQLException: " + e.getMessage());
    }
  }

  public static void main(String[] args) throws Exception {
    port = args[0];
    try (Connection c = connect(true)) {
      metadata(c);
      parameters(c, "explicitPrepare=true");
      resultTypes(c);
      error(c);
    }
    try (Connection c = connect(false)) {
      parameters(c, "explicitPrepare=false");
    }
    System.out.println("PASS");
  }
}
