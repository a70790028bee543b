#pragma once
// Recursive delete that does not use std::filesystem::remove_all: the CUDA torch
// wheel's libtorch.so (2.11) exports its own copy of that libstdc++ symbol, which
// binds first in programs linked against it and crashes (seen on the H200 image).
// nftw does the same job. Missing paths are fine; returns false on other errors.
#include <filesystem>

namespace lf {

bool remove_tree(const std::filesystem::path& path);

}  // namespace lf
