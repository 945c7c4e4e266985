# Runs one program and checks the outcome (cmake -P, so ctest needs nothing else); used by the
# examples' tests (examples/tests/examples_tests.cmake) and the tools' (tools/CMakeLists.txt):
#   EXE          the program
#   ARGS         its arguments, separated by '|'
#   WORKDIR      optional: created fresh (emptied) and used as the working directory
#   EXPECT_RC    0, or "nonzero" (an exit code other than 0; a crash or signal is neither)
#   EXPECT_OUTPUT  a regex the combined stdout + stderr must match
#   REJECT_OUTPUT  optional: a regex it must not match
#   LOSS_FALLS   optional, with WORKDIR: a CSV (step,loss,lr,accuracy) in it whose last loss
#                must be below its first
set(workdir "")
if(DEFINED WORKDIR)
  file(REMOVE_RECURSE "${WORKDIR}")
  file(MAKE_DIRECTORY "${WORKDIR}")
  set(workdir WORKING_DIRECTORY "${WORKDIR}")
endif()
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args} ${workdir}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("$ ${EXE} ${args}\n${out}${err}[exit ${rc}]")
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
if(DEFINED REJECT_OUTPUT AND "${out}${err}" MATCHES "${REJECT_OUTPUT}")
  message(FATAL_ERROR "output matches '${REJECT_OUTPUT}', which it must not")
endif()
if(DEFINED LOSS_FALLS)
  file(STRINGS "${WORKDIR}/${LOSS_FALLS}" rows REGEX "^[0-9]")
  list(LENGTH rows n)
  if(n LESS 2)
    message(FATAL_ERROR "${LOSS_FALLS}: expected at least 2 rows, got ${n}")
  endif()
  list(GET rows 0 first)
  list(GET rows -1 last)
  string(REPLACE "," ";" first "${first}")
  string(REPLACE "," ";" last "${last}")
  list(GET first 1 first_loss)
  list(GET last 1 last_loss)
  message("loss: first row ${first_loss}, last row ${last_loss}")
  if(NOT last_loss LESS first_loss)
    message(FATAL_ERROR "the loss did not fall: ${first_loss} -> ${last_loss}")
  endif()
endif()
