#pragma once
// Files read and written whole, in one place: opening only regular files for reading (a FIFO
// would block, a directory reads nothing), reading to the end, and writing a file whole or not at
// all. Every failure is an Error(Io) naming the file and the reason.
#include <cstddef>
#include <string>

#include "core/function_ref.h"

namespace tessera::file_io {

// An open descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd();
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

struct ReadableFile {
  Fd fd;
  size_t size = 0;
};

// Opens `path` for reading, close-on-exec, refusing anything but a regular file.
ReadableFile open_for_reading(const std::string& path);

// Reads n bytes from the file's start into dst (EINTR retried); returns how many there were
// (fewer when the file ended first).
size_t read_at_start(const ReadableFile& file, void* dst, size_t n, const std::string& path);
// Reads n bytes from byte `offset` of an open file into dst, likewise.
size_t read_at(const Fd& fd, size_t offset, void* dst, size_t n, const std::string& path);

// Writes `path` through emit(write): the bytes go to "<path>.tmp.<pid>" (a name of this process's
// own: two programs saving one path each rename a whole file), which is flushed, synced and
// renamed over `path`. On any failure, an exception from emit included, the temporary file is
// removed and `path` is as it was.
using ByteWriter = FunctionRef<void(const void* bytes, size_t n)>;
void write_atomically(const std::string& path, FunctionRef<void(ByteWriter write)> emit);

// The temporary name write_atomically uses for `path` in this process.
std::string temporary_name(const std::string& path);

}  // namespace tessera::file_io
