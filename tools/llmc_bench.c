/* llmc_bench.c — times llm.c's own CPU training step at any B and T.
 *
 * llm.c's train_gpt2.c hard-codes its main() (B = 4, T = 64, a GPT-2 124M
 * checkpoint, tiny-shakespeare paths, sampling), so this driver does what
 * its test_gpt2.c does: #define TESTING, #include "train_gpt2.c" (from the
 * fetched snapshot, never from this repository), and runs the step of its
 * main() unchanged: dataloader_next_batch, gpt2_forward, gpt2_zero_grad,
 * gpt2_backward, gpt2_update(lr, 0.9, 0.999, 1e-8, weight decay, step).
 * tools/bench_train.py builds it at bench time, only when the snapshot has
 * been fetched, with llm.c's Makefile flags (-Ofast -march=native -fopenmp
 * -DOMP), into build/llmc/; OMP_NUM_THREADS sets its threads.
 *
 *   llmc_bench MODEL.bin DATA.bin B T STEPS WARMUP
 *
 * prints one JSON line: median ms per step, tokens/s, peak RSS (MiB).
 */
#define TESTING
#include "train_gpt2.c"

#include <sys/resource.h>

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: llmc_bench MODEL.bin DATA.bin B T STEPS WARMUP\n");
    return 2;
  }
  int B = atoi(argv[3]), T = atoi(argv[4]), steps = atoi(argv[5]), warm = atoi(argv[6]);
  if (B < 1 || T < 1 || steps < 1 || warm < 0) return fprintf(stderr, "llmc_bench: bad args\n"), 2;
  GPT2 model;
  gpt2_build_from_checkpoint(&model, argv[1]);
  DataLoader dl;
  dataloader_init(&dl, argv[2], B, T, 0, 1, 1);
  double *t = malloc(sizeof(double) * (size_t)(steps + warm));
  for (int step = 0; step < steps + warm; step++) {
    struct timespec s, e;
    clock_gettime(CLOCK_MONOTONIC, &s);
    dataloader_next_batch(&dl);
    gpt2_forward(&model, dl.inputs, dl.targets, B, T);
    gpt2_zero_grad(&model);
    gpt2_backward(&model);
    gpt2_update(&model, 3e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, step + 1);
    clock_gettime(CLOCK_MONOTONIC, &e);
    t[step] = (e.tv_sec - s.tv_sec) * 1e3 + (e.tv_nsec - s.tv_nsec) / 1e6;
  }
  qsort(t + warm, (size_t)steps, sizeof *t, cmp_d);
  double ms = steps % 2 ? t[warm + steps / 2] : (t[warm + steps / 2 - 1] + t[warm + steps / 2]) / 2;
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  int threads = 1;
#ifdef OMP
  threads = omp_get_max_threads();
#endif
  printf("{\"what\": \"llm.c\", \"threads\": %d, \"B\": %d, \"T\": %d, \"steps\": %d, "
         "\"ms\": %.3f, \"tokens_per_s\": %.1f, \"peak_rss_mb\": %.1f, \"last_loss\": %.4f}\n",
         threads, B, T, steps, ms, B * T / ms * 1e3, u.ru_maxrss / 1024.0, model.mean_loss);
  dataloader_free(&dl);
  gpt2_free(&model);
  free(t);
  return 0;
}
