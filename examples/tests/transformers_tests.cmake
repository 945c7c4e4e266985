# Short runs of transformer_lm and transformer_sort (seconds each), with example_test() from
# examples_tests.cmake: the loss falls, the checkpoint reloads with the same samples and
# predictions (in the same process, and in a second one), --resume equals an uninterrupted run
# bit for bit, and bad input exits non-zero with a message.

# ---- transformer_lm -----------------------------------------------------------------------------
set(_lm_small --limit 400 --d-model 32 --d-ff 64 --log-every 5)
example_test(transformer_lm.short transformer_lm 0
  "after 60 steps.*transformer +train loss [0-9.]+ +val loss [0-9.]+ nats.*bigram baseline +train loss [0-9.]+ +val loss [0-9.]+ nats.*samples identical.*KV cache and recomputed without it: identical"
  LOSS_FALLS ck/lm.csv
  ARGS ${_lm_small} --steps 60 --eval-every 30 --checkpoint ck/lm.ckpt)
example_test(transformer_lm.help transformer_lm 0
  "--lr.*--seed.*--threads.*--checkpoint.*--device.*--data.*--steps.*--resume.*--sample.*--lang"
  ARGS --help)
example_test(transformer_lm.bad_device transformer_lm nonzero "--device: tpu not in \\{cpu,cuda,auto\\}"
  ARGS --device tpu)
example_test(transformer_lm.bad_steps transformer_lm nonzero "--steps: Value 0 not in range 1 to 1000000000"
  ARGS --steps 0)
example_test(transformer_lm.bad_option transformer_lm nonzero "The following argument was not expected: --epochs"
  ARGS --epochs)
example_test(transformer_lm.missing_data transformer_lm nonzero
  "transformer_lm: error: cannot open /nonexistent/words/languages.txt: No such file or directory"
  ARGS --data /nonexistent/words)
example_test(transformer_lm.missing_checkpoint transformer_lm nonzero
  "transformer_lm: error: .*no_such.ckpt"
  ARGS --sample 3 --checkpoint no_such.ckpt)
example_test(transformer_lm.sample_with_resume transformer_lm nonzero "--resume excludes --sample"
  ARGS --sample 3 --resume)

# ---- transformer_sort ---------------------------------------------------------------------------
# The proof that attention trains, at test size: a small model sorts held-out sequences.
example_test(transformer_sort.short transformer_sort 0
  "held-out exact-match accuracy (9[5-9]|100)\\.[0-9]+% of 500 sequences after 300 steps.*predictions identical"
  LOSS_FALLS ck/sort.csv
  ARGS --steps 300 --eval-every 100 --log-every 10 --d-model 32 --d-ff 64 --test-size 500 --checkpoint ck/sort.ckpt)
example_test(transformer_sort.help transformer_sort 0
  "--lr.*--seed.*--threads.*--checkpoint.*--device.*--steps.*--task.*--resume.*--eval.*--predict"
  ARGS --help)
example_test(transformer_sort.bad_task transformer_sort nonzero "--task: shuffle not in \\{sort,reverse\\}"
  ARGS --task shuffle)
example_test(transformer_sort.bad_lengths transformer_sort nonzero
  "transformer_sort: error: --min-len 9 and --max-len 8: need 1 <= min-len <= max-len"
  ARGS --min-len 9)
example_test(transformer_sort.missing_checkpoint transformer_sort nonzero
  "transformer_sort: error: .*no_such.ckpt"
  ARGS --eval --checkpoint no_such.ckpt)

# ---- across processes -----------------------------------------------------------------------------
foreach(t lm_reload lm_resume sort_reload sort_resume)
  string(REGEX MATCH "^[a-z]+" prog "${t}")
  add_test(NAME example.transformer_${t}
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:transformer_${prog}> -DCASE=${t}
                   -DWORKDIR=${_ex_runs}/transformer_${t} -P ${_ex_tests}/transformers_runs.cmake)
  set_tests_properties(example.transformer_${t} PROPERTIES TIMEOUT 120 LABELS examples)
endforeach()
