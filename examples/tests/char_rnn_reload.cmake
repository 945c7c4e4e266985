# The checkpoint reloads and gives the same predictions: a short training run prints the
# reloaded model's test accuracy (the program fails if it differs from the trained model's)
# and the top-3 languages of a few test words; a second process, --predict on the same words,
# must print the same top-3 lines.   -DEXE=... -DWORKDIR=...
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(common --limit 300 --hidden 24 --checkpoint ck/model.ckpt)
execute_process(COMMAND ${EXE} ${common} --epochs 2 WORKING_DIRECTORY "${WORKDIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}[exit ${rc}]")
if(NOT rc STREQUAL "0" OR NOT out MATCHES "reloaded: +test accuracy [0-9.]+%, test loss [0-9.]+ \\(identical\\)")
  message(FATAL_ERROR "training run failed or the reloaded model differs")
endif()
# Lines "  <word>  <lang> <p>%  <lang> <p>%  <lang> <p>%   (true: ...)"
string(REGEX MATCHALL "\n  [^ \n]+ +[a-z][a-z] +[0-9.]+%  [a-z][a-z] +[0-9.]+%  [a-z][a-z] +[0-9.]+%"
       trained "${out}")
list(LENGTH trained n)
if(n LESS 4)
  message(FATAL_ERROR "expected at least 4 prediction lines, got ${n}")
endif()
set(words "")
foreach(line IN LISTS trained)
  string(REGEX MATCH "^\n  ([^ ]+)" _ "${line}")
  list(APPEND words "${CMAKE_MATCH_1}")
endforeach()
execute_process(COMMAND ${EXE} --checkpoint ck/model.ckpt --predict ${words}
                WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
message("$ --predict ${words}\n${out2}${err2}[exit ${rc}]")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "--predict failed")
endif()
string(REGEX MATCHALL "\n  [^ \n]+ +[a-z][a-z] +[0-9.]+%  [a-z][a-z] +[0-9.]+%  [a-z][a-z] +[0-9.]+%"
       predicted "${out2}")
if(NOT trained STREQUAL predicted)
  message(FATAL_ERROR "--predict differs from the predictions printed after training")
endif()
message("same top-3 predictions for ${n} words")
# A word with a character outside the vocabulary is refused with a message, not a crash.
execute_process(COMMAND ${EXE} --checkpoint ck/model.ckpt --predict "日本"
                WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$" OR NOT "${o}${e}" MATCHES "character '日' \\(U\\+65E5\\) in '日本' is not in the vocabulary")
  message(FATAL_ERROR "--predict with an unknown character: expected a clear error, got [${rc}] ${o}${e}")
endif()
