// status.c — ties the public status codes (blockc.h) to the internal ones
// (bc.h).  The embedding API returns bc_status values unchanged, so the two
// sets must agree number for number; a change to either fails the build
// here instead of silently mistranslating errors.
#include "bc.h"
#include "blockc.h"

_Static_assert(BLOCKC_OK == (int)BC_OK, "BLOCKC_OK != BC_OK");
_Static_assert(BLOCKC_EINPUT == (int)BC_EINPUT, "BLOCKC_EINPUT != BC_EINPUT");
_Static_assert(BLOCKC_EUSAGE == (int)BC_EUSAGE, "BLOCKC_EUSAGE != BC_EUSAGE");
_Static_assert(BLOCKC_EIO == (int)BC_EIO, "BLOCKC_EIO != BC_EIO");
_Static_assert(BLOCKC_ENOMEM == (int)BC_ENOMEM, "BLOCKC_ENOMEM != BC_ENOMEM");
_Static_assert(BLOCKC_EINTERNAL == (int)BC_EINTERNAL, "BLOCKC_EINTERNAL != BC_EINTERNAL");
