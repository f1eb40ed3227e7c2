-- 008_queued_expiry.sql - queued charges found by age, not by a walk
-- (sql/012 says why): the charges waiting in the queue, by gateway, method
-- and age.
CREATE INDEX charges_queued ON charges (gateway, method, created_at)
    WHERE state = 'INIT' AND offline_accepted = 1;
