#include "runtime/sqlite-printf.h"

#include <algorithm>
#include <cstring>

namespace qr {
namespace {

/// One conversion of a format, parsed as sqlite3_str_vappendf() parses it.
struct Conversion {
  size_t begin = 0;   // the '%'
  size_t end = 0;     // one past the conversion character
  char type = 0;      // the conversion character; 0 if the format ended inside it
  bool left = false;  // '-' or a negative '*' width
  int width = 0;
  int precision = -1;
  int first_arg = 0;  // the arguments it takes: [first_arg, end_arg)
  int end_arg = 0;
};

/// Conversions that take exactly one argument in SQLite's SQL-function mode and whose output
/// depends only on it and the spec ('%' takes none). Not: 'n' (takes none, outputs nothing),
/// 'T'/'S' (internal: end the output) and unknown characters (end the output).
bool IsPlainConversion(char type) {
  return type != 0 && std::strchr("dsgzqQwcouxXfeEGipr%", type) != nullptr;
}

int IntArg(int argc, sqlite3_value** argv, int index) {
  // (int) of the 64-bit value, as SQLite's '(int)getIntArg(pArgList)'.
  return index < argc ? static_cast<int>(sqlite3_value_int64(argv[index])) : 0;
}

/// Parses the conversion at f[*i] == '%' (the '%' not last), leaving *i one past it.
Conversion ParseConversion(const char* f, size_t* i, int* next_arg, int argc,
                           sqlite3_value** argv) {
  Conversion conv;
  conv.begin = *i;
  conv.first_arg = *next_arg;
  size_t p = *i + 1;
  char c = f[p];
  bool done = false;
  do {
    switch (c) {
      case '-': conv.left = true; break;
      case '+': case ' ': case '#': case '!': case '0': case ',': break;
      case 'l':
        c = f[++p];
        if (c == 'l') c = f[++p];
        done = true;
        break;
      case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
      case '9': {
        unsigned wx = c - '0';
        while ((c = f[++p]) >= '0' && c <= '9') wx = wx * 10 + (c - '0');
        conv.width = static_cast<int>(wx & 0x7fffffff);
        if (c != '.' && c != 'l') {
          done = true;
        } else {
          --p;
        }
        break;
      }
      case '*': {
        int width = IntArg(argc, argv, (*next_arg)++);
        if (width < 0) {
          conv.left = true;
          width = width >= -2147483647 ? -width : 0;
        }
        conv.width = width;
        if ((c = f[p + 1]) != '.' && c != 'l') {
          c = f[++p];
          done = true;
        }
        break;
      }
      case '.': {
        c = f[++p];
        if (c == '*') {
          int precision = IntArg(argc, argv, (*next_arg)++);
          if (precision < 0) precision = precision >= -2147483647 ? -precision : -1;
          conv.precision = precision;
          c = f[++p];
        } else {
          unsigned px = 0;
          while (c >= '0' && c <= '9') {
            px = px * 10 + (c - '0');
            c = f[++p];
          }
          conv.precision = static_cast<int>(px & 0x7fffffff);
        }
        if (c == 'l') {
          --p;
        } else {
          done = true;
        }
        break;
      }
      default: done = true; break;
    }
  } while (!done && (c = f[++p]) != 0);
  conv.type = c;
  if (IsPlainConversion(c) && c != '%') ++*next_arg;
  conv.end_arg = *next_arg;
  conv.end = c == 0 ? p : p + 1;
  *i = conv.end;
  return conv;
}

/// The %c conversion 'conv' (precision > 1) on argument 'arg', as SQLite renders it.
PrintfPiece RepeatPiece(const Conversion& conv, int argc, sqlite3_value** argv) {
  PrintfPiece piece;
  const int index = conv.end_arg - 1;
  const auto* text = index < argc ? sqlite3_value_text(argv[index]) : nullptr;
  if (text == nullptr) {
    piece.unit.assign(1, '\0');
  } else {
    // The first byte, and the continuation bytes after a lead byte (at most 4 bytes).
    piece.unit.assign(1, static_cast<char>(text[0]));
    if ((text[0] & 0xc0) == 0xc0) {
      for (size_t k = 1; k < 4 && (text[k] & 0xc0) == 0x80; ++k) {
        piece.unit.push_back(static_cast<char>(text[k]));
      }
    }
  }
  const int64_t length = static_cast<int64_t>(piece.unit.size());
  int64_t width = conv.width - (conv.precision - 1);
  if (width > 1 && !conv.left) {
    piece.lead = width - 1;
    width = 0;
  }
  piece.repeat = conv.precision;
  // The last copy goes through the common output path: the width counts characters there.
  if (width > 0) {
    for (char b : piece.unit) width += (static_cast<unsigned char>(b) & 0xc0) == 0x80 ? 1 : 0;
  }
  width -= length;
  if (width > 0) (conv.left ? piece.trail : piece.mid) = width;
  return piece;
}

/// A piece rendered by the built-in.
PrintfPiece FormatPiece(size_t begin, size_t end, int first_arg, int end_arg) {
  PrintfPiece piece;
  piece.format_begin = begin;
  piece.format_end = end;
  piece.first_arg = first_arg;
  piece.end_arg = end_arg;
  return piece;
}

}  // namespace

int64_t MinimumPrintfLength(const char* format, int argc, sqlite3_value** argv) {
  int64_t total = 0;
  size_t i = 0;
  int next_arg = 0;
  while (const char* percent = std::strchr(format + i, '%')) {
    i = percent - format;
    if (format[i + 1] == '\0') break;
    const Conversion conv = ParseConversion(format, &i, &next_arg, argc, argv);
    // SQLite's output ends at an unknown or internal conversion; %n outputs nothing.
    if (conv.type == 'n') continue;
    if (!IsPlainConversion(conv.type)) break;
    int64_t least = conv.width;
    // A precision makes that much output for repeats and integers only (for strings it is
    // a maximum, for floating point the built-in refuses a buffer past the limit at once).
    if (std::strchr("cdiuxXopr", conv.type) != nullptr) {
      least = std::max<int64_t>(least, conv.precision);
    }
    // Each is below 2^31 and a format has fewer than 2^31 conversions: no overflow.
    total += least;
  }
  return total;
}

bool PlanPrintfRepeats(const char* format, int argc, sqlite3_value** argv, int64_t threshold,
                       std::vector<PrintfPiece>* pieces) {
  pieces->clear();
  std::vector<Conversion> repeats;
  size_t i = 0;
  int next_arg = 0;
  while (const char* percent = std::strchr(format + i, '%')) {
    i = percent - format;
    if (format[i + 1] == '\0') break;  // a final '%' is output as it is
    const Conversion conv = ParseConversion(format, &i, &next_arg, argc, argv);
    if (!IsPlainConversion(conv.type)) return false;
    if (conv.type == 'c' && conv.precision > threshold) repeats.push_back(conv);
  }
  if (repeats.empty()) return false;
  const size_t format_length = std::strlen(format);
  size_t begin = 0;
  int arg = 0;
  for (const Conversion& conv : repeats) {
    if (conv.begin > begin) {
      pieces->push_back(FormatPiece(begin, conv.begin, arg, conv.first_arg));
    }
    pieces->push_back(RepeatPiece(conv, argc, argv));
    begin = conv.end;
    arg = conv.end_arg;
  }
  if (format_length > begin) {
    pieces->push_back(FormatPiece(begin, format_length, arg, next_arg));
  }
  return true;
}

bool RenderRepeat(const PrintfPiece& piece, char* out, WorkCheckpoints* checkpoints) {
  std::memset(out, ' ', piece.lead);
  out += piece.lead;
  // repeat - 1 copies, doubling what is already written (in steps of at most
  // kCheckpointBytes), then 'mid' spaces and the last copy.
  const int64_t unit = static_cast<int64_t>(piece.unit.size());
  const int64_t copies = (piece.repeat - 1) * unit;
  if (copies > 0) {
    std::memcpy(out, piece.unit.data(), unit);
    // Every step a whole number of units, so that the copy stays in phase.
    const int64_t step = static_cast<int64_t>(kCheckpointBytes) / unit * unit;
    for (int64_t done = unit; done < copies;) {
      const int64_t n = std::min({done, copies - done, step});
      std::memcpy(out + done, out, n);
      done += n;
      if (checkpoints->Advance(n)) return false;
    }
  }
  out += copies;
  std::memset(out, ' ', piece.mid);
  out += piece.mid;
  std::memcpy(out, piece.unit.data(), unit);
  std::memset(out + unit, ' ', piece.trail);
  return true;
}

}  // namespace qr
