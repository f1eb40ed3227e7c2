-- 003_no_active_index.sql - the work list without an index of its own.
--
-- charges_active indexed every non-final charge so that the sync engine
-- could find its work and the intake could add up the offline queue.  The
-- queue's figures are kept in offline_queue now (002), and the work list is
-- found in id order from the lowest charge that is not final yet (a charge
-- never leaves a final state, and new charges always get higher ids, so
-- everything below that point stays final): a short range of the table's
-- own b-tree.  Without the index, a new charge's durable commit writes one
-- b-tree page less, and each state change one index entry less.

DROP INDEX charges_active;
