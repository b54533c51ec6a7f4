// http-echo-server: the Webserver alone, answering every request with what it parsed, for the
// framing differential test (tests/e2e/framing). Prints "listening on http://127.0.0.1:<port>"
// once it serves, then runs until its standard input closes (or it is killed).
//
// Each answer is 200, text/plain, one line: "<method> <target> <hex of the body>\n", the same
// line the test's Node reference server answers with.

#include <cstdio>
#include <iostream>
#include <string>

#include <boost/beast/http/verb.hpp>

#include "http/webserver.h"

namespace {

namespace http = boost::beast::http;

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

void Echo(qr::HttpRequest& req, qr::ResponseCallback respond) {
  respond(qr::HttpResponse::Text(
      200, req.method_string + " " + req.target + " " + Hex(req.body) + "\n"));
}

}  // namespace

int main() {
  qr::Webserver::Options options;
  options.port = 0;
  options.num_threads = 1;
  options.max_body_bytes = 1 << 16;
  qr::Webserver server(options);
  for (http::verb v : {http::verb::get, http::verb::post, http::verb::put, http::verb::delete_}) {
    server.RegisterHandler(v, "/", Echo);
  }
  qr::Status st = server.Start();
  if (!st.ok()) {
    std::cerr << "http-echo-server: " << st.ToString() << "\n";
    return 1;
  }
  std::cout << "listening on http://127.0.0.1:" << server.port() << std::endl;
  // Until the test closes our standard input: no signal handling needed.
  for (int c; (c = std::getchar()) != EOF;) {
  }
  server.Stop();
  return 0;
}
