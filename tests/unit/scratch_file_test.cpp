// Tests chapters/ch05/scratch_file.hpp without a GPU: the file a storage lesson reads holds
// exactly the words asked for, reads back the same through the page cache and with O_DIRECT,
// and goes with its folder; a tmpfs is refused (it is memory, not storage), and so is a read
// past the end.
#include "../../chapters/ch05/scratch_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

uint32_t word(int64_t i) { return static_cast<uint32_t>(i * 2654435761u) ^ 0x5a5a5a5au; }

void fill(uint32_t* words, int64_t first, int64_t count) {
  for (int64_t i = 0; i < count; ++i) words[i] = word(first + i);
}

// Sets BENCH_STORAGE_DIR for one test and puts back what was there.
class StorageDir {
 public:
  explicit StorageDir(const std::string& dir) {
    if (const char* old = std::getenv("BENCH_STORAGE_DIR")) old_ = old, had_ = true;
    setenv("BENCH_STORAGE_DIR", dir.c_str(), 1);
  }
  ~StorageDir() {
    had_ ? setenv("BENCH_STORAGE_DIR", old_.c_str(), 1) : unsetenv("BENCH_STORAGE_DIR");
  }

 private:
  std::string old_;
  bool had_ = false;
};

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// 5 MiB and 3 pages: not a whole number of the 4-page reads below, so the last one is short.
constexpr int64_t kBytes = (int64_t{5} << 20) + 3 * 4096;

TEST(ScratchFile, HoldsTheWordsAndReadsBackThroughThePageCache) {
  std::string path;
  {
    ch05::ScratchFile file(kBytes, fill);
    path = file.path();
    ASSERT_TRUE(exists(path));
    ch05::FileDescriptor fd(path, O_RDONLY);
    std::vector<uint32_t> back(kBytes / 4);
    ch05::evict_page_cache(fd.get());
    ch05::read_fully(fd.get(), back.data(), kBytes, 0);
    for (int64_t i = 0; i < kBytes / 4; ++i) ASSERT_EQ(back[i], word(i)) << "word " << i;
  }
  EXPECT_FALSE(exists(path)) << "the file outlived its ScratchFile";
  EXPECT_FALSE(exists(path.substr(0, path.rfind('/')))) << "the folder outlived its ScratchFile";
}

TEST(ScratchFile, ReadsBackWithODirectInPageAlignedPieces) {
  ch05::ScratchFile file(kBytes, fill);
  std::unique_ptr<ch05::FileDescriptor> fd;
  try {
    fd = std::make_unique<ch05::FileDescriptor>(file.path(), O_RDONLY | O_DIRECT);
  } catch (const bench::Unsupported& why) {
    GTEST_SKIP() << why.what();
  }
  constexpr int64_t kPiece = 4 * 4096;
  void* raw = nullptr;
  ASSERT_EQ(::posix_memalign(&raw, 4096, kPiece), 0);
  std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
  for (int64_t at = 0; at < kBytes; at += kPiece) {
    const int64_t bytes = std::min(kPiece, kBytes - at);
    try {
      ch05::read_fully(fd->get(), buffer.get(), bytes, at);
    } catch (const bench::Unsupported& why) {
      GTEST_SKIP() << why.what();
    }
    const auto* words = static_cast<const uint32_t*>(buffer.get());
    for (int64_t i = 0; i < bytes / 4; ++i)
      ASSERT_EQ(words[i], word(at / 4 + i)) << "word " << at / 4 + i;
  }
}

TEST(ScratchFile, ReadingPastTheEndThrows) {
  ch05::ScratchFile file(8192, fill);
  ch05::FileDescriptor fd(file.path(), O_RDONLY);
  std::vector<char> buffer(8192);
  EXPECT_THROW(ch05::read_fully(fd.get(), buffer.data(), 8192, 4096), std::runtime_error);
}

TEST(ScratchFile, RefusesATmpfs) {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != 0x01021994)
    GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  StorageDir dir("/dev/shm");
  try {
    ch05::ScratchFile file(8192, fill);
    FAIL() << "a file on a tmpfs was accepted as storage";
  } catch (const bench::Unsupported& why) {
    EXPECT_NE(std::string(why.what()).find("tmpfs"), std::string::npos) << why.what();
  }
}

}  // namespace
