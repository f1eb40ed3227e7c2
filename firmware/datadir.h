/*
 * datadir.h - what payterm keeps in data_dir beside the database.
 *
 * payterm.lock: one daemon per database (SPEC 3); serve holds it while it
 * runs, and so does `payterm init --new-database`.
 *
 * payterm.marker: this data_dir holds a database (SPEC 18).  Written once
 * the database is there, kept for good.  A data_dir with the marker whose
 * database is missing or empty lost it - an rm, a failed restore, a file
 * system repaired into an empty file - and a new, empty database in its
 * place would drop the offline queue and every stored answer without a
 * word.  So serve and init refuse such a data_dir until `payterm init
 * --new-database` says that a new database is wanted.  The marker is not
 * named payterm.db-something, so that `rm payterm.db*` leaves it.
 *
 * SQLite's database only: a PostgreSQL store server keeps its own data.
 */
#ifndef PT_DATADIR_H
#define PT_DATADIR_H

#include <stddef.h>

#define PT_DATADIR_LOCK "payterm.lock"
#define PT_DATADIR_MARKER "payterm.marker"

/*
 * Takes data_dir's lock (flock, held as long as *fd_out is open) and writes
 * this process's PID into it.  PT_OK; PT_EBUSY when another process holds
 * it (err names its PID); PT_EIO when the file cannot be used.
 */
int pt_datadir_lock(const char *data_dir, int *fd_out, char *err, size_t errlen);

/*
 * Before db_path is opened (and so created): PT_OK unless data_dir has the
 * marker and the database is missing or empty (no payterm schema in it):
 * then PT_EGONE, with err naming the database, the marker and `payterm init
 * --new-database`.  A file that is there but cannot be read is left to the
 * open that follows, which says what is wrong with it.
 */
int pt_datadir_check_database(const char *data_dir, const char *db_path, char *err, size_t errlen);

/*
 * For `payterm init --new-database`, with the lock held and before db_path
 * is opened: when the database is missing or empty, the WAL and shared
 * memory left by the one that is gone would be read as part of the new one
 * (SQLite cannot tell them apart): the WAL is moved aside (kept, renamed
 * with the time), the shared memory index removed.  *is_new: 1 when a new
 * database is to be created, 0 when the one there holds data (it is kept
 * and migrated as ever).  What it did is printed on stdout.
 */
int pt_datadir_new_database(const char *db_path, int *is_new, char *err, size_t errlen);

/*
 * After the database was opened (created and migrated): writes the marker if it
 * is missing (a new data_dir, or one an older payterm created), durably:
 * written, synced, renamed into place, the directory synced.
 */
int pt_datadir_mark(const char *data_dir, char *err, size_t errlen);

#endif
