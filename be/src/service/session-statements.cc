#include "service/session-statements.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>

#include <array>
#include <cctype>
#include <chrono>

#include "runtime/sqlite-connection.h"
#include "service/client-request-state.h"
#include "service/session-properties.h"
#include "service/statement-service.h"

namespace qr {
namespace {

/// What a session statement runs once planned: one row, like Trino's "result" of a
/// data-definition statement.
const std::shared_ptr<const std::string>& DoneSql() {
  static const auto* sql = new std::shared_ptr<const std::string>(
      std::make_shared<const std::string>("SELECT true AS result"));
  return *sql;
}

/// Schemas USE accepts: SQLite's one database, and the metadata schema.
constexpr std::array<const char*, 2> kSchemas = {"main", "information_schema"};

/// Percent-encodes all but unreserved characters, as the clients' decoders (URL decoding,
/// '+' or %20 for a space) expect in X-Trino-Added-Prepare and X-Trino-Set-Session.
std::string PercentEncode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

/// A cursor over the words of a statement; blanks and comments between them are skipped.
class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s), pos_(SkipBlankSql(s, 0)) {}

  /// Consumes 'keyword' (upper-case) if the next word is it, in any case.
  bool Keyword(std::string_view keyword) {
    size_t end = pos_;
    while (end < s_.size() && IsWordChar(s_[end])) ++end;
    if (end - pos_ != keyword.size()) return false;
    for (size_t i = 0; i < keyword.size(); ++i) {
      if (absl::ascii_toupper(s_[pos_ + i]) != keyword[i]) return false;
    }
    pos_ = SkipBlankSql(s_, end);
    return true;
  }

  /// Consumes an identifier: unquoted (lower-cased, as Trino folds it) or "quoted" ("" for a
  /// quote inside).
  bool Identifier(std::string* out) {
    out->clear();
    size_t p = pos_;
    if (p < s_.size() && s_[p] == '"') {
      for (++p; p < s_.size(); ++p) {
        if (s_[p] != '"') {
          out->push_back(s_[p]);
        } else if (p + 1 < s_.size() && s_[p + 1] == '"') {
          out->push_back('"');
          ++p;
        } else {
          pos_ = SkipBlankSql(s_, p + 1);
          return !out->empty();
        }
      }
      return false;
    }
    if (p >= s_.size() || !(std::isalpha(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) {
      return false;
    }
    while (p < s_.size() && IsWordChar(s_[p])) out->push_back(absl::ascii_tolower(s_[p++]));
    pos_ = SkipBlankSql(s_, p);
    return true;
  }

  bool Symbol(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    pos_ = SkipBlankSql(s_, pos_ + 1);
    return true;
  }

  bool AtEnd() const { return pos_ >= s_.size(); }

  /// The text from the cursor to the end, without trailing blanks and semicolons.
  std::string_view Rest() const {
    std::string_view rest = s_.substr(pos_);
    while (!rest.empty() &&
           (std::isspace(static_cast<unsigned char>(rest.back())) || rest.back() == ';')) {
      rest.remove_suffix(1);
    }
    return rest;
  }

  /// Consumes a string literal.
  bool String(std::string* out) {
    size_t p = pos_;
    if (!ParseStringLiteral(s_, &p, out)) return false;
    pos_ = SkipBlankSql(s_, p);
    return true;
  }

 private:
  static bool IsWordChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }

  const std::string_view s_;
  size_t pos_;
};

QueryError SyntaxError(std::string_view statement, std::string_view expected) {
  return QueryError::Syntax("Malformed " + std::string(statement) + ": expected " +
                            std::string(expected));
}

/// The SQL of prepared statement 'name' in the session, or null.
const std::string* FindPrepared(const SessionInfo& session, const std::string& name) {
  for (const auto& [n, sql] : session.prepared_statements) {
    if (n == name) return &sql;
  }
  return nullptr;
}

QueryError PreparedNotFound(const std::string& name) {
  return QueryError::NotFound("Prepared statement not found: " + name +
                              " (the client sends its prepared statements in the "
                              "X-Trino-Prepared-Statement header)");
}

/// The size of 's' URL-encoded as clients encode a prepared statement (Java's URLEncoder,
/// Python's quote_plus): letters, digits, ".-*_" and the space ('+') take one byte, others 3.
size_t FormEncodedSize(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    n += std::isalnum(c) || c == '.' || c == '-' || c == '*' || c == '_' || c == ' ' ? 1 : 3;
  }
  return n;
}

void PlanPrepare(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::string name;
  if (!lex->Identifier(&name) || !lex->Keyword("FROM") || lex->AtEnd()) {
    plan->error = SyntaxError("PREPARE", "PREPARE name FROM statement");
    return;
  }
  const std::string_view sql = lex->Rest();
  // The client sends the session's prepared statements with each request from now on: what
  // would make those requests fail fails here instead.
  const std::string* replaced = FindPrepared(session, name);
  const size_t item = FormEncodedSize(name) + 1 + FormEncodedSize(sql) + 1;  // "name=sql,"
  size_t room = session.header_bytes_left;
  if (replaced != nullptr) {  // its item goes: room again (saturating: SIZE_MAX is no limit)
    const size_t freed = FormEncodedSize(name) + 1 + FormEncodedSize(*replaced) + 1;
    room = room > SIZE_MAX - freed ? SIZE_MAX : room + freed;
  }
  if (replaced == nullptr &&
      session.prepared_statements.size() >= session.max_prepared_statements) {
    plan->error = QueryError::GenericUser(
        "PREPARE " + name + ": the session already has " +
        std::to_string(session.prepared_statements.size()) +
        " prepared statements, the most a request may carry (--max_session_properties); "
        "DEALLOCATE PREPARE one first");
    return;
  }
  if (item > room) {
    plan->error = QueryError::GenericUser(
        "PREPARE " + name + ": the statement would not fit in the client's request headers, "
        "which carry every prepared statement of the session: it takes " +
        std::to_string(item) + " bytes URL-encoded and " + std::to_string(room) +
        " are left of --max_header_bytes; use EXECUTE IMMEDIATE, or DEALLOCATE PREPARE "
        "others first");
    return;
  }
  plan->response_headers.emplace_back("X-Trino-Added-Prepare",
                                      PercentEncode(name) + "=" + PercentEncode(sql));
}

/// USING value, ... (or nothing) after EXECUTE.
void PlanUsing(Lexer* lex, StatementPlan* plan) {
  if (lex->AtEnd()) return;
  if (!lex->Keyword("USING")) {
    plan->error = SyntaxError("EXECUTE", "USING and the parameters, or the end");
    return;
  }
  QueryError error;
  if (!ParseParameterList(lex->Rest(), &plan->parameters, &error)) plan->error = std::move(error);
}

void PlanExecute(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::string sql;
  if (lex->Keyword("IMMEDIATE")) {
    if (!lex->String(&sql)) {
      plan->error = SyntaxError("EXECUTE IMMEDIATE", "a string literal: EXECUTE IMMEDIATE "
                                                     "'SELECT ...' [USING value, ...]");
      return;
    }
  } else {
    std::string name;
    if (!lex->Identifier(&name)) {
      plan->error = SyntaxError("EXECUTE", "EXECUTE name [USING value, ...]");
      return;
    }
    const std::string* found = FindPrepared(session, name);
    if (found == nullptr) {
      plan->error = PreparedNotFound(name);
      return;
    }
    sql = *found;
  }
  PlanUsing(lex, plan);
  plan->sql = std::make_shared<const std::string>(std::move(sql));
}

void PlanDeallocate(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::string name;
  if (!lex->Keyword("PREPARE") || !lex->Identifier(&name) || !lex->AtEnd()) {
    plan->error = SyntaxError("DEALLOCATE", "DEALLOCATE PREPARE name");
  } else if (FindPrepared(session, name) == nullptr) {
    plan->error = PreparedNotFound(name);
  } else {
    plan->response_headers.emplace_back("X-Trino-Deallocated-Prepare", PercentEncode(name));
  }
}

/// DESCRIBE INPUT name: one row (Position, Type) per parameter. SQLite learns a parameter's
/// type only from the value bound, so every type is "unknown".
void PlanDescribeInput(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::string name;
  if (!lex->Identifier(&name) || !lex->AtEnd()) {
    plan->error = SyntaxError("DESCRIBE INPUT", "DESCRIBE INPUT name");
    return;
  }
  const std::string* sql = FindPrepared(session, name);
  if (sql == nullptr) {
    plan->error = PreparedNotFound(name);
    return;
  }
  const int n = CountPlaceholders(*sql);
  std::string rows;
  for (int i = 0; i < n; ++i) {
    rows += (i > 0 ? ",(" : "(") + std::to_string(i) + ",'unknown')";
  }
  plan->sql = std::make_shared<const std::string>(
      n == 0 ? "SELECT 0 AS \"Position\", 'unknown' AS \"Type\" WHERE 0"
             : "SELECT column1 AS \"Position\", column2 AS \"Type\" FROM (VALUES " + rows + ")");
}

/// DESCRIBE OUTPUT name: the executor prepares the statement and answers its columns.
void PlanDescribeOutput(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::string name;
  if (!lex->Identifier(&name) || !lex->AtEnd()) {
    plan->error = SyntaxError("DESCRIBE OUTPUT", "DESCRIBE OUTPUT name");
    return;
  }
  const std::string* sql = FindPrepared(session, name);
  if (sql == nullptr) {
    plan->error = PreparedNotFound(name);
    return;
  }
  plan->sql = std::make_shared<const std::string>(*sql);
  plan->describe_output = true;
}

void PlanUse(Lexer* lex, StatementPlan* plan) {
  std::string first, second;
  if (!lex->Identifier(&first) || (lex->Symbol('.') && !lex->Identifier(&second)) ||
      !lex->AtEnd()) {
    plan->error = SyntaxError("USE", "USE schema or USE catalog.schema");
    return;
  }
  for (unsigned char c : first) {
    if (c < 0x20 || c == 0x7f) {
      plan->error = SyntaxError("USE", "a catalog name without control characters");
      return;
    }
  }
  const std::string& schema = second.empty() ? first : second;
  bool known = false;
  for (const char* s : kSchemas) known |= schema == s;
  if (!known) {
    plan->error = QueryError::SchemaNotFound("Schema does not exist: " + schema +
                                             " (there are main and information_schema)");
    return;
  }
  if (!second.empty()) plan->response_headers.emplace_back("X-Trino-Set-Catalog", first);
  plan->response_headers.emplace_back("X-Trino-Set-Schema", schema);
}

/// The session property named at the cursor, or an error in 'plan'.
bool PropertyName(Lexer* lex, const char* statement, StatementPlan* plan, std::string* name) {
  std::string part;
  if (!lex->Identifier(name)) {
    plan->error = SyntaxError(statement, "a session property name");
    return false;
  }
  while (lex->Symbol('.') && lex->Identifier(&part)) *name += "." + part;
  if (!IsKnownSessionProperty(*name)) {
    plan->error = QueryError::InvalidSessionProperty(
        "Session property '" + *name + "' does not exist; the supported properties are " +
        SupportedSessionProperties());
    return false;
  }
  return true;
}

std::optional<QueryError> CheckPropertyValue(const std::string& name, std::string_view value,
                                             int64_t* ms) {
  std::chrono::milliseconds d{0};
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (!ParseDuration(value, &d) || d.count() <= 0) {
    return QueryError::InvalidSessionProperty(
        "Session property '" + name + "' must be a positive duration such as '30s', '500ms', "
        "'10m' or '1h', not '" + std::string(value.substr(0, 60)) + "'");
  }
  *ms = d.count();
  return std::nullopt;
}

void PlanSetSession(Lexer* lex, StatementPlan* plan) {
  std::string name, value;
  if (!PropertyName(lex, "SET SESSION", plan, &name)) return;
  if (!lex->Symbol('=') || !lex->String(&value) || !lex->AtEnd()) {
    plan->error = SyntaxError("SET SESSION", "SET SESSION " + name + " = 'duration'");
    return;
  }
  int64_t ms = 0;
  if ((plan->error = CheckPropertyValue(name, value, &ms))) return;
  plan->response_headers.emplace_back("X-Trino-Set-Session", name + "=" + PercentEncode(value));
}

void PlanResetSession(Lexer* lex, StatementPlan* plan) {
  std::string name;
  if (!PropertyName(lex, "RESET SESSION", plan, &name)) return;
  if (!lex->AtEnd()) {
    plan->error = SyntaxError("RESET SESSION", "RESET SESSION name");
    return;
  }
  plan->response_headers.emplace_back("X-Trino-Clear-Session", name);
}

/// The limit the session's properties ask for, into 'plan'. Properties we do not know are
/// ignored (clients send their own); a known one with a bad value fails the query.
/// SHOW SESSION [LIKE 'pattern' [ESCAPE 'c']], after SHOW SESSION.
void PlanShowSession(Lexer* lex, const SessionInfo& session, StatementPlan* plan) {
  std::optional<std::string> like, escape;
  if (lex->Keyword("LIKE")) {
    like.emplace();
    if (!lex->String(&*like)) {
      plan->error = SyntaxError("SHOW SESSION", "a string literal after LIKE");
      return;
    }
    if (lex->Keyword("ESCAPE") && !lex->String(&escape.emplace())) {
      plan->error = SyntaxError("SHOW SESSION", "a string literal after ESCAPE");
      return;
    }
  }
  if (!lex->AtEnd() && !lex->Rest().empty()) {
    plan->error = SyntaxError("SHOW SESSION", "LIKE 'pattern' [ESCAPE 'c'] or the end");
    return;
  }
  plan->sql = std::make_shared<const std::string>(ShowSessionSql(session, like, escape));
}

void ApplySessionProperties(const SessionInfo& session, StatementPlan* plan) {
  for (const auto& [name, value] : session.properties) {
    if (!IsKnownSessionProperty(name)) continue;
    int64_t ms = 0;
    if ((plan->error = CheckPropertyValue(name, value, &ms))) return;
    if (plan->exec_time_limit_ms == 0 || ms < plan->exec_time_limit_ms) {
      plan->exec_time_limit_ms = ms;
    }
  }
}

}  // namespace

int CountPlaceholders(std::string_view sql) {
  int n = 0;
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      const char close = c == '[' ? ']' : c;
      const size_t end = sql.find(close, i + 1);
      i = end == std::string_view::npos ? sql.size() : end + 1;  // '' re-enters: same count
    } else if (sql.substr(i, 2) == "--" || sql.substr(i, 2) == "/*") {
      i = SkipBlankSql(sql, i);
    } else {
      n += c == '?';
      ++i;
    }
  }
  return n;
}

/// CALL system.runtime.kill_query(query_id => 'id', message => 'text'), with named or
/// positional arguments (the message is optional), as Trino's procedure.
void PlanCall(Lexer* lex, StatementPlan* plan) {
  constexpr const char* kForm =
      "CALL system.runtime.kill_query(query_id => 'id', message => 'text')";
  std::vector<std::string> path(1);
  if (!lex->Identifier(&path.back())) {
    plan->error = SyntaxError("CALL", kForm);
    return;
  }
  while (lex->Symbol('.')) {
    path.emplace_back();
    if (!lex->Identifier(&path.back())) {
      plan->error = SyntaxError("CALL", kForm);
      return;
    }
  }
  const bool kill = (path.size() == 3 && path[0] == "system" && path[1] == "runtime" &&
                     path[2] == "kill_query") ||
                    (path.size() == 2 && path[0] == "runtime" && path[1] == "kill_query");
  if (!kill) {
    plan->error = QueryError::NotSupported(
        "Procedure " + absl::StrJoin(path, ".") +
        " is not supported: the one procedure is system.runtime.kill_query(query_id => 'id', "
        "message => 'text')");
    return;
  }
  std::optional<std::string> id, message;
  if (!lex->Symbol('(')) {
    plan->error = SyntaxError("CALL", kForm);
    return;
  }
  for (int position = 0; !lex->Symbol(')'); ++position) {
    if (position > 0 && !lex->Symbol(',')) {
      plan->error = SyntaxError("CALL", kForm);
      return;
    }
    std::string name, value;
    if (lex->Identifier(&name)) {
      if (!lex->Symbol('=') || !lex->Symbol('>')) {
        plan->error = SyntaxError("CALL", kForm);
        return;
      }
    } else {
      name = position == 0 ? "query_id" : position == 1 ? "message" : "";
    }
    std::optional<std::string>* slot =
        name == "query_id" ? &id : name == "message" ? &message : nullptr;
    if (slot == nullptr || slot->has_value() || !lex->String(&value)) {
      plan->error = SyntaxError("CALL", kForm);
      return;
    }
    *slot = std::move(value);
  }
  if (!lex->AtEnd() || !id) {
    plan->error = SyntaxError("CALL", kForm);
    return;
  }
  plan->kill_query_id = std::move(*id);
  plan->kill_message = message.value_or("");
}

StatementPlan PlanStatement(std::string_view statement, const SessionInfo& session) {
  StatementPlan plan;
  ApplySessionProperties(session, &plan);
  if (plan.error) return plan;
  Lexer lex(statement);
  if (lex.Keyword("PREPARE")) {
    plan.update_type = "PREPARE";
    PlanPrepare(&lex, session, &plan);
  } else if (lex.Keyword("EXECUTE")) {
    PlanExecute(&lex, session, &plan);
    return plan;
  } else if (lex.Keyword("DEALLOCATE")) {
    plan.update_type = "DEALLOCATE";
    PlanDeallocate(&lex, session, &plan);
  } else if (lex.Keyword("DESCRIBE") || lex.Keyword("DESC")) {
    if (lex.Keyword("INPUT")) {
      PlanDescribeInput(&lex, session, &plan);
    } else if (lex.Keyword("OUTPUT")) {
      PlanDescribeOutput(&lex, session, &plan);
    }
    return plan;  // DESCRIBE table is not a session statement
  } else if (lex.Keyword("USE")) {
    plan.update_type = "USE";
    PlanUse(&lex, &plan);
  } else if (lex.Keyword("CALL")) {
    plan.update_type = "CALL";
    PlanCall(&lex, &plan);
  } else if (lex.Keyword("SET")) {
    if (!lex.Keyword("SESSION")) return plan;
    plan.update_type = "SET SESSION";
    PlanSetSession(&lex, &plan);
  } else if (lex.Keyword("RESET")) {
    if (!lex.Keyword("SESSION")) return plan;
    plan.update_type = "RESET SESSION";
    PlanResetSession(&lex, &plan);
  } else if (lex.Keyword("SHOW")) {
    if (lex.Keyword("SESSION")) PlanShowSession(&lex, session, &plan);
    return plan;  // other SHOW statements are answered by the engine (runtime/trino-show)
  } else if ((lex.Keyword("START") && lex.Keyword("TRANSACTION")) || lex.Keyword("COMMIT") ||
             lex.Keyword("ROLLBACK")) {
    plan.error = QueryError::NotSupported(
        "Transactions are not supported (START TRANSACTION, COMMIT, ROLLBACK): every "
        "statement runs alone, in autocommit mode, on its own read-only snapshot of the "
        "database");
    return plan;
  } else {
    return plan;
  }
  if (!plan.error) plan.sql = DoneSql();
  return plan;
}

}  // namespace qr
