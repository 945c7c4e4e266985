# char_rnn_classify --distributed under mpirun with 2 ranks (-DEXE=... -DMPIEXEC=... -DWORKDIR=...):
#  - 2 ranks at --batch 8 end where 1 process at --batch 16 ends: the same validation and test
#    figures (to the printed digits);
#  - a distributed run stopped with --stop-after and resumed (rank 0 wrote the checkpoint,
#    every rank resumes from it) equals the uninterrupted distributed run, byte for byte;
#  - under mpirun without --distributed the program refuses to run.
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(base --epochs 3 --limit 400 --hidden 24 --log-every 4 --seed 7)
execute_process(COMMAND ${MPIEXEC} --version OUTPUT_VARIABLE version ERROR_QUIET)
set(mpirun ${MPIEXEC} -n 2)
if(version MATCHES "Open MPI|OpenRTE")
  list(APPEND mpirun --oversubscribe)  # more ranks than cores are fine
endif()
function(run expect_rc)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${ARGN}\n${out}${err}[exit ${rc}]")
  if(expect_rc STREQUAL "0" AND NOT rc STREQUAL "0")
    message(FATAL_ERROR "expected exit code 0, got '${rc}'")
  elseif(expect_rc STREQUAL "nonzero" AND (rc STREQUAL "0" OR NOT rc MATCHES "^[0-9]+$"))
    message(FATAL_ERROR "expected a non-zero exit code, got '${rc}'")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()
# The figures a run prints at the end: epoch-3 validation, test accuracy and loss.
function(figures var text)
  string(REGEX MATCH "val loss [0-9.]+  val acc +[0-9.]+%" val "${text}")
  string(REGEX MATCH "test accuracy: [0-9.]+%[^\n]*test loss [0-9.]+" test "${text}")
  if(val STREQUAL "" OR test STREQUAL "")
    message(FATAL_ERROR "no validation/test figures in the output")
  endif()
  set(${var} "${val}; ${test}" PARENT_SCOPE)
endfunction()

run(0 ${EXE} ${base} --batch 16 --checkpoint single.ckpt)
figures(single "${out}")
run(0 ${mpirun} ${EXE} ${base} --batch 8 --distributed --checkpoint b.ckpt)
if(NOT out MATCHES "distributed: 2 ranks, each on 1/2 of every epoch at batch 8 \\(global batch 16\\)")
  message(FATAL_ERROR "the run did not report 2 ranks")
endif()
string(REGEX MATCHALL "test accuracy:" printed "${out}")
list(LENGTH printed n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected rank 0 alone to print the test results, they appear ${n} times")
endif()
figures(distributed "${out}")
if(NOT single STREQUAL distributed)
  message(FATAL_ERROR "2 ranks at batch 8 differ from 1 process at batch 16:\n  ${single}\n  ${distributed}")
endif()

run(0 ${mpirun} ${EXE} ${base} --batch 8 --distributed --checkpoint c.ckpt --stop-after 37)
run(0 ${mpirun} ${EXE} ${base} --batch 8 --distributed --checkpoint c.ckpt --resume)
if(NOT out MATCHES "resumed c.ckpt at step 37")
  message(FATAL_ERROR "the distributed run did not resume at step 37")
endif()
foreach(ext ckpt csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files b.${ext} c.${ext}
                  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "b.${ext} and c.${ext} differ: the resumed distributed run is not the uninterrupted one")
  endif()
endforeach()

run(nonzero ${mpirun} ${EXE} ${base} --checkpoint d.ckpt)
if(NOT out MATCHES "started by mpirun with 2 processes .* add --distributed")
  message(FATAL_ERROR "under mpirun without --distributed: expected a refusal")
endif()
message("identical: 1 process at batch 16 and 2 ranks at batch 8 (${single}); resumed distributed run")
