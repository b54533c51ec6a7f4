// The JSON string encoding of result values (runtime/json-encoding.h) on text of several
// sizes: AppendJsonString, which every text value of every row goes through, and
// JsonStringSize, the exact size that the memory check before a row counts for a text value
// of 1 KiB or more (row-encoder.h, EncodedSizeBound). Plain ASCII (letters, digits, spaces,
// punctuation), the common case, and text with a quote every 64 bytes.
//
// Run: build/release/be/src/benchmarks/json-encoding-benchmark --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true

#include <string>

#include <benchmark/benchmark.h>

#include "runtime/json-encoding.h"

namespace qr {
namespace {

/// 'n' bytes of plain ASCII text; with 'quotes', a '"' every 64 bytes.
std::string Text(size_t n, bool quotes) {
  static constexpr char kChars[] = "abcdefghij klmnop, qrstuvwxyz.0123456789";
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    text.push_back(quotes && i % 64 == 63 ? '"' : kChars[i % (sizeof(kChars) - 1)]);
  }
  return text;
}

void BM_AppendJsonString(benchmark::State& state) {
  const std::string text = Text(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendJsonString(text, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_AppendJsonString)
    ->ArgNames({"bytes", "quotes"})
    ->ArgsProduct({{64, 1024, 65536}, {0, 1}});

void BM_JsonStringSize(benchmark::State& state) {
  const std::string text = Text(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) {
    size_t size = JsonStringSize(text);
    benchmark::DoNotOptimize(size);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_JsonStringSize)
    ->ArgNames({"bytes", "quotes"})
    ->ArgsProduct({{64, 1024, 65536}, {0, 1}});

}  // namespace
}  // namespace qr

BENCHMARK_MAIN();
