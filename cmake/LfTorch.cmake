# libtorch for lf-worker and the model/comm/optim/ckpt components. Only these
# targets see torch; the launcher side never links it.
find_package(Torch REQUIRED)
# Torch's exported flags add -D_GLIBCXX_USE_CXX11_ABI; keep them on torch targets only.
add_library(lf_torch INTERFACE)
target_link_libraries(lf_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(lf_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
