# Third-party libraries of the torch-free part, all from Debian packages
# (scripts/install_deps.sh installs them; on the GPU machine they come from
# unpacked .debs, see scripts/device/build.sh).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 QUIET CONFIG)
if(NOT TARGET CLI11::CLI11)
  # Debian's CLI11 2.1 ships only the header; wrap it.
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
# Boost.Asio is header-only; only the headers are needed.
find_path(LF_BOOST_INCLUDE_DIR boost/asio.hpp REQUIRED)
add_library(lf_asio INTERFACE)
target_include_directories(lf_asio SYSTEM INTERFACE ${LF_BOOST_INCLUDE_DIR})
target_compile_definitions(lf_asio INTERFACE BOOST_ASIO_NO_DEPRECATED BOOST_ASIO_DISABLE_BOOST_ARRAY)
target_link_libraries(lf_asio INTERFACE Threads::Threads)

if(LF_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
