-- 006_cancel_requested.sql - a cancel never races its own charge (SPEC 18;
-- sql/010_cancel_requested.sql says why).  The sync engine carries a
-- requested cancel out once the charge's own request has an outcome, and
-- never sends a charge whose cancel was requested.
ALTER TABLE charges ADD COLUMN cancel_requested pt_flag NOT NULL DEFAULT 0;
