/*
 * walvfs.h - a VFS that writes each WAL commit with one pwrite() (walvfs.c).
 */
#ifndef PT_WALVFS_H
#define PT_WALVFS_H

#define PT_WALVFS_NAME "payterm-wal"

/* Registers the VFS (not as the default) once per process; safe to call
 * again.  Returns an SQLite result code.  Not thread-safe with itself: call
 * it before connections are opened from several threads. */
int pt_walvfs_register(void);

#endif
