// main.c — the blockc command-line program: finds the command in
// options.c's table, parses its options there, and runs it.
//
//   blockc COMMAND GRAPH [options]      blockc help [COMMAND]
//
// Exit status: 0 success, 1 bad input (graph, weights, arrays), 2 bad usage.
// This file only dispatches; the table, the parser and help are options.c's
// and the work is done by the commands (cli.h) on top of the library.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <signal.h>
#include <string.h>

static int help(int argc, char **argv) {
  if (argc < 3) {
    cli_print_usage(stdout);
    return 0;
  }
  const cli_command *c = cli_command_find(argv[2]);
  if (!c) return cli_usage_error("no help for unknown command '%s'", argv[2]);
  cli_print_help(stdout, c);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    cli_print_usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    cli_print_usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("blockc %s\n", BC_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "help")) return help(argc, argv);
  const cli_command *c = cli_command_find(cmd);
  if (!c) return cli_usage_error("unknown command '%s'", cmd);
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      cli_print_help(stdout, c);
      return 0;
    }
  // Past a file-size limit (ulimit -f) a write fails with EFBIG ("File too
  // large"), reported like any write error with the temp file removed,
  // instead of SIGXFSZ killing blockc without a word.
  signal(SIGXFSZ, SIG_IGN);
  cli_opts o;
  int st = cli_parse_args(argc, argv, c, &o);
  if (st) {
    cli_free_opts(&o);
    return st;
  }
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 1;
  st = c->fn(ctx, &o);
  bc_ctx_free(ctx);
  cli_free_opts(&o);
  return st == BC_OK ? 0 : st == BC_EUSAGE ? 2 : 1;
}
