-- 004_params_in_the_row.sql - "same parameters" read from the charge itself.
--
-- A retry of an order under another Idempotency-Key gets the charge when its
-- parameters are the ones the order was created with, 409 otherwise.  That
-- used to be decided by params_hash, a SHA-256 of the canonical parameter
-- text, computed for every new charge.  Every parameter is a column of the
-- charge already, and none of them ever changes: the intake now rebuilds
-- the canonical text from the row when (rarely) the order exists, and a new
-- charge's durable commit saves the hash and its 32 bytes.

ALTER TABLE charges DROP COLUMN params_hash;
