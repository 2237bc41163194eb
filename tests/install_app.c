/* install_app.c -- the embedding program `make install-test` builds against
 * the installed blockc (tests/install_test.sh): only <blockc.h> and
 * `pkg-config --cflags --libs blockc`.
 *
 *   ./app GRAPH    prints the model's sizes and a checksum of y = model(x)
 *
 * Weights are the seeded ones (seed 1); x[i] = sin(i).  Exit status 0, or
 * 1 with the library's message on stderr. */
#include <blockc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s GRAPH\n", argv[0]);
    return 2;
  }
  blockc_model *m = blockc_new();
  if (!m) return 1;
  int st = blockc_load_graph(m, argv[1]);
  if (!st) st = blockc_init_weights(m, 1);
  if (!st) st = blockc_compile(m);
  float *x = NULL, *y = NULL;
  void *ws = NULL;
  if (!st) {
    size_t nx = blockc_input_size(m), ny = blockc_output_size(m);
    size_t wsb = (blockc_workspace_size(m) + 63) / 64 * 64;
    x = malloc(nx * sizeof *x);
    y = malloc(ny * sizeof *y);
    ws = aligned_alloc(64, wsb ? wsb : 64);
    if (!x || !y || !ws) st = BLOCKC_ENOMEM;
    for (size_t i = 0; !st && i < nx; i++) x[i] = (float)sin((double)i);
    if (!st) st = blockc_forward(m, x, y, ws);
    double sum = 0;
    for (size_t i = 0; !st && i < ny; i++) sum += fabs((double)y[i]);
    if (!st) printf("%zu in, %zu out, sum|y| %.4f\n", nx, ny, sum);
  }
  free(x);
  free(y);
  free(ws);
  blockc_delete(m);
  return st ? 1 : 0;
}
