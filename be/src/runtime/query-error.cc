#include "runtime/query-error.h"

#include <utility>

namespace qr {

namespace {

QueryError Make(int32_t code, const char* name, ErrorType type, std::string msg) {
  QueryError e;
  e.code = code;
  e.name = name;
  e.type = type;
  e.message = std::move(msg);
  return e;
}

}  // namespace

const char* ErrorTypeName(ErrorType type) {
  switch (type) {
    case ErrorType::kUserError: return "USER_ERROR";
    case ErrorType::kInternalError: return "INTERNAL_ERROR";
    case ErrorType::kInsufficientResources: return "INSUFFICIENT_RESOURCES";
    case ErrorType::kExternal: return "EXTERNAL";
  }
  return "INTERNAL_ERROR";
}

// The codes and names are Trino's (docs/protocol.md, "Errors"); clients match on them.

QueryError QueryError::GenericUser(std::string msg) {
  return Make(0, "GENERIC_USER_ERROR", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::Syntax(std::string msg, int line, int column) {
  QueryError e = Make(1, "SYNTAX_ERROR", ErrorType::kUserError, std::move(msg));
  e.line = line;
  e.column = column;
  return e;
}

QueryError QueryError::Abandoned(std::string msg) {
  return Make(2, "ABANDONED_QUERY", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::UserCanceled() {
  return Make(3, "USER_CANCELED", ErrorType::kUserError, "Query was canceled");
}

QueryError QueryError::PermissionDenied(std::string msg) {
  return Make(4, "PERMISSION_DENIED", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::NotFound(std::string msg) {
  return Make(5, "NOT_FOUND", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::NotSupported(std::string msg) {
  return Make(13, "NOT_SUPPORTED", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::InvalidSessionProperty(std::string msg) {
  return Make(14, "INVALID_SESSION_PROPERTY", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::CatalogNotFound(std::string msg) {
  return Make(44, "CATALOG_NOT_FOUND", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::InvalidLiteral(std::string msg) {
  return Make(59, "INVALID_LITERAL", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::InvalidParameterUsage(std::string msg) {
  return Make(80, "INVALID_PARAMETER_USAGE", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::SchemaNotFound(std::string msg) {
  return Make(45, "SCHEMA_NOT_FOUND", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::TableNotFound(std::string msg) {
  return Make(46, "TABLE_NOT_FOUND", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::ColumnNotFound(std::string msg) {
  return Make(47, "COLUMN_NOT_FOUND", ErrorType::kUserError, std::move(msg));
}

QueryError QueryError::Internal(std::string msg) {
  return Make(65536, "GENERIC_INTERNAL_ERROR", ErrorType::kInternalError, std::move(msg));
}

QueryError QueryError::ShuttingDown(std::string msg) {
  return Make(65545, "SERVER_SHUTTING_DOWN", ErrorType::kInternalError, std::move(msg));
}

QueryError QueryError::RemoteHostGone(std::string msg) {
  return Make(65558, "REMOTE_HOST_GONE", ErrorType::kInternalError, std::move(msg));
}

QueryError QueryError::InsufficientResources(std::string msg) {
  return Make(131072, "GENERIC_INSUFFICIENT_RESOURCES", ErrorType::kInsufficientResources,
              std::move(msg));
}

QueryError QueryError::ExceededGlobalMemoryLimit(std::string msg) {
  return Make(131073, "EXCEEDED_GLOBAL_MEMORY_LIMIT", ErrorType::kInsufficientResources,
              std::move(msg));
}

QueryError QueryError::ExceededSpillLimit(std::string msg) {
  return Make(131078, "EXCEEDED_SPILL_LIMIT", ErrorType::kInsufficientResources,
              std::move(msg));
}

QueryError QueryError::ExceededLocalMemoryLimit(std::string msg) {
  return Make(131079, "EXCEEDED_LOCAL_MEMORY_LIMIT", ErrorType::kInsufficientResources,
              std::move(msg));
}

QueryError QueryError::QueueFull(std::string msg) {
  return Make(131074, "QUERY_QUEUE_FULL", ErrorType::kInsufficientResources, std::move(msg));
}

QueryError QueryError::ExceededTimeLimit(std::string msg) {
  return Make(131075, "EXCEEDED_TIME_LIMIT", ErrorType::kInsufficientResources, std::move(msg));
}

}  // namespace qr
