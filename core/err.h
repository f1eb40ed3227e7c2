/*
 * err.h - the one error vocabulary of payterm.
 *
 * Every function in core/, platform/ and firmware/ that can fail returns an
 * int: PT_OK (0) on success or one of the negative PT_E* codes below.
 * Library codes (SQLite, mbedTLS, libcurl, libmicrohttpd, errno) are
 * translated to these at the boundary where they appear, so callers above
 * that boundary only ever see pt_err values.  Names and messages come from
 * one X-macro table so they can never drift apart.
 */
#ifndef PT_ERR_H
#define PT_ERR_H

/* X(NAME, value, "message") */
#define PT_ERRNO_MAP(X)                                                                            \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EIO, -3, "storage I/O error")                                                                \
    X(EFULL, -4, "storage full")                                                                   \
    X(EBUSY, -5, "storage busy")                                                                   \
    X(ECORRUPT, -6, "database corrupt")                                                            \
    X(ETOONEW, -7, "database schema is newer than this binary")                                    \
    X(ENOTFOUND, -8, "not found")                                                                  \
    X(EEXIST, -9, "already exists")                                                                \
    X(ESTATE, -10, "illegal state transition")                                                     \
    X(ECONFIG, -11, "configuration error")                                                         \
    X(EPERM, -12, "permission denied")                                                             \
    X(ECRYPTO, -13, "cryptographic operation failed")                                              \
    X(ESIG, -14, "signature verification failed")                                                  \
    X(EPARSE, -15, "malformed input")                                                              \
    X(ERANGE, -16, "value out of range")                                                           \
    X(ETOOBIG, -17, "input too large")                                                             \
    X(ENOTSENT, -18, "request not sent")                                                           \
    X(ENOANSWER, -19, "request sent, no answer")                                                   \
    X(EUNSUPPORTED, -20, "not supported")                                                          \
    X(ESTORAGE, -21, "storage error")                                                              \
    X(ECANCELED, -22, "canceled")                                                                  \
    X(ESYS, -23, "system call failed")                                                             \
    X(EAGAIN, -24, "to be done where waiting is allowed")                                          \
    X(ECLOCK, -25, "the wall clock is not trusted yet")                                            \
    X(EKEY, -26, "the configured key cannot sign")                                                 \
    X(EGONE, -27, "database file removed or replaced")

enum pt_err {
#define PT__ERR_ENUM(name, value, msg) PT_##name = (value),
    PT_ERRNO_MAP(PT__ERR_ENUM)
#undef PT__ERR_ENUM
};

/* Returns a static, human-readable message for rc; never NULL. */
const char *pt_strerror(int rc);

/* Returns the symbolic name ("EIO", "OK", ...) for rc; never NULL. */
const char *pt_errname(int rc);

#endif
