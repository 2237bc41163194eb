// cnames.c — whether a model name can name the emitted C.
//
// The model name becomes the file names <model>.c / <model>.h that `blockc
// emit` writes (and the AOT cache compiles), the prefix of every function
// and type in them (<model>_run, <model>_io, ...), and, upper-cased, the
// prefix of every macro and enumerator of the header (<MODEL>_OK,
// <MODEL>_<dim>, <MODEL>_<dim>_MAX for a run-time dim, ...).  A name is
// refused when any of these could collide with the C implementation:
//
//   1. <model>.h is a header of ISO C (C11, C23), of POSIX.1-2017, of
//      glibc's common top-level set, or one blockc's output includes
//      (blockc_rt.h, cblas.h): a program compiled with -I of the output
//      directory would get the model's header for <errno.h>.  Compared
//      ignoring case (case-insensitive file systems).
//   2. <MODEL>_ enters a macro name space the standards reserve or fill:
//      every name beginning with INT or UINT (<stdint.h>: INT8_MAX,
//      UINT64_C, ...), a leading '_' (reserved everywhere), and the
//      prefixes below (FLT_, SIZE_, PTRDIFF_, LC_, SIG_, O_, S_, PTHREAD_,
//      PATH_, ...).  A model whose upper-cased name is such a prefix, or
//      begins with it and an underscore, or is the leading words of one
//      (`memory` for MEMORY_ORDER_), is refused.
//   3. A concrete macro outside those name spaces (M_PI, R_OK, D_FMT) that
//      the header would define: <MODEL>_ followed by a dim's name, a dim's
//      name and _MAX, or one of the header's fixed names (OK, EINVAL, ...).
//
// The E* name space of <errno.h> is not refused (it would refuse every
// model beginning with e, and no errno macro has an underscore, which each
// of blockc's has); nor are the lower-case str*, mem*, is*, to* of the C
// library (<model>_ has an underscore after the model, so none is formed).
#include "bc.h"

#include <ctype.h>
#include <string.h>

#include "cnames.h"

// (1) Header names, lower case.
static const char *const k_headers[] = {
    // ISO C11 and C23
    "assert", "complex", "ctype", "errno", "fenv", "float", "inttypes", "iso646", "limits",
    "locale", "math", "setjmp", "signal", "stdalign", "stdarg", "stdatomic", "stdbit", "stdbool",
    "stdckdint", "stddef", "stdint", "stdio", "stdlib", "stdnoreturn", "string", "tgmath",
    "threads", "time", "uchar", "wchar", "wctype",
    // POSIX.1-2017 (top level; <sys/...> and <netinet/...> cannot be a file name)
    "aio", "cpio", "dirent", "dlfcn", "fcntl", "fmtmsg", "fnmatch", "ftw", "glob", "grp",
    "iconv", "langinfo", "libgen", "monetary", "mqueue", "ndbm", "netdb", "nl_types", "poll",
    "pthread", "pwd", "regex", "sched", "search", "semaphore", "spawn", "strings", "stropts",
    "syslog", "tar", "termios", "trace", "ulimit", "unistd", "utime", "utmpx", "wordexp",
    // glibc's common top-level headers (features.h is included by every one)
    "features", "alloca", "malloc", "endian", "memory", "getopt", "error", "err", "libintl",
    "byteswap", "execinfo", "sysexits", "paths", "ucontext", "values", "link", "elf", "shadow",
    // what blockc's output includes
    "blockc", "blockc_rt", "cblas", "openblas_config",
};

// (2) Macro name spaces, each "PREFIX <header>" (PREFIX without its
// trailing underscore).  C11 7.31 and the macros of its headers; POSIX.1-2017
// 2.2.2 and the macros of its headers.
static const char *const k_spaces[] = {
    "CHAR limits.h", "SCHAR limits.h", "UCHAR limits.h", "SHRT limits.h", "USHRT limits.h",
    "LONG limits.h", "ULONG limits.h", "LLONG limits.h", "ULLONG limits.h", "MB limits.h",
    "SIZE stdint.h", "PTRDIFF stdint.h", "WCHAR stdint.h", "WINT stdint.h",
    "SIG_ATOMIC stdint.h", "RSIZE stdint.h", "BOOL limits.h", "BITINT limits.h",
    "FLT float.h", "DBL float.h", "LDBL float.h", "DECIMAL float.h", "FP math.h",
    "MATH math.h", "HUGE math.h", "LC locale.h", "FE fenv.h", "SIG signal.h",
    "ATOMIC stdatomic.h", "MEMORY_ORDER stdatomic.h", "TIME time.h", "CLOCKS_PER time.h",
    "TSS threads.h", "ONCE_FLAG threads.h", "CND threads.h", "MTX threads.h", "THRD threads.h",
    "EXIT stdlib.h", "RAND stdlib.h", "SEEK stdio.h", "FILENAME stdio.h", "FOPEN stdio.h",
    "TMP stdio.h", "VA stdarg.h",
    "AIO aio.h", "LIO aio.h", "CLD signal.h", "BUS signal.h", "FPE signal.h", "ILL signal.h",
    "POLL poll.h", "SEGV signal.h", "SI signal.h", "SA signal.h", "SS signal.h", "SV signal.h",
    "TRAP signal.h", "F fcntl.h", "O fcntl.h", "AT fcntl.h", "S sys/stat.h", "FD sys/select.h",
    "IN netinet/in.h", "IN6 netinet/in.h", "INADDR netinet/in.h", "IPPROTO netinet/in.h",
    "IPV6 netinet/in.h", "IP netinet/in.h", "TCP netinet/tcp.h", "IF net/if.h",
    "MAP sys/mman.h", "MCL sys/mman.h", "MS sys/mman.h", "PROT sys/mman.h",
    "POSIX unistd.h", "POSIX2 unistd.h", "MSG sys/socket.h", "SHUT sys/socket.h",
    "SO sys/socket.h", "SOCK sys/socket.h", "SOL sys/socket.h", "SCM sys/socket.h",
    "AF sys/socket.h", "PF sys/socket.h", "EAI netdb.h", "NI netdb.h", "CLOCK time.h",
    "TIMER time.h", "ITIMER sys/time.h", "RLIMIT sys/resource.h", "RLIM sys/resource.h",
    "RUSAGE sys/resource.h", "PRIO sys/resource.h", "PTHREAD pthread.h", "SCHED sched.h",
    "GLOB glob.h", "FNM fnmatch.h", "FTW ftw.h", "REG regex.h", "WRDE wordexp.h",
    "MM fmtmsg.h", "NL nl_types.h", "LOG syslog.h", "IPC sys/ipc.h", "SEM semaphore.h",
    "SHM sys/shm.h", "MQ mqueue.h", "ST sys/statvfs.h", "RTLD dlfcn.h",
    "ERA langinfo.h", "STDIN unistd.h", "STDOUT unistd.h", "STDERR unistd.h",
    "PATH limits.h", "NAME limits.h", "LINE limits.h", "ARG limits.h", "CHILD limits.h",
    "OPEN limits.h", "HOST_NAME limits.h", "LOGIN_NAME limits.h", "IOV limits.h",
    "PAGE limits.h", "TTY_NAME limits.h", "TZNAME limits.h", "ATEXIT limits.h",
    "BC_BASE limits.h", "BC_DIM limits.h", "BC_SCALE limits.h", "BC_STRING limits.h",
    "COLL_WEIGHTS limits.h", "EXPR_NEST limits.h", "RE_DUP limits.h", "SYMLOOP limits.h",
    "STREAM limits.h", "DELAYTIMER limits.h", "RTSIG limits.h", "SIGQUEUE limits.h",
    "SSIZE limits.h", "WORD limits.h", "LINK limits.h", "MAX_CANON limits.h",
    "MAX_INPUT limits.h", "PIPE limits.h", "CHARCLASS_NAME limits.h", "NGROUPS limits.h",
    "BLOCKC blockc.h", "BCRT blockc_rt.h",
};

// (3) Concrete macros outside those spaces, "NAME <header>".
static const char *const k_macros[] = {
    "M_E math.h", "M_LOG2E math.h", "M_LOG10E math.h", "M_LN2 math.h", "M_LN10 math.h",
    "M_PI math.h", "M_PI_2 math.h", "M_PI_4 math.h", "M_1_PI math.h", "M_2_PI math.h",
    "M_2_SQRTPI math.h", "M_SQRT2 math.h", "M_SQRT1_2 math.h", "R_OK unistd.h",
    "W_OK unistd.h", "X_OK unistd.h", "D_FMT langinfo.h", "D_T_FMT langinfo.h",
    "T_FMT langinfo.h", "T_FMT_AMPM langinfo.h", "AM_STR langinfo.h", "PM_STR langinfo.h",
    "P_ALL sys/wait.h", "P_PID sys/wait.h", "P_PGID sys/wait.h",
};

// The header's own names after <MODEL>_ (emit.c's contract header and
// aot.c's backward prototype); a test checks every shipped graph's header
// against this list.
static const char *const k_fixed[] = {
    "OK", "EINVAL", "EDIM", "ELEN", "ECACHE", "ESEQ", "ETOKEN", "EPOS", "IN_RANK", "IN_NUMEL", "IN_SHAPE", "IN_RT",
    "OUT_RANK", "OUT_NUMEL", "OUT_SHAPE", "OUT_RT", "NINPUTS", "NOUTPUTS", "NRT",
    "WORKSPACE_BYTES", "WORKSPACE_ALIGN", "NPARAMS", "PACKED_FLOATS", "PACKED_BYTES",
    "PACKED_ALIGN", "CACHE_BYTES", "CACHE_ALIGN", "STEP_LAST", "BACKWARD_WORKSPACE_BYTES", "WEIGHT_DTYPE",
    "WEIGHT_TYPE",
};

const char *const *bcN_fixed_names(int *n) {
  *n = (int)(sizeof k_fixed / sizeof k_fixed[0]);
  return k_fixed;
}

// The header in a "NAME header" entry, and whether NAME (up to the space)
// equals s[0..n).
static const char *entry_header(const char *e) { return strchr(e, ' ') + 1; }
static bool entry_is(const char *e, const char *s, size_t n) {
  return strlen(e) > n && e[n] == ' ' && !strncmp(e, s, n);
}

// (2): up is the upper-cased model name.
static const char *reserved_space(bc_ctx *ctx, const char *up) {
  size_t n = strlen(up);
  if (up[0] == '_')
    return bc_fmt(ctx, "starts with '_': its macros %s_... would be identifiers reserved to the "
                  "C implementation; rename the model", up);
  if (!strncmp(up, "INT", 3) || !strncmp(up, "UINT", 4))
    return bc_fmt(ctx, "would prefix the header's macros with %s_, and <stdint.h> reserves every "
                  "macro beginning with INT or UINT (INT8_MAX, UINT64_C, ...); rename the model", up);
  for (size_t i = 0; i < sizeof k_spaces / sizeof k_spaces[0]; i++) {
    const char *e = k_spaces[i];
    size_t pn = strcspn(e, " ");
    bool in = n >= pn && !strncmp(up, e, pn) && (up[pn] == '\0' || up[pn] == '_');
    bool lead = n < pn && !strncmp(up, e, n) && e[n] == '_';
    if (in || lead)
      return bc_fmt(ctx, "would prefix the header's macros with %s_, in the %.*s_ name space of "
                    "<%s>; rename the model", up, (int)pn, e, entry_header(e));
  }
  return NULL;
}

// (3): whether <up>_<rest> is a concrete system macro.
static const char *concrete(bc_ctx *ctx, const char *up, const char *rest, const char *dim) {
  const char *m = bc_fmt(ctx, "%s_%s", up, rest);
  for (size_t i = 0; m && i < sizeof k_macros / sizeof k_macros[0]; i++)
    if (entry_is(k_macros[i], m, strlen(m)))
      return dim ? bc_fmt(ctx, "with dim '%s' would define %s, a macro of <%s>; rename the "
                          "model or the dim", dim, m, entry_header(k_macros[i]))
                 : bc_fmt(ctx, "would define %s, a macro of <%s>; rename the model", m,
                          entry_header(k_macros[i]));
  return NULL;
}

const char *bcN_model_clash(bc_ctx *ctx, const bc_graph *g) {
  const char *model = g->model;
  char low[BC_MAX_IDENT + 1], up[BC_MAX_IDENT + 1];
  size_t n = strlen(model);
  if (n > BC_MAX_IDENT) n = BC_MAX_IDENT;
  for (size_t i = 0; i <= n; i++) {
    low[i] = (char)tolower((unsigned char)(i < n ? model[i] : 0));
    up[i] = (char)toupper((unsigned char)(i < n ? model[i] : 0));
  }
  for (size_t i = 0; i < sizeof k_headers / sizeof k_headers[0]; i++)
    if (!strcmp(low, k_headers[i]))
      return bc_fmt(ctx, "would be written as %s.h, the name of the system header <%s.h> (a "
                    "compiler given -I of the output directory would read the model's header "
                    "for it); rename the model", model, k_headers[i]);
  const char *why = reserved_space(ctx, up);
  for (size_t i = 0; !why && i < sizeof k_fixed / sizeof k_fixed[0]; i++)
    why = concrete(ctx, up, k_fixed[i], NULL);
  for (int d = 0; !why && d < g->ndims; d++) {
    why = concrete(ctx, up, g->dims[d].name, g->dims[d].name);
    if (!why) why = concrete(ctx, up, bc_fmt(ctx, "%s_MAX", g->dims[d].name), g->dims[d].name);
  }
  return why;
}
