# Common compile options for every lf target: lf_add_options(target).
function(lf_add_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()


# lf_at_o1(COMPONENT...): the control plane's components (src/<component>) at -O1 in the default
# RelWithDebInfo build (-O2 elsewhere). Their processes wait on sockets, files and children, and their
# translation units (CLI11, Boost.Asio, nlohmann::json, fmt) spend most of their compile time in
# -O2's passes: -O1 compiles them in 55-75% of the time (agent.cpp 11.0 -> 8.5 s, config_schema.cpp
# 8.5 -> 4.8 s), about 1.5 of the 2-core CI build's 15 minutes. Kept at -O2: what trains or moves data
# (tokenizer, data, model, ...) and the parts with published throughput numbers (rendezvous, metrics).
function(lf_at_o1)
  foreach(component IN LISTS ARGN)
    get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/src/${component} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        target_compile_options(${t} PRIVATE $<$<AND:$<CONFIG:RelWithDebInfo>,$<COMPILE_LANGUAGE:CXX>>:-O1>)
      endif()
    endforeach()
  endforeach()
endfunction()
