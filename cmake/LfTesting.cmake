# lf_add_fixture_check(WHAT TIMEOUT): a ctest that regenerates the committed WHAT
# fixture with the Python reference stack (LF_REFERENCE_PYTHON, else LF_PYTHON) and
# requires it unchanged (scripts/fixtures/check_fixtures.sh; exit 77 = skip).
function(lf_add_fixture_check what timeout)
  set(py "${LF_REFERENCE_PYTHON}")
  if(NOT py)
    set(py "${LF_PYTHON}")
  endif()
  if(NOT py)
    return()
  endif()
  add_test(NAME ${what}_fixture_check COMMAND ${PROJECT_SOURCE_DIR}/scripts/fixtures/check_fixtures.sh ${py} ${what})
  set_tests_properties(${what}_fixture_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout}
                       ENVIRONMENT "LF_ASSETS_DIR=${LF_ASSETS_DIR}")
endfunction()
