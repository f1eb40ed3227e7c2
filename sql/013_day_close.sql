-- 013_day_close.sql - X and Z reports (SPEC 19): every final charge and
-- refund in exactly one closed day.
--
-- A charge or refund carries z, the number of the Z report it is in, NULL
-- until a close takes it.  A close is one write transaction: it sets z on
-- every final row that has none, then adds up the rows with that z and
-- stores the report.  Final states never change (sql/001, sql/006), so a
-- row is in the report that was open when its final state was committed -
-- commit order, whatever the clock said - and no row is in two.  Nothing
-- is written per charge: a row's z is written once, at the close.
ALTER TABLE charges ADD COLUMN z INTEGER CHECK (z IS NULL OR z >= 1);
ALTER TABLE refunds ADD COLUMN z INTEGER CHECK (z IS NULL OR z >= 1);

CREATE TRIGGER charges_z_once BEFORE UPDATE OF z ON charges
    WHEN OLD.z IS NOT NULL AND NEW.z IS NOT OLD.z
BEGIN
    SELECT RAISE(ABORT, 'a charge in a closed Z report stays in it');
END;
CREATE TRIGGER refunds_z_once BEFORE UPDATE OF z ON refunds
    WHEN OLD.z IS NOT NULL AND NEW.z IS NOT OLD.z
BEGIN
    SELECT RAISE(ABORT, 'a refund in a closed Z report stays in it');
END;

-- The closed reports, as served: body is the report's JSON byte for byte
-- (hash included), hash its SHA-256 over the canonical JSON without hash,
-- chained by prev_hash.  A report never changes and is never removed.
CREATE TABLE z_reports (
    z          INTEGER PRIMARY KEY CHECK (z >= 1),
    lane       TEXT    NOT NULL,
    from_at    INTEGER NOT NULL,
    to_at      INTEGER NOT NULL,
    hash       TEXT    NOT NULL CHECK (length(hash) = 64),
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER z_reports_immutable_u BEFORE UPDATE ON z_reports
BEGIN
    SELECT RAISE(ABORT, 'a Z report never changes');
END;
CREATE TRIGGER z_reports_immutable_d BEFORE DELETE ON z_reports
BEGIN
    SELECT RAISE(ABORT, 'a Z report never changes');
END;
