#include "http/base64.h"

#include <algorithm>
#include <climits>

#include <openssl/evp.h>

namespace qr {

std::string Base64Encode(std::string_view in) {
  std::string out((in.size() + 2) / 3 * 4, '\0');
  if (in.empty()) return out;
  // EVP_EncodeBlock takes an int length: encode in chunks of a multiple of 3 bytes.
  constexpr size_t kChunk = size_t{3} << 28;
  size_t pos = 0;
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  while (pos < in.size()) {
    const size_t n = std::min(kChunk, in.size() - pos);
    o += EVP_EncodeBlock(o, reinterpret_cast<const unsigned char*>(in.data() + pos),
                         static_cast<int>(n));
    pos += n;
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  if (in.size() % 4 != 0 || in.size() > INT_MAX / 2) return false;
  if (in.empty()) return true;
  size_t pad = 0;
  while (pad < 2 && in[in.size() - 1 - pad] == '=') ++pad;
  out->resize(in.size() / 4 * 3);
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  // EVP_DecodeBlock counts the padding as zero bytes, skips surrounding whitespace and
  // ignores the unused bits of the last character: the canonical encoding of what it
  // decoded must be 'in' itself.
  if (n < 0 || static_cast<size_t>(n) != out->size()) {
    out->clear();
    return false;
  }
  out->resize(out->size() - pad);
  if (Base64Encode(*out) != in) {
    out->clear();
    return false;
  }
  return true;
}

}  // namespace qr
