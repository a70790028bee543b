# Common compile options for every lf target: lf_add_options(target).
function(lf_add_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

