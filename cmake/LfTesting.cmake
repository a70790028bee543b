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

# lf_add_launcher_pytest(NAME FILE TIMEOUT): a pytest of FILE (in this folder) that runs jobs
# through the real lf-train (LF_TRAIN_BIN), one at a time with the other launcher tests.
function(lf_add_launcher_pytest name file timeout)
  add_test(NAME ${name} COMMAND ${LF_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} RESOURCE_LOCK launcher
                       ENVIRONMENT "LF_TRAIN_BIN=$<TARGET_FILE:lf-train>")
endfunction()

# lf_add_numeric_pytest(NAME FILE TIMEOUT): a pytest of FILE that runs jobs through the real lf-train
# and compares their numbers (losses, weights, outputs) with a reference or with each other. Each job
# takes a free port and its own folder and nothing in it is timed, so it may overlap any other test;
# the launcher lock is kept for the tests whose deadlines and fault timing another job's load moves.
function(lf_add_numeric_pytest name file timeout)
  add_test(NAME ${name} COMMAND ${LF_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} ENVIRONMENT "LF_TRAIN_BIN=$<TARGET_FILE:lf-train>")
endfunction()
