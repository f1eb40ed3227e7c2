-- 008_refund_pages.sql - fewer b-tree pages in a new refund's durable commit.
--
-- A guarded new refund wrote about eight pages where a charge writes six:
-- besides the key, the refund row, its refund_id and charge_id indexes and
-- the audit row, it added an entry to refunds_active and rewrote the
-- charge's row for its `refunds` counter (a trigger).  Each page is one more
-- WAL frame through fsync and SQLite's CPU on it: the refund measured
-- 1.31-1.36x the bare commit against the charge's 1.15x.
--
-- * refunds_active goes.  The refund work list is found as the charges'
--   is (003): in id order from the lowest refund that is not final yet - a
--   refund never leaves a final state and new refunds get higher ids, so
--   everything below that point stays final; a short range of the table.
--   (A withdrawn refund's row is deleted and its id may be given again:
--   after a withdrawal the store reads the floor from the start once,
--   core/store.c refund_floor().)
-- * The `refunds` counter goes: a charge's number of refunds is counted
--   when the charge is read, from refunds_by_charge (one seek; no refunds,
--   no entries).  amount_refunded stays a column: it changes only when a
--   refund becomes SUCCESS, in that commit, not in the guarded one.
-- * refunds_review: the refunds waiting for an operator, for /v1/status
--   and /metrics without reading every refund (empty until one is raised).
DROP INDEX refunds_active;
DROP TRIGGER refunds_count;
DROP TRIGGER refunds_uncount;
ALTER TABLE charges DROP COLUMN refunds;
CREATE INDEX refunds_review ON refunds (id) WHERE review = 1;
