// A read-only memory mapping of a whole file (RAII). Move-only; the mapping lives until the
// object is destroyed. Any thread may read the bytes concurrently.
//
// Caveat: if another process truncates the file while it is mapped, touching the lost pages
// raises SIGBUS. Model files are treated as immutable while an engine uses them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "atlas/common/status.h"

namespace atlas::bubbletea {

class MappedFile {
  public:
    // Maps `path` with PROT_READ/MAP_PRIVATE. An empty file yields an empty span (no mapping).
    static Result<MappedFile> open(const std::filesystem::path& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

  private:
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

// Reads a small text file (config.json, an index) whole; fails if it exceeds `max_bytes`.
Result<std::string> readSmallFile(const std::filesystem::path& path, size_t max_bytes);

}  // namespace atlas::bubbletea
