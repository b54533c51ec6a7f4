#pragma once

#include <cstdint>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/http-framing.h"
#include "http/http-message.h"
#include "http/webserver.h"

/// How the server reads requests (webserver-session.cc), for the HTTP fuzzers' models of it.

namespace qr::fuzz {

/// What reading one request from the front of an input gave.
enum class ServerRead {
  kNoHead,       ///< the head is malformed or incomplete: answered 4xx, or dropped
  kHeadRefused,  ///< the framing checks refused the head: answered, and the connection closed
  kNoBody,       ///< the body is malformed, too large or cut short: answered 4xx, or dropped
  kRequest,      ///< a whole request, in 'parser'
};

/// Reads one request from the front of '*input' as the server does, with its default limits:
/// the head alone (not eager), the server's framing checks on it (CheckRequestHead, with the
/// server's detection of a folded line), which refuse what Beast's parser would take, and only
/// then the body. Removes what the parser consumed from '*input'. Unless the result is
/// kNoHead, parser->get() holds the request line and headers.
inline ServerRead ReadLikeTheServer(std::string_view* input,
                                    boost::beast::http::request_parser<
                                        boost::beast::http::string_body>* parser) {
  namespace http = boost::beast::http;
  const Webserver::Options limits;
  parser->header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser->body_limit(limits.max_body_bytes);
  boost::beast::error_code ec;
  // Puts bytes until 'done' holds; false on a parse error or when the input runs out.
  auto put_until = [&](auto done) {
    while (!done() && !input->empty()) {
      const size_t used = parser->put(boost::asio::buffer(input->data(), input->size()), ec);
      input->remove_prefix(used);
      if (ec == http::error::need_more && used > 0) {
        ec = {};
        continue;
      }
      if (ec) return false;
    }
    return done();
  };
  const std::string_view head = *input;
  if (!put_until([&] { return parser->is_header_done(); })) return ServerRead::kNoHead;
  const std::string_view head_bytes = head.substr(0, head.size() - input->size());
  const bool folded = head_bytes.find("\n ") != std::string_view::npos ||
                      head_bytes.find("\n\t") != std::string_view::npos;
  HttpRequest head_req;
  FramingError framing;
  if (!CheckRequestHead(parser->get().base(), folded, &head_req, &framing)) {
    return ServerRead::kHeadRefused;
  }
  parser->eager(true);
  if (!put_until([&] { return parser->is_done(); })) {
    if (ec) return ServerRead::kNoBody;
    parser->put_eof(ec);  // the input ends: the client shut its side
    if (ec || !parser->is_done()) return ServerRead::kNoBody;
  }
  return ServerRead::kRequest;
}

}  // namespace qr::fuzz
