-- 010_reconcile.sql - reconciliation runs (SPEC 19): a gateway's bill of a
-- day against the local records.
--
-- A gateway's bill is the merchant's, so on a shared store the runs are
-- the shop's, not a lane's: every lane reads the same latest run, and lane
-- names the one that ran it.  A run is never changed.
CREATE TABLE reconciliations (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gateway    pt_gateway NOT NULL,
    bill_date  TEXT   NOT NULL CHECK (bill_date ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'),
    state      TEXT   NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
    body       TEXT   NOT NULL,
    lane       TEXT   NOT NULL DEFAULT coalesce(current_setting('payterm.lane', true), ''),
    created_at BIGINT NOT NULL
);
CREATE INDEX reconciliations_day ON reconciliations (gateway, bill_date, id);
CREATE FUNCTION reconciliations_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a reconciliation run never changes' USING ERRCODE = 'PT004';
END $$;
CREATE TRIGGER reconciliations_immutable BEFORE UPDATE ON reconciliations
    FOR EACH ROW EXECUTE FUNCTION reconciliations_immutable();
