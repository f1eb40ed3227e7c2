/*
 * testutil.h - small helpers shared by the unit tests.
 */
#ifndef PT_TESTUTIL_H
#define PT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Creates a fresh temporary directory; returns its path (static storage
 * per call site is the caller's job: copy it). Aborts the test on failure. */
void pt_test_tmpdir(char *out, size_t outlen);

/* Removes a directory tree (best effort). */
void pt_test_rmtree(const char *path);

/* Writes text to path with the given mode. */
void pt_test_write_file(const char *path, const char *text, unsigned mode);

/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *pt_test_read_file(const char *path, size_t *len);

#endif
