-- 005_first_audit_entry.sql - a queued charge's first audit entry, kept in
-- its own row.
--
-- The one-statement guarded charge (store_pg.c, CHARGE_QUEUE_GUARDED)
-- wrote the charge and, of the same moment, its first audit row (to INIT,
-- cause 'created', its actor): a second row and two more index entries per
-- charge, about a tenth of its time at the server (measured).  Now it
-- names the actor in the charge's created_by, and the trail as it is read
-- (store_pg.c, AUDIT_LIST) begins with that entry: to INIT, cause
-- 'created', by created_by, at the charge's created_at.  NULL: the trail
-- holds its own first row (the usual path, and every charge from before).
-- Written once, with the row, and never changed: the trail stays
-- append-only.
ALTER TABLE charges ADD COLUMN created_by TEXT;

CREATE FUNCTION charges_created_by_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.created_by IS DISTINCT FROM OLD.created_by THEN
        RAISE EXCEPTION 'charges.created_by is the first audit entry: it does not change'
            USING ERRCODE = 'PT004';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER charges_created_by_final BEFORE UPDATE OF created_by ON charges
    FOR EACH ROW EXECUTE FUNCTION charges_created_by_final();
