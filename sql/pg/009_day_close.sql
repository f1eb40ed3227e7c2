-- 009_day_close.sql - X and Z reports (SPEC 19), per lane: sql/013 says how.
--
-- A refund names the lane that took it, as a charge does (charges.lane):
-- the refunds there before this migration are their charges' lane's.
-- Each lane's reports are numbered and chained on their own; a lane's
-- closes take a transaction advisory lock of the lane (two-key form, first
-- key 73020627), so two closes of one lane are one after the other, and a
-- close never waits for another lane.  A close's UPDATE skips a row whose
-- final state is not yet committed (READ COMMITTED): it is in the next Z.
ALTER TABLE refunds ADD COLUMN lane TEXT NOT NULL DEFAULT '';
UPDATE refunds r SET lane = c.lane FROM charges c WHERE c.id = r.charge_id;
-- (A session that is no lane's - a DBA's psql - writes '', as charges.lane.)
ALTER TABLE refunds ALTER COLUMN lane SET DEFAULT coalesce(current_setting('payterm.lane', true), '');

ALTER TABLE charges ADD COLUMN z BIGINT CHECK (z IS NULL OR z >= 1);
ALTER TABLE refunds ADD COLUMN z BIGINT CHECK (z IS NULL OR z >= 1);

CREATE FUNCTION z_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.z IS NOT NULL AND NEW.z IS DISTINCT FROM OLD.z THEN
        RAISE EXCEPTION 'a row in a closed Z report stays in it' USING ERRCODE = 'PT004';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER charges_z_once BEFORE UPDATE OF z ON charges
    FOR EACH ROW EXECUTE FUNCTION z_once();
CREATE TRIGGER refunds_z_once BEFORE UPDATE OF z ON refunds
    FOR EACH ROW EXECUTE FUNCTION z_once();

CREATE TABLE z_reports (
    lane       TEXT   NOT NULL,
    z          BIGINT NOT NULL CHECK (z >= 1),
    from_at    BIGINT NOT NULL,
    to_at      BIGINT NOT NULL,
    hash       TEXT   NOT NULL CHECK (length(hash) = 64),
    body       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (lane, z)
);
CREATE FUNCTION z_reports_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a Z report never changes' USING ERRCODE = 'PT004';
END $$;
CREATE TRIGGER z_reports_immutable BEFORE UPDATE OR DELETE ON z_reports
    FOR EACH ROW EXECUTE FUNCTION z_reports_immutable();
