#pragma once
// llama-imatrix's files as they are stored (the formats are described in tessera/llm/imatrix.h),
// read in one place for the two readers: the quantizer's means (read_imatrix) and the sums that
// `tessera imatrix --in-file` combines (read_imatrix_sums).
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::llm {

struct ImatrixFileEntry {
  std::string name;
  int64_t ne0 = 0;             // values per matrix
  std::vector<float> in_sum2;  // GGUF: sums of squares; legacy: means times ncall
  std::vector<float> in_sum;   // GGUF: sums (empty when the file has none); legacy: empty
  std::vector<float> counts;   // GGUF: rows per matrix; legacy: {ncall}
};

struct ImatrixFile {
  bool legacy = false;
  std::vector<ImatrixFileEntry> entries;  // sorted by name
  std::vector<std::string> datasets;
  int64_t chunk_count = 0;  // as the file states it (legacy: its last chunk, 0 when absent)
};

// Error(Io) when the file cannot be read; Error(CorruptFile) naming what is wrong: not an
// importance matrix, truncated, a sum without its counts, other shapes or types.
ImatrixFile read_imatrix_file(const std::string& path);

}  // namespace tessera::llm
