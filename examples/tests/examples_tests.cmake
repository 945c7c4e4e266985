# Short runs of the examples, seconds each: the loss falls, checkpoints reload with the same
# predictions, --resume equals an uninterrupted run, and bad input exits non-zero with a
# message. Each test works in its own directory under the build tree.
set(_ex_tests ${CMAKE_CURRENT_SOURCE_DIR}/tests)
set(_ex_runs ${CMAKE_CURRENT_BINARY_DIR}/test_runs)

# example_test(<name> <target> <expected rc: 0|nonzero> <output regex> [LOSS_FALLS csv]
#              [REJECT regex] ARGS <args...>)
function(example_test name target rc regex)
  cmake_parse_arguments(T "" "LOSS_FALLS;REJECT" "ARGS" ${ARGN})
  string(REPLACE ";" "|" args "${T_ARGS}")
  set(extra "")
  if(T_LOSS_FALLS)
    list(APPEND extra -DLOSS_FALLS=${T_LOSS_FALLS})
  endif()
  if(T_REJECT)
    list(APPEND extra "-DREJECT_OUTPUT=${T_REJECT}")
  endif()
  add_test(NAME example.${name}
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> "-DARGS=${args}"
                   -DWORKDIR=${_ex_runs}/${name} -DEXPECT_RC=${rc} "-DEXPECT_OUTPUT=${regex}"
                   ${extra} -P ${PROJECT_SOURCE_DIR}/cmake/expect_run.cmake)
  set_tests_properties(example.${name} PROPERTIES TIMEOUT 120 LABELS examples)
endfunction()

# ---- char_rnn_classify ------------------------------------------------------------------------
example_test(char_rnn.short char_rnn_classify 0
  "epoch 2/2 .*test accuracy: [0-9.]+%.*\\(identical\\)"
  LOSS_FALLS ck/run.csv
  ARGS --epochs 2 --limit 400 --hidden 32 --batch 16 --log-every 5 --checkpoint ck/run.ckpt)
foreach(cell lstm gru)
  example_test(char_rnn.${cell} char_rnn_classify 0 "${cell} cell.*epoch 1/1 .*\\(identical\\)"
    LOSS_FALLS ck/${cell}.csv
    ARGS --cell ${cell} --epochs 1 --limit 300 --hidden 16 --batch 16 --log-every 4
         --checkpoint ck/${cell}.ckpt)
endforeach()
example_test(char_rnn.help char_rnn_classify 0 "--cell.*--epochs.*--lr.*--seed.*--threads.*--checkpoint.*--device.*--data.*--resume.*--predict"
  ARGS --help)
example_test(char_rnn.bad_cell char_rnn_classify nonzero "--cell: foo not in \\{rnn,lstm,gru\\}"
  ARGS --cell foo)
example_test(char_rnn.bad_option char_rnn_classify nonzero "The following argument was not expected: --no-such-option"
  ARGS --no-such-option)
example_test(char_rnn.bad_number char_rnn_classify nonzero "--epochs: Value abc not in range 1 to 100000"
  ARGS --epochs abc)
# Regressions: each of these was accepted, or failed only after training.
example_test(char_rnn.bad_clip_nan char_rnn_classify nonzero "--clip: expected a finite number >= 0, got 'nan'"
  ARGS --clip nan)
example_test(char_rnn.bad_seed char_rnn_classify nonzero "--seed: expected a whole number >= 0, got '-1'"
  ARGS --seed -1)
example_test(char_rnn.checkpoint_is_a_dir char_rnn_classify nonzero "--checkpoint: '/tmp' is a directory"
  ARGS --checkpoint /tmp)
example_test(char_rnn.checkpoint_ends_in_slash char_rnn_classify nonzero "--checkpoint: 'ck/' names a directory"
  ARGS --checkpoint ck/)
example_test(char_rnn.diverges char_rnn_classify nonzero
  "char_rnn_classify: error: training diverged at step [0-9]+: the loss is (nan|inf)"
  ARGS --lr 1e308 --epochs 1 --limit 200 --hidden 8 --batch 16 --checkpoint ck/div.ckpt)
example_test(char_rnn.resume_other_example char_rnn_classify nonzero
  "--resume: .*/v1.ckpt was written by no example"
  ARGS --resume --checkpoint ${PROJECT_SOURCE_DIR}/tests/fixtures/checkpoint/v1.ckpt --limit 50)
example_test(char_rnn.missing_data char_rnn_classify nonzero
  "char_rnn_classify: error: cannot open /nonexistent/words/languages.txt: No such file or directory"
  ARGS --data /nonexistent/words)
example_test(char_rnn.missing_checkpoint char_rnn_classify nonzero
  "char_rnn_classify: error: .*no_such.ckpt"
  ARGS --predict hello --checkpoint no_such.ckpt)
example_test(char_rnn.resume_missing char_rnn_classify nonzero
  "char_rnn_classify: error: .*no_such.ckpt"
  ARGS --resume --checkpoint no_such.ckpt)
add_test(NAME example.char_rnn.reload_predict
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:char_rnn_classify>
                 -DWORKDIR=${_ex_runs}/char_rnn.reload_predict -P ${_ex_tests}/char_rnn_reload.cmake)
add_test(NAME example.char_rnn.resume
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:char_rnn_classify>
                 -DWORKDIR=${_ex_runs}/char_rnn.resume -P ${_ex_tests}/char_rnn_resume.cmake)
set_tests_properties(example.char_rnn.reload_predict example.char_rnn.resume
                     PROPERTIES TIMEOUT 120 LABELS examples)

# ---- linear_basics ----------------------------------------------------------------------------
example_test(linear_basics.run linear_basics 0
  "Linear\\(3, 2\\)\\(x\\) = \\[1.5, 3.4\\].*recovered W and b within 0.01.*rank\\(W\\) = 2 .*test accuracy: single Linear [0-9.]+%, MLP (9[5-9]|100)\\.[0-9]%.*\\(identical\\)"
  LOSS_FALLS ck/lb.csv
  ARGS --checkpoint ck/lb.ckpt)
example_test(linear_basics.xor linear_basics 0
  "xor \\(generated\\).*test accuracy: single Linear [0-9.]+%, MLP (9[5-9]|100)\\.[0-9]%.*\\(identical\\)"
  LOSS_FALLS ck/xor.csv
  ARGS --problem xor --checkpoint ck/xor.ckpt)
example_test(linear_basics.data_csv linear_basics 0
  "xor.csv, 16 train / 4 test points.*\\(identical\\)"
  ARGS --data ${_ex_tests}/xor.csv --steps 300 --checkpoint ck/csv.ckpt)
example_test(linear_basics.help linear_basics 0 "--steps.*--lr.*--seed.*--threads.*--checkpoint.*--device.*--data"
  ARGS --help)
example_test(linear_basics.bad_argument linear_basics nonzero "--problem: spiral not in \\{circles,xor\\}"
  ARGS --problem spiral)
example_test(linear_basics.bad_device linear_basics nonzero "--device: tpu not in \\{cpu,cuda,auto\\}"
  ARGS --device tpu)
example_test(linear_basics.missing_data linear_basics nonzero
  "linear_basics: error: cannot open /nonexistent/points.csv: No such file or directory"
  REJECT "== 1\\."
  ARGS --data /nonexistent/points.csv)

# ---- the shared code (examples/common) ----------------------------------------------------------
find_package(GTest REQUIRED)
include(GoogleTest)
add_executable(test_examples_common ${_ex_tests}/test_examples_common.cpp)
target_link_libraries(test_examples_common PRIVATE tapegrad_examples_common GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_examples_common TEST_PREFIX example.common. DISCOVERY_TIMEOUT 60)

# ---- --distributed (only where tapegrad::distributed was built) -------------------------------
if(TARGET tapegrad::distributed)
  add_test(NAME example.char_rnn.distributed
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:char_rnn_classify> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DWORKDIR=${_ex_runs}/char_rnn.distributed -P ${_ex_tests}/char_rnn_distributed.cmake)
  add_test(NAME example.transformer_lm.distributed
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:transformer_lm> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DWORKDIR=${_ex_runs}/transformer_lm.distributed -P ${_ex_tests}/lm_distributed.cmake)
  # Open MPI refuses root unless told; no single-copy (CMA) transfers, which containers forbid.
  set_tests_properties(example.char_rnn.distributed example.transformer_lm.distributed
    PROPERTIES TIMEOUT 180 LABELS "examples;distributed"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_btl_vader_single_copy_mechanism=none")
endif()

# ---- custom_module ---------------------------------------------------------------------------
example_test(custom_module custom_module 0 "gradcheck of GLU: ok.*saved to .*reloaded: identical outputs"
  ARGS ck/glu.ckpt)

# ---- tutorial_rnn (PyTorch's name-classification tutorial): the validation loss falls ---------
example_test(tutorial_rnn tutorial_rnn 0
  "i2h.weight \\[32, 60\\].*after: .*the validation loss fell"
  ARGS 3000 32)
example_test(tutorial_rnn.bad_steps tutorial_rnn nonzero "usage: tutorial_rnn \\[steps >= 1\\]"
  ARGS 0)
