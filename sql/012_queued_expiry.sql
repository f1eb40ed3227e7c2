-- 012_queued_expiry.sql - queued charges found by age, not by a walk.
--
-- A queued charge expires offline.max_age_s after it was created (lane
-- time).  While its gateway is unreachable the sync pass found the expired
-- ones by reading every queued charge, every pass: with 50 000 queued, a
-- lane waiting out an outage spent 2-3 % of a core reading them (issue 38).
-- This index holds only the charges waiting in the queue (INIT, accepted
-- offline: every INIT charge that is committed), by gateway, method and
-- age, so a pass asks for the expired ones, and for the next deadline, in
-- one range each.  A charge sent online while the customer waits never
-- enters it (it is PROCESSING in the commit that creates it).
CREATE INDEX charges_queued ON charges (gateway, method, created_at)
    WHERE state = 'INIT' AND offline_accepted = 1;
