// Whole-file reads and atomic writes (core/file_io.h).
#include "core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/check.h"

namespace tessera::file_io {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

ReadableFile open_for_reading(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the type check
  // below then refuses it. It has no effect on regular files.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) raise(ErrorCode::Io, "cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) raise(ErrorCode::Io, "cannot read {}: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) raise(ErrorCode::Io, "cannot read {}: not a regular file", path);
  return ReadableFile{std::move(fd), static_cast<size_t>(st.st_size)};
}

size_t read_at_start(const ReadableFile& file, void* dst, size_t n, const std::string& path) {
  return read_at(file.fd, 0, dst, n, path);
}

size_t read_at(const Fd& fd, size_t offset, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(fd.get(), static_cast<char*>(dst) + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      raise(ErrorCode::Io, "cannot read {} at byte {}: {}", path, offset + done, std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

std::string temporary_name(const std::string& path) { return fmt::format("{}.tmp.{}", path, ::getpid()); }

void write_atomically(const std::string& path, FunctionRef<void(ByteWriter write)> emit) {
  const std::string tmp = temporary_name(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) raise(ErrorCode::Io, "cannot create {}: {}", tmp, std::strerror(errno));
  try {
    emit([&](const void* bytes, size_t n) {
      if (n > 0 && std::fwrite(bytes, 1, n, f) != n)
        raise(ErrorCode::Io, "cannot write {}: {}", tmp, std::strerror(errno));
    });
    if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
      raise(ErrorCode::Io, "cannot write {}: {}", tmp, std::strerror(errno));
    const int rc = std::fclose(f);
    f = nullptr;
    if (rc != 0) raise(ErrorCode::Io, "cannot write {}: {}", tmp, std::strerror(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      raise(ErrorCode::Io, "cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
  } catch (...) {
    if (f != nullptr) std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace tessera::file_io
