-- 016_archive.sql - retention (SPEC 19): old, closed, reconciled records
-- move to monthly archive files; the live database keeps their ids.
--
-- A charge leaves the live database with its refunds, its audit trail and
-- its fulfilment events, once it and every refund of it are final, in a
-- closed Z report, reconciled and older than retention_days.  The rows go
-- into data_dir/archive/YYYY-MM.db first (committed there), then a live
-- transaction records the ids here and deletes the rows: a power cut
-- between the two leaves the rows in both, and the next pass copies them
-- again (nothing changes: the same rows) and deletes them.
--
-- An archived order_id or refund_id is never used again: it is the
-- gateway's idempotency key (sql/001, sql/006), and GET finds the record
-- through this table.  The month is the archive file's.
CREATE TABLE archived (
    kind   TEXT NOT NULL CHECK (kind = 'charge' OR kind = 'refund'),
    ext_id TEXT NOT NULL,
    month  TEXT NOT NULL CHECK (length(month) = 7
                                AND month GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]'),
    PRIMARY KEY (kind, ext_id)
) WITHOUT ROWID;
CREATE TRIGGER archived_immutable_u BEFORE UPDATE ON archived
BEGIN
    SELECT RAISE(ABORT, 'an archived id stays archived');
END;
CREATE TRIGGER archived_immutable_d BEFORE DELETE ON archived
BEGIN
    SELECT RAISE(ABORT, 'an archived id stays archived');
END;

CREATE TRIGGER charges_not_archived BEFORE INSERT ON charges
    WHEN EXISTS (SELECT 1 FROM archived WHERE kind = 'charge' AND ext_id = NEW.order_id)
BEGIN
    SELECT RAISE(ABORT, 'order_id_archived');
END;
CREATE TRIGGER refunds_not_archived BEFORE INSERT ON refunds
    WHEN EXISTS (SELECT 1 FROM archived WHERE kind = 'refund' AND ext_id = NEW.refund_id)
BEGIN
    SELECT RAISE(ABORT, 'refund_id_archived');
END;

-- The trail stays append-only but for a charge being archived (its id
-- recorded above, in the same transaction).
DROP TRIGGER charge_events_append_only_d;
CREATE TRIGGER charge_events_append_only_d BEFORE DELETE ON charge_events
    WHEN NOT EXISTS (SELECT 1 FROM charges c, archived a WHERE c.id = OLD.charge_id
                     AND a.kind = 'charge' AND a.ext_id = c.order_id)
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;

-- A charge's review events, found when it is archived (its other events
-- are found by events_once_per_charge and events_once_per_refund).  Only a
-- raised review writes here: nothing per charge.
CREATE INDEX events_review ON events (charge_id) WHERE type = 'charge.review';
