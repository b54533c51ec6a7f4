#pragma once

#include <cstdint>
#include <string>

namespace qr {

/// Trino's error types (docs/protocol.md, "Errors").
enum class ErrorType { kUserError, kInternalError, kInsufficientResources, kExternal };
const char* ErrorTypeName(ErrorType type);  // "USER_ERROR", ...

/// Why a query failed, in the terms of the Trino protocol: a numeric code, its name, its type,
/// a message for the user, and (for syntax errors) a 1-based location inside the statement.
struct QueryError {
  int32_t code = 0;
  std::string name;
  ErrorType type = ErrorType::kUserError;
  std::string message;
  /// 1-based line and column inside the statement text; 0 when unknown.
  int line = 0;
  int column = 0;

  static QueryError GenericUser(std::string msg);                         // 0
  static QueryError Syntax(std::string msg, int line = 0, int column = 0);  // 1
  static QueryError Abandoned(std::string msg);                           // 2
  static QueryError UserCanceled();             // 3, "Query was canceled"
  static QueryError PermissionDenied(std::string msg);                    // 4
  static QueryError NotFound(std::string msg);                            // 5
  static QueryError NotSupported(std::string msg);                        // 13
  static QueryError InvalidSessionProperty(std::string msg);              // 14
  static QueryError CatalogNotFound(std::string msg);                     // 44
  static QueryError SchemaNotFound(std::string msg);                      // 45
  static QueryError TableNotFound(std::string msg);                       // 46
  static QueryError ColumnNotFound(std::string msg);                      // 47
  static QueryError InvalidLiteral(std::string msg);                      // 59
  static QueryError InvalidParameterUsage(std::string msg);               // 80
  static QueryError Internal(std::string msg);                            // 65536
  static QueryError ShuttingDown(std::string msg);                        // 65545
  static QueryError RemoteHostGone(std::string msg);                      // 65558
  static QueryError InsufficientResources(std::string msg);               // 131072
  static QueryError QueueFull(std::string msg);                           // 131074
  static QueryError ExceededTimeLimit(std::string msg);                   // 131075
  static QueryError ExceededGlobalMemoryLimit(std::string msg);           // 131073
  static QueryError ExceededSpillLimit(std::string msg);                  // 131078
  static QueryError ExceededLocalMemoryLimit(std::string msg);            // 131079
};

}  // namespace qr
