-- 007_audit_rowid.sql - the audit trail keyed by one integer.
--
-- charge_events was a WITHOUT ROWID table keyed by (charge_id, seq).  Rows
-- of a new charge always go to the right end of that b-tree, but SQLite's
-- quick append (a new page, no redistribution) exists only for rowid tables:
-- in a WITHOUT ROWID b-tree every page that fills is balanced with its
-- siblings, writing two or three pages into the commit instead of one.  The
-- audit row was a third of a page per charge in every guarded new charge's
-- durable commit, more than any other table's.
--
-- The trail is now a rowid table whose key is the pair in one integer,
--   id = charge_id * 2^32 + seq,
-- so a charge's trail is still one range of the one b-tree (ids from
-- charge_id * 2^32 + 1 up) and a new charge's first row is an append.
-- charge_id and seq stay as columns (queries and readers by hand use them);
-- the CHECK keeps the three in agreement.  2^32 rows per charge cannot be
-- reached before the disk is full; charge ids stay below 2^31 (two billion
-- charges on one lane) for the product to stay a 64-bit integer.
CREATE TABLE charge_events_new (
    id          INTEGER PRIMARY KEY,
    charge_id   INTEGER NOT NULL REFERENCES charges (id),
    seq         INTEGER NOT NULL CHECK (seq BETWEEN 1 AND 4294967295),
    from_state  TEXT,
    to_state    TEXT,
    cause       TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    refused     INTEGER NOT NULL DEFAULT 0 CHECK (refused IN (0, 1)),
    detail      TEXT,
    created_at  INTEGER NOT NULL,
    refund_id   TEXT,
    CHECK (id = charge_id * 4294967296 + seq)
);
INSERT INTO charge_events_new (id, charge_id, seq, from_state, to_state, cause, actor, refused,
                               detail, created_at, refund_id)
    SELECT charge_id * 4294967296 + seq, charge_id, seq, from_state, to_state, cause, actor,
           refused, detail, created_at, refund_id
    FROM charge_events ORDER BY charge_id, seq;
-- DROP TABLE fires no DELETE trigger; the append-only triggers go with it.
DROP TABLE charge_events;
ALTER TABLE charge_events_new RENAME TO charge_events;
CREATE TRIGGER charge_events_append_only_u BEFORE UPDATE ON charge_events
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;
CREATE TRIGGER charge_events_append_only_d BEFORE DELETE ON charge_events
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;
