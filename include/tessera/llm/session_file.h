#pragma once
// Saved sessions: one sequence's tokens and KV cache written to a file (or bytes) and read back into
// a Session of the same model, so that a prompt is not evaluated again (`tessera run --prompt-cache`).
//
// The format is Tessera's own (little-endian; src/llm/session_file.cpp describes every field): a
// magic, a format version, the file's total size, the model's identity (architecture, every
// hyperparameter, every weight's name, type and shape, the GGUF file's size and a digest of its
// header), the KV type, the layer count and row widths, the tokens, each layer's K rows and V
// channels of the sequence's cells in position order, and a 64-bit checksum over everything before
// it. Reading checks all of it before the cache changes, so a file of another model, another KV
// type, another format version, a truncated or corrupted file, or one with more tokens than the
// cache has room for is a tessera::Error naming the file and the reason, and the cache is as it was.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/llm/batch.h"
#include "tessera/llm/session.h"

namespace tessera::llm {

inline constexpr uint32_t kSessionFileVersion = 2;  // 2: Model::hyperparameters() in the identity

// Writes sequence `seq`'s state: `tokens` (the tokens it holds at positions 0..n-1, n =
// tokens.size(), which must equal the number of cells the cache holds for seq) and the K/V of those
// cells, every layer. The sequence must hold exactly positions 0..n-1, none of them shifted since
// its K was roped (KvCache::seq_shift before the next decode), else Error(InvalidArgument). The file
// is written to `path`.tmp, synced and renamed, so an interrupted save never leaves a partial file
// under `path`. K/V are read through the cache tensors' buffers (host or device memory alike).
void save_sequence_state(const Session& session, SeqId seq, std::span<const Token> tokens,
                         const std::string& path);

// Reads a file written by save_sequence_state into sequence `seq` (its cells are cleared first; it
// then holds positions 0..n-1) and returns the tokens. Every check comes first: on any Error
// (Io: unreadable; CorruptFile: not a session file, truncated, corrupted; Unsupported: another
// format version; InvalidArgument: another model, another KV type, too few free cells) the cache is
// unchanged. Only a device failure while the K/V are written leaves the sequence empty.
std::vector<Token> load_sequence_state(Session& session, SeqId seq, const std::string& path);

// The same in memory: the bytes a file would hold, and reading them (`source` names them in errors).
std::vector<std::byte> save_sequence_state_bytes(const Session& session, SeqId seq,
                                                 std::span<const Token> tokens);
std::vector<Token> load_sequence_state_bytes(Session& session, SeqId seq, std::span<const std::byte> bytes,
                                             const std::string& source = "<memory>");

}  // namespace tessera::llm
