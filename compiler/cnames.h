// cnames.h — whether a model name can name the emitted C (cnames.c).
#ifndef BC_CNAMES_H
#define BC_CNAMES_H
#include "bc.h"

// Why g->model cannot name the emitted files, functions and macros (it
// would be a system header's name, enter a reserved macro name space, or
// with g's dims form a system macro) and what to do, as text to follow
// "model name 'X' " (ctx memory); NULL when it can.
const char *bcN_model_clash(bc_ctx *ctx, const bc_graph *g);
// The header's names after <MODEL>_ that are not made from a dim.
const char *const *bcN_fixed_names(int *n);
#endif
