/*
 * err.c - messages and names for the pt_err codes declared in err.h.
 */
#include "err.h"

const char *pt_strerror(int rc)
{
    switch (rc) {
#define PT__ERR_MSG(name, value, msg)                                                              \
    case value:                                                                                    \
        return msg;
        PT_ERRNO_MAP(PT__ERR_MSG)
#undef PT__ERR_MSG
    }
    return "unknown error";
}

const char *pt_errname(int rc)
{
    switch (rc) {
#define PT__ERR_NAME(name, value, msg)                                                             \
    case value:                                                                                    \
        return #name;
        PT_ERRNO_MAP(PT__ERR_NAME)
#undef PT__ERR_NAME
    }
    return "EUNKNOWN";
}
