# transformer_lm --distributed under mpirun with 2 ranks (-DEXE=... -DMPIEXEC=... -DWORKDIR=...):
# run A trains 40 steps; run B stops after 25 (--stop-after) and a second mpirun resumes it.
# With dropout each rank draws its own masks, so the checkpoint keeps every rank's generator;
# the checkpoints and CSV curves of A and B must be byte-identical. Rank 0 alone prints.
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
execute_process(COMMAND ${MPIEXEC} --version OUTPUT_VARIABLE version ERROR_QUIET)
set(mpirun ${MPIEXEC} -n 2)
if(version MATCHES "Open MPI|OpenRTE")
  list(APPEND mpirun --oversubscribe)  # more ranks than cores are fine
endif()
set(common --limit 400 --d-model 32 --d-ff 64 --log-every 5 --steps 40 --eval-every 20 --batch 16
           --dropout 0.1 --distributed)
function(run)
  execute_process(COMMAND ${mpirun} ${EXE} ${common} ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${mpirun} ${EXE} ${common} ${ARGN}\n${out}${err}[exit ${rc}]")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "expected exit code 0, got '${rc}'")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()

run(--checkpoint a.ckpt)
if(NOT out MATCHES "distributed: 2 ranks, each on 1/2 of the words at batch 16 \\(global batch 32\\)")
  message(FATAL_ERROR "the run did not report 2 ranks")
endif()
string(REGEX MATCHALL "samples identical" printed "${out}")
list(LENGTH printed n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected rank 0 alone to print the results, they appear ${n} times")
endif()
run(--checkpoint b.ckpt --stop-after 25)
run(--checkpoint b.ckpt --resume)
if(NOT out MATCHES "resumed b.ckpt at step 25")
  message(FATAL_ERROR "run B did not resume at step 25")
endif()
foreach(ext ckpt csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files a.${ext} b.${ext}
                  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "a.${ext} and b.${ext} differ: the resumed distributed run is not the uninterrupted one")
  endif()
endforeach()
message("identical: the resumed distributed run's checkpoint and CSV")
