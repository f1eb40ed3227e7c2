-- 010_cancel_requested.sql - a cancel never races its own charge (SPEC 18).
--
-- A cancel that arrives while its charge is being sent (PROCESSING: the
-- charge's own request is out, or it is marked in a run) must not send a
-- close or a reverse beside that request: the pay may succeed first, and a
-- reverse after it gives back money for goods already released.  Nor may it
-- be dropped (answered 202 and forgotten while the link is down).  The
-- cancel is recorded here instead, durably, in the transaction that stores
-- its answer; the sync engine carries it out once the charge's own request
-- has an outcome.  A charge whose cancel was requested is never sent (the
-- store refuses it PROCESSING), and the flag stays as a record.
ALTER TABLE charges ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1));
