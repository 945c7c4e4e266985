# --resume across processes equals an uninterrupted run, bit for bit: run A trains N epochs in
# one process; run B stops mid-epoch (--stop-after), then a second process resumes it. The two
# final checkpoint files (model, optimizer, scheduler, data position, RNG, step) and the CSV
# curves must be byte-identical.   -DEXE=... -DWORKDIR=...
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(base --epochs 3 --limit 400 --batch 16 --log-every 4 --seed 7)
set(common ${base} --hidden 24)
function(run)
  execute_process(COMMAND ${EXE} ${common} ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${EXE} ${common} ${ARGN}\n${out}${err}[exit ${rc}]")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "expected exit code 0, got '${rc}'")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
run(--checkpoint a.ckpt)
set(out_a "${out}")
run(--checkpoint b.ckpt --stop-after 37)  # 25 steps an epoch: stops inside epoch 2
if(NOT out MATCHES "stopped at step 37")
  message(FATAL_ERROR "run B did not stop at step 37")
endif()
run(--checkpoint b.ckpt --resume)
if(NOT out MATCHES "resumed b.ckpt at step 37")
  message(FATAL_ERROR "run B did not resume at step 37")
endif()
foreach(ext ckpt csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files a.${ext} b.${ext}
                  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "a.${ext} and b.${ext} differ: the resumed run is not the uninterrupted one")
  endif()
endforeach()
# The epoch-3 summaries (loss, accuracies, lr) printed by both runs are the same text too.
string(REGEX MATCH "epoch 3/3[^\n]*val acc[^\n]*lr [^ ]+" a3 "${out_a}")
string(REGEX MATCH "epoch 3/3[^\n]*val acc[^\n]*lr [^ ]+" b3 "${out}")
if(a3 STREQUAL "" OR NOT a3 STREQUAL b3)
  message(FATAL_ERROR "epoch 3 differs:\n  ${a3}\n  ${b3}")
endif()
# Resuming with different options is refused with a message.
execute_process(COMMAND ${EXE} ${base} --checkpoint b.ckpt --resume --hidden 25
                WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0 OR NOT "${o}${e}" MATCHES "--resume: b.ckpt has hidden = '24', this run has '25'")
  message(FATAL_ERROR "resuming with another --hidden: expected a clear refusal, got [${rc}] ${o}${e}")
endif()
message("identical: checkpoint, CSV and epoch-3 summary (${a3})")
