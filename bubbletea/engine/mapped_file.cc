#include "bubbletea/engine/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace atlas::bubbletea {

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::fromErrno("open " + path.string(), errno, Code::kInvalidArgument);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return Status::fromErrno("fstat " + path.string(), err);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return Status{Code::kInvalidArgument, path.string() + ": not a regular file"};
    }
    MappedFile file;
    file.path_ = path.string();
    file.size_ = static_cast<size_t>(st.st_size);
    if (file.size_ > 0) {
        void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            return Status::fromErrno("mmap " + path.string(), err);
        }
        file.data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps its own reference to the file
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) {
            ::munmap(const_cast<std::byte*>(data_), size_);
        }
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
    }
    return *this;
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) {
        ::munmap(const_cast<std::byte*>(data_), size_);
    }
}

Result<std::string> readSmallFile(const std::filesystem::path& path, size_t max_bytes) {
    auto mapped = MappedFile::open(path);
    if (!mapped.isOk()) {
        return mapped.status();
    }
    const auto bytes = mapped->bytes();
    if (bytes.size() > max_bytes) {
        return Status{Code::kInvalidArgument, path.string() + ": " + std::to_string(bytes.size()) +
                                                  " bytes exceeds the limit of " +
                                                  std::to_string(max_bytes)};
    }
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace atlas::bubbletea
