# Runs of transformer_lm / transformer_sort across processes (cmake -P):
#   -DEXE=<program> -DCASE=lm_reload|lm_resume|sort_reload|sort_resume -DWORKDIR=<fresh dir>
#
# lm_reload    a short training run prints 10 samples from its reloaded checkpoint; a second
#              process, --sample 10 with the same seed, must print the same words; --lang fr
#              gives French words only; an unknown language is refused.
# sort_reload  a short training run prints its held-out accuracy and predictions; a second
#              process, --eval, must print the same; --predict sorts one sequence; bad digits
#              are refused.
# *_resume     run A trains N steps in one process; run B stops after k steps (--stop-after),
#              a second process resumes it: the checkpoints and CSV curves are byte-identical,
#              and resuming with another --steps is refused with a message.
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")

# run(<expected rc: 0|nonzero> args...): sets `out` (stdout + stderr).
function(run expect)
  execute_process(COMMAND ${EXE} ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  message("$ ${EXE} ${ARGN}\n${o}${e}[exit ${rc}]")
  if(expect STREQUAL "0" AND NOT rc STREQUAL "0")
    message(FATAL_ERROR "expected exit code 0, got '${rc}'")
  elseif(expect STREQUAL "nonzero" AND (NOT rc MATCHES "^[0-9]+$" OR rc STREQUAL "0"))
    message(FATAL_ERROR "expected a non-zero exit code (and no crash), got '${rc}'")
  endif()
  set(out "${o}${e}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: output does not match '${regex}'")
  endif()
endfunction()

function(same_files a b)
  foreach(ext ckpt csv)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a}.${ext} ${b}.${ext}
                    WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "${a}.${ext} and ${b}.${ext} differ: the resumed run is not the uninterrupted one")
    endif()
  endforeach()
endfunction()

set(lm --limit 300 --d-model 32 --d-ff 64 --log-every 5 --seed 5)
set(sort --d-model 32 --d-ff 64 --test-size 300 --log-every 5 --seed 5)

if(CASE STREQUAL "lm_reload")
  run(0 ${lm} --steps 40 --eval-every 20 --checkpoint ck/lm.ckpt)
  expect_match("${out}" "samples identical" "training run")
  string(REGEX MATCHALL "\n[a-z][a-z]  [^ \n]*" trained "${out}")  # "<lang>  <word>"
  list(LENGTH trained n)
  if(NOT n EQUAL 10)
    message(FATAL_ERROR "expected 10 sample lines after training, got ${n}")
  endif()
  run(0 --sample 10 --seed 5 --checkpoint ck/lm.ckpt)
  string(REGEX MATCHALL "\n[a-z][a-z]  [^ \n]*" sampled "${out}")
  if(NOT trained STREQUAL sampled)
    message(FATAL_ERROR "--sample from the checkpoint differs from the samples printed after training")
  endif()
  run(0 --sample 6 --lang fr --checkpoint ck/lm.ckpt)
  string(REGEX MATCHALL "\n[a-z][a-z]  " langs "${out}")
  string(REGEX MATCHALL "\nfr  " french "${out}")
  list(LENGTH langs n_all)
  list(LENGTH french n_fr)
  if(NOT n_all EQUAL 6 OR NOT n_fr EQUAL 6)
    message(FATAL_ERROR "--sample 6 --lang fr: expected 6 French words, got ${n_fr} of ${n_all}")
  endif()
  run(nonzero --sample 3 --lang xx --checkpoint ck/lm.ckpt)
  expect_match("${out}" "error: unknown language 'xx'; this model knows en de fr" "--lang xx")
  message("same 10 samples from the trained model and from --sample")

elseif(CASE STREQUAL "sort_reload")
  run(0 ${sort} --steps 100 --eval-every 50 --checkpoint ck/sort.ckpt)
  expect_match("${out}" "predictions identical" "training run")
  set(line_re "held-out exact-match accuracy [0-9.]+% of 300 sequences")
  set(example_re "\n  [0-9.]+ -> [0-9.]+  (ok|WRONG)")
  string(REGEX MATCH "${line_re}" acc_trained "${out}")
  string(REGEX MATCHALL "${example_re}" ex_trained "${out}")
  run(0 --eval --checkpoint ck/sort.ckpt)
  string(REGEX MATCH "${line_re}" acc_eval "${out}")
  string(REGEX MATCHALL "${example_re}" ex_eval "${out}")
  list(LENGTH ex_trained n)
  if(acc_trained STREQUAL "" OR NOT acc_trained STREQUAL acc_eval OR n LESS 5 OR NOT ex_trained STREQUAL ex_eval)
    message(FATAL_ERROR "--eval differs from the training run:\n  ${acc_trained}\n  ${acc_eval}")
  endif()
  run(0 --predict 902104 --checkpoint ck/sort.ckpt)
  expect_match("${out}" "902104\\.\\. -> [0-9.]+  \\(sort: 001249\\.\\.\\)" "--predict")
  run(nonzero --predict 12a4 --checkpoint ck/sort.ckpt)
  expect_match("${out}" "error: --predict takes digits only, got '12a4'" "--predict 12a4")
  run(nonzero --predict 123456789 --checkpoint ck/sort.ckpt)
  expect_match("${out}" "error: --predict: 9 digits, this model takes 1 to 8" "--predict of 9 digits")
  message("same accuracy and predictions from the trained model and from --eval (${acc_eval})")

elseif(CASE MATCHES "^(lm|sort)_resume$")
  if(CASE STREQUAL "lm_resume")
    set(args ${lm} --eval-every 20)
    set(n 40)
    set(k 27)
    set(final_re "transformer +train loss [0-9.]+ +val loss [0-9.]+")
  else()
    set(args ${sort} --eval-every 20)
    set(n 60)
    set(k 33)
    set(final_re "held-out exact-match accuracy [0-9.]+%")
  endif()
  run(0 ${args} --steps ${n} --checkpoint a.ckpt)
  string(REGEX MATCH "${final_re}" final_a "${out}")
  run(0 ${args} --steps ${n} --checkpoint b.ckpt --stop-after ${k})
  expect_match("${out}" "stopped at step ${k} \\(--stop-after\\)" "run B")
  run(0 ${args} --steps ${n} --checkpoint b.ckpt --resume)
  expect_match("${out}" "resumed b.ckpt at step ${k}" "run B resumed")
  string(REGEX MATCH "${final_re}" final_b "${out}")
  same_files(a b)
  if(final_a STREQUAL "" OR NOT final_a STREQUAL final_b)
    message(FATAL_ERROR "the final results differ:\n  ${final_a}\n  ${final_b}")
  endif()
  run(nonzero ${args} --checkpoint a.ckpt --resume --steps 80)
  expect_match("${out}" "error: --resume: a.ckpt was started with --steps ${n} --lr 0.003, this run has --steps 80 --lr 0.003; resume with the same options" "resuming with another --steps")
  message("identical: checkpoint, CSV and final results (${final_a})")

else()
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
