#pragma once

#include <string>

#include "service/client-request-state.h"
#include "http/webserver.h"

/// Rendering of the Trino protocol's JSON documents (docs/protocol.md). Hand-written writers: the
/// QueryResults document is produced for every poll of every query, so it must not build a DOM.
/// Thread-safety: pure functions.

namespace qr {

/// The parts of a QueryResults answer that depend on the HTTP request.
struct ResultsUris {
  /// "http://host:port", no trailing slash.
  std::string base;
};

/// Fills 'resp' with a QueryResults document for 'req' and 'page'. The rows of the page are
/// not copied: they go out as resp.shared_body between body and body_tail.
void RenderQueryResults(const ClientRequestState& req, const QueryPage& page,
                        const ResultsUris& uris, HttpResponse* resp);

/// The POST /v1/statement answer: state QUEUED, nextUri token 0, no data.
void RenderSubmitted(const ClientRequestState& req, const ResultsUris& uris,
                     HttpResponse* resp);

/// A QueryResults document of state FAILED with 'error' for query 'id' that this coordinator
/// does not hold (its owner in the cluster is gone): id, infoUri, stats, error, no nextUri.
void RenderFailedElsewhere(const UniqueId& id, const QueryError& error, const ResultsUris& uris,
                           HttpResponse* resp);

/// The answer (410, JSON {"queryId","state":"FAILED","error"}) of the endpoints other than a
/// nextUri for query 'id' that failed elsewhere with 'error'.
HttpResponse FailedElsewhereJson(const UniqueId& id, const QueryError& error);

/// The "error" object of a failed query.
void AppendErrorJson(const QueryError& error, std::string* out);

/// The stats object.
void AppendStatsJson(const char* state, const ClientRequestState::Info& info, std::string* out);

/// One element of GET /v1/query: {queryId, state, query, session, ...}. With 'stmt_size', the
/// query text is cut to that many characters and "queryTruncated" says whether it was.
void AppendQueryInfoJson(const ClientRequestState& req, const ResultsUris& uris,
                         std::string* out, size_t stmt_size = SIZE_MAX);

}  // namespace qr
