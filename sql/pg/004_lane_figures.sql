-- 004_lane_figures.sql - the offline limits without counters.
--
-- 002 and 003 kept the queue's figures in counter rows, written by every
-- new charge and by every move in or out of INIT: one more row written per
-- charge, under a lane lock taken at every charge - together about a third
-- of the guarded new charge's time at the server (measured).  Now:
--   * the figures are read from the charges themselves, through the index
--     below (a lane's queue is bounded by its offline.max_count);
--   * the usual path reads them in its transaction through
--     payterm_lane_queue(), under the lane's advisory lock as before, so
--     two requests of a lane cannot both take its last place;
--   * the one-statement guarded charge reads none: its lane's daemon keeps
--     an upper bound of them, and reads them again only when that bound
--     would refuse (core/store_pg.c, "the lane's offline figures").
DROP TRIGGER offline_queue_update ON charges;
DROP TRIGGER offline_queue_delete ON charges;
DROP FUNCTION offline_queue_count();
DROP TABLE offline_queue;
DROP INDEX charges_queued;

-- A lane's charges in the queue, and those on their first send (which come
-- back to it when they could not be sent).
CREATE INDEX charges_lane_queue ON charges (lane, currency) INCLUDE (amount, state, created_at)
    WHERE state IN ('INIT', 'PROCESSING');

CREATE OR REPLACE FUNCTION payterm_lane_queue(lane_id TEXT, cur TEXT, OUT queued BIGINT, OUT total BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(73020626, hashtext(lane_id));
    SELECT count(*), coalesce(sum(c.amount) FILTER (WHERE c.currency = cur), 0)
        INTO queued, total FROM charges c WHERE c.lane = lane_id AND c.state = 'INIT';
END $$;
