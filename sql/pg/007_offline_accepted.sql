-- 007_offline_accepted.sql - a lane's offline limits count everything it
-- accepted offline and has not seen final (SPEC 18; sql/011 says why):
-- INIT, PROCESSING, PENDING and UNKNOWN charges it answered 202 as queued,
-- whichever lane is sending them.  Charges sent online while the customer
-- waited never count.
ALTER TABLE charges ADD COLUMN offline_accepted pt_flag NOT NULL DEFAULT 0;
UPDATE charges SET offline_accepted = 1 WHERE state = 'INIT';

DROP INDEX charges_lane_queue;
CREATE INDEX charges_lane_queue ON charges (lane, currency) INCLUDE (amount, state, created_at)
    WHERE offline_accepted = 1 AND state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN');

CREATE OR REPLACE FUNCTION payterm_lane_queue(lane_id TEXT, cur TEXT, OUT queued BIGINT, OUT total BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(73020626, hashtext(lane_id));
    SELECT count(*), coalesce(sum(c.amount) FILTER (WHERE c.currency = cur), 0)
        INTO queued, total FROM charges c
        WHERE c.lane = lane_id AND c.offline_accepted = 1
          AND c.state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN');
END $$;
