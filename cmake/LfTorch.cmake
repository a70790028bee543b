# libtorch for lf-worker and the model/comm/optim/ckpt components. Only these
# targets see torch; the launcher side never links it.
find_package(Torch REQUIRED)
# Installed binaries (scripts/install_gpu.sh) find libtorch where they were linked against it.
list(APPEND CMAKE_INSTALL_RPATH "${TORCH_INSTALL_PREFIX}/lib")
# Torch's exported flags add -D_GLIBCXX_USE_CXX11_ABI; keep them on torch targets only.
add_library(lf_torch INTERFACE)
target_link_libraries(lf_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(lf_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

# The torch wheel ships its own fmt (v12) headers in its include dir, which would
# shadow the fmt that lf_common and spdlog are built against (Debian's fmt 9) and
# leave undefined fmt::v12 symbols at link time. A shim folder holding only a link
# to our fmt goes first on torch targets' include path.
get_target_property(LF_FMT_INCLUDE fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
if(LF_FMT_INCLUDE)
  list(GET LF_FMT_INCLUDE 0 LF_FMT_INCLUDE)
endif()
if(EXISTS ${LF_FMT_INCLUDE}/fmt/format.h)
  set(LF_FMT_SHIM ${CMAKE_BINARY_DIR}/lf_fmt_shim)
  file(MAKE_DIRECTORY ${LF_FMT_SHIM})
  file(CREATE_LINK ${LF_FMT_INCLUDE}/fmt ${LF_FMT_SHIM}/fmt SYMBOLIC)
  target_include_directories(lf_torch BEFORE INTERFACE ${LF_FMT_SHIM})
else()
  message(WARNING "fmt headers not found; torch's bundled fmt may shadow them")
endif()

# One precompiled <ATen/ATen.h> shared by every torch target (lf_torch_target):
# ATen.h alone costs ~20-40 s per translation unit, the PCH once per build.
option(LF_TORCH_PCH "Precompile ATen/ATen.h for torch targets" ON)
set(LF_TORCH_PCH_SRC ${CMAKE_BINARY_DIR}/lf_torch_pch.cpp)
if(NOT EXISTS ${LF_TORCH_PCH_SRC})
  file(WRITE ${LF_TORCH_PCH_SRC} "// anchor of the shared ATen precompiled header\n")
endif()
add_library(lf_torch_pch STATIC ${LF_TORCH_PCH_SRC})
target_link_libraries(lf_torch_pch PUBLIC lf_torch)
lf_add_options(lf_torch_pch)
if(LF_TORCH_PCH)
  target_precompile_headers(lf_torch_pch PRIVATE <ATen/ATen.h>)
endif()

# lf_torch_target(target [PUBLIC|PRIVATE]): links lf_torch and reuses the ATen PCH.
# Sources with extra compile definitions must set SKIP_PRECOMPILE_HEADERS.
function(lf_torch_target target)
  set(scope PRIVATE)
  if(ARGC GREATER 1)
    set(scope ${ARGV1})
  endif()
  target_link_libraries(${target} ${scope} lf_torch)
  lf_add_options(${target})
  if(LF_TORCH_PCH)
    target_precompile_headers(${target} REUSE_FROM lf_torch_pch)
  endif()
endfunction()
