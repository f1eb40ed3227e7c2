-- 014_reconcile.sql - reconciliation runs (SPEC 19): a gateway's bill of a
-- day against the local records.
--
-- Each run is a row, kept as it was served (body: the run's JSON), so a GET
-- answers the latest run byte for byte and earlier runs stay for the
-- operator.  A run is never changed: a retry of a pending bill is a new run.
CREATE TABLE reconciliations (
    id         INTEGER PRIMARY KEY,
    gateway    TEXT    NOT NULL CHECK (gateway = 'alipay' OR gateway = 'wechat'
                                       OR gateway = 'stripe' OR gateway = '2c2p'),
    bill_date  TEXT    NOT NULL CHECK (length(bill_date) = 10
                                       AND bill_date GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
    state      TEXT    NOT NULL CHECK (state = 'pending' OR state = 'done' OR state = 'failed'),
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX reconciliations_day ON reconciliations (gateway, bill_date, id);
CREATE TRIGGER reconciliations_immutable_u BEFORE UPDATE ON reconciliations
BEGIN
    SELECT RAISE(ABORT, 'a reconciliation run never changes');
END;
