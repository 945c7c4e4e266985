# Runs EXE on FILE (cmake -P) and checks the outcome: EXPECT_RC is 0 or "nonzero" (a crash
# is neither), and the combined output must match EXPECT_OUTPUT.
execute_process(COMMAND ${EXE} ${FILE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(EXPECT_RC STREQUAL "0")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "expected exit code 0, got '${rc}'")
  endif()
elseif(NOT rc MATCHES "^[0-9]+$" OR rc STREQUAL "0")
  message(FATAL_ERROR "expected a non-zero exit code (and no crash), got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "output does not match '${EXPECT_OUTPUT}'")
endif()
