/*
 * migrations.h - the schema migrations from sql/, embedded at build time.
 *
 * cmake/embed_sql.cmake generates the table from sql/NNN_*.sql; migration i
 * (1-based) brings a database from user_version i-1 to i.
 */
#ifndef PT_MIGRATIONS_H
#define PT_MIGRATIONS_H

struct pt_migration {
    int version;
    const char *name;
    const char *sql;
};

extern const struct pt_migration pt_migrations[];
extern const int pt_migrations_count;

/* The PostgreSQL store's migrations, from sql/pg/ (built with PT_WITH_PG):
 * migration i is row version i of payterm_schema. */
extern const struct pt_migration pt_pg_migrations[];
extern const int pt_pg_migrations_count;

#endif
