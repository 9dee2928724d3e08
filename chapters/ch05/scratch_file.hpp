// ch05/scratch_file.hpp: the file a storage lesson reads, written by the example itself into a
// fresh folder and removed with it, and the plain POSIX reads around it.
//   ch05::ScratchFile file(bytes, [](uint32_t* words, int64_t first, int64_t count) {...});
//   ch05::evict_page_cache(fd);               // the next buffered read comes from the disk
//   ch05::read_fully(fd, buffer, bytes, offset);
// The folder is BENCH_STORAGE_DIR when set, else /var/tmp (on the disk on Debian and Ubuntu;
// /tmp may be a tmpfs, which is memory, not storage). A tmpfs or ramfs there, or too little free
// space, is bench::Unsupported with the reason: the case is SKIPPED, never timed on RAM.
#pragma once

#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ch05 {

inline std::runtime_error system_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

inline std::string storage_dir() {
  const char* dir = std::getenv("BENCH_STORAGE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/var/tmp";
}

// Reads exactly `bytes` at `offset` (pread may return less than asked). An O_DIRECT read the
// filesystem refuses (EINVAL: some open O_DIRECT files, then refuse the reads) is Unsupported.
inline void read_fully(int fd, void* buffer, int64_t bytes, int64_t offset) {
  auto* at = static_cast<char*>(buffer);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, at, static_cast<size_t>(bytes), offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & O_DIRECT) != 0)
      throw bench::Unsupported("the filesystem of " + storage_dir() +
                               " refuses O_DIRECT reads: set BENCH_STORAGE_DIR to a local disk");
    if (got < 0) throw system_error("pread");
    if (got == 0) throw std::runtime_error("pread: unexpected end of file");
    at += got;
    offset += got;
    bytes -= got;
  }
}

// Drops the file's clean pages from the page cache, so the next buffered read goes to the disk.
inline void evict_page_cache(int fd) {
  if (::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
    throw std::runtime_error("posix_fadvise(DONTNEED) failed");
}

class ScratchFile {
 public:
  static constexpr int64_t kWriteChunk = int64_t{16} << 20;
  // fill(words, first, count): the file's words [first, first + count).
  using Fill = std::function<void(uint32_t* words, int64_t first, int64_t count)>;

  ScratchFile(int64_t bytes, const Fill& fill) : bytes_(bytes) {
    const std::string dir = storage_dir();
    struct statfs fs {};
    if (::statfs(dir.c_str(), &fs) != 0)
      throw bench::Unsupported("cannot stat " + dir + " (set BENCH_STORAGE_DIR)");
    constexpr long kTmpfs = 0x01021994, kRamfs = 0x858458f6;
    if (fs.f_type == kTmpfs || fs.f_type == kRamfs)
      throw bench::Unsupported(
          dir + " is a tmpfs (memory): set BENCH_STORAGE_DIR to a folder on the disk");
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) == 0 &&
        static_cast<double>(vfs.f_bavail) * vfs.f_frsize < static_cast<double>(bytes) + (1 << 30))
      throw bench::Unsupported("not enough free space in " + dir + " for a " +
                               std::to_string(bytes >> 20) +
                               " MiB file and 1 GiB to spare (set BENCH_STORAGE_DIR)");
    std::string folder = dir + "/cudabench_ch05_XXXXXX";
    if (::mkdtemp(folder.data()) == nullptr) throw system_error("mkdtemp in " + dir);
    folder_ = folder;
    path_ = folder_ + "/data.bin";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw system_error("open " + path_);
    try {
      std::vector<uint32_t> words(kWriteChunk / sizeof(uint32_t));
      for (int64_t at = 0; at < bytes; at += kWriteChunk) {
        const int64_t chunk = std::min(kWriteChunk, bytes - at);
        fill(words.data(), at / int64_t{sizeof(uint32_t)}, chunk / int64_t{sizeof(uint32_t)});
        for (int64_t done = 0; done < chunk;) {
          const ssize_t put =
              ::write(fd, reinterpret_cast<const char*>(words.data()) + done, chunk - done);
          if (put < 0 && errno == EINTR) continue;
          if (put <= 0) throw system_error("write " + path_);
          done += put;
        }
      }
      if (::fsync(fd) != 0) throw system_error("fsync " + path_);  // clean pages can be evicted
      evict_page_cache(fd);
    } catch (...) {
      ::close(fd);
      remove();
      throw;
    }
    ::close(fd);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() { remove(); }

  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }

 private:
  void remove() {
    if (!path_.empty()) ::unlink(path_.c_str());
    if (!folder_.empty()) ::rmdir(folder_.c_str());
  }
  int64_t bytes_;
  std::string folder_, path_;
};

// An open file descriptor, closed when it goes. O_DIRECT refused (some filesystems: overlayfs on
// older kernels, network filesystems) is bench::Unsupported naming the folder.
class FileDescriptor {
 public:
  FileDescriptor(const std::string& path, int flags) : fd_(::open(path.c_str(), flags)) {
    if (fd_ < 0 && (flags & O_DIRECT) != 0 && errno == EINVAL)
      throw bench::Unsupported("the filesystem of " + storage_dir() +
                               " refuses O_DIRECT: set BENCH_STORAGE_DIR to a local disk");
    if (fd_ < 0) throw system_error("open " + path);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { ::close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace ch05
