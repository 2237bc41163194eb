/* llmc_driver.c — llm.c's CPU trainer at the bench's config, for
 * `make bench-train` (tools/bench_train.py builds and runs it; not a test,
 * not part of blockc).
 *
 * llm.c's train_gpt2.c hard-codes its checkpoint and data paths, B = 4,
 * T = 64 and 40 steps with evaluation and sampling in between.  This file
 * is compiled with a snapshot of karpathy/llm.c on the include path (never
 * in this repository: build/llmc/src, or LLMC_SRC) and -DTESTING, which
 * leaves train_gpt2.c's main out (as llm.c's own test_gpt2.c does); what
 * remains is llm.c's model, forward, backward and AdamW, compiled with
 * llm.c's flags (-Ofast -march=native -fopenmp -DOMP).  The loop below is
 * train_gpt2.c's training step, unchanged:
 *
 *   dataloader_next_batch; gpt2_forward(inputs, targets); gpt2_zero_grad;
 *   gpt2_backward; gpt2_update(lr, 0.9, 0.999, 1e-8, weight decay, step + 1)
 *
 * timed with CLOCK_MONOTONIC around exactly those calls and printed in
 * train_gpt2's words, "step N: train loss L (took X ms)".  The data loader
 * reads sequential windows (no shuffling), as the other trainers of the
 * bench do; llm.c's CPU step has no gradient clipping.
 *
 *   llmc_driver MODEL.bin DATA.bin B T STEPS [WEIGHT_DECAY]
 *
 * MODEL.bin and DATA.bin in llm.c's formats (tools/llmc_files.py writes
 * them).  Threads: OMP_NUM_THREADS. */
#define TESTING
#include "train_gpt2.c"

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: llmc_driver MODEL.bin DATA.bin B T STEPS [WEIGHT_DECAY]\n");
    return 2;
  }
  int B = atoi(argv[3]), T = atoi(argv[4]), steps = atoi(argv[5]);
  float wd = argc > 6 ? (float)atof(argv[6]) : 0.0f;
  if (B < 1 || T < 1 || steps < 1) {
    fprintf(stderr, "llmc_driver: error: B, T and STEPS must be positive\n");
    return 2;
  }
  GPT2 model;
  gpt2_build_from_checkpoint(&model, argv[1]);
  if ((size_t)T > model.config.max_seq_len) {
    fprintf(stderr, "llmc_driver: error: T = %d is past the model's max_seq_len\n", T);
    return 2;
  }
  DataLoader train_loader;
  dataloader_init(&train_loader, argv[2], (size_t)B, (size_t)T, 0, 1, 0);
#ifdef OMP
  printf("llm.c train_gpt2 step, B=%d T=%d, %d OpenMP threads\n", B, T, omp_get_max_threads());
#endif
  struct timespec start, end;
  for (int step = 0; step < steps; step++) {
    clock_gettime(CLOCK_MONOTONIC, &start);
    dataloader_next_batch(&train_loader);
    gpt2_forward(&model, train_loader.inputs, train_loader.targets, (size_t)B, (size_t)T);
    gpt2_zero_grad(&model);
    gpt2_backward(&model);
    gpt2_update(&model, 3e-4f, 0.9f, 0.999f, 1e-8f, wd, step + 1);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double s = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    printf("step %d: train loss %f (took %f ms)\n", step, model.mean_loss, s * 1000);
    fflush(stdout);
  }
  dataloader_free(&train_loader);
  gpt2_free(&model);
  return 0;
}
