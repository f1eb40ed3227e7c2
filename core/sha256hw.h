/*
 * sha256hw.h - SHA-256 on the CPU's SHA instructions (x86 SHA extensions,
 * ARMv8 cryptography extension), for crypto.c.
 */
#ifndef PT_SHA256HW_H
#define PT_SHA256HW_H

#include <stddef.h>

/* What this CPU hashes with ("x86 SHA extensions", ...), or NULL when it has
 * no SHA instructions payterm can use: then pt_sha256hw() must not be
 * called. */
const char *pt_sha256hw_name(void);

/* SHA-256 of len bytes at data. */
void pt_sha256hw(const void *data, size_t len, unsigned char out[32]);

#endif
