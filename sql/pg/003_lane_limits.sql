-- 003_lane_limits.sql - the offline limits per lane, and exact.
--
-- The offline limits are in each lane's own configuration (offline.*), as
-- on a standalone lane and as on Stripe Terminal's and Adyen's readers: they
-- bound what that lane queued.  Summed over the shop, lanes configured
-- differently would refuse each other's charges, and lanes inserting at the
-- same instant could each take the last place (a statement sees only what
-- committed before it began).  So:
--   * each charge names the lane that queued it (charges.lane, from the
--     session's payterm.lane, set by store_pg.c when it connects);
--   * the figures are kept per lane, and per connection slot as in 002
--     (a lane's sync engine counting out another lane's charge writes its
--     own slot of that lane: no row lock shared with the inserting lane);
--   * a lane's charges enter the queue only after reading its figures
--     through payterm_lane_queue(): it takes a transaction advisory lock of
--     the lane (two-key form, first key 73020626) and reads with a snapshot
--     taken after it (each statement of a VOLATILE function takes its own),
--     so two requests of one lane cannot both take its last place.  Lanes
--     never wait for each other; a lane's requests wait for each other's
--     commits there only.
ALTER TABLE charges ADD COLUMN lane TEXT NOT NULL DEFAULT '';
ALTER TABLE offline_queue ADD COLUMN lane TEXT NOT NULL DEFAULT '';
ALTER TABLE offline_queue DROP CONSTRAINT offline_queue_pkey;
ALTER TABLE offline_queue ADD PRIMARY KEY (lane, currency, slot);

CREATE OR REPLACE FUNCTION offline_queue_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s INTEGER := coalesce(nullif(current_setting('payterm.slot', true), '')::integer,
                          1024 + pg_backend_pid() % 64);
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state = 'INIT' THEN
        INSERT INTO offline_queue (lane, slot, currency, count, total)
            VALUES (OLD.lane, s, OLD.currency, -1, -OLD.amount)
            ON CONFLICT (lane, currency, slot) DO UPDATE
            SET count = offline_queue.count - 1, total = offline_queue.total - OLD.amount;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = 'INIT' THEN
        INSERT INTO offline_queue (lane, slot, currency, count, total)
            VALUES (NEW.lane, s, NEW.currency, 1, NEW.amount)
            ON CONFLICT (lane, currency, slot) DO UPDATE
            SET count = offline_queue.count + 1, total = offline_queue.total + NEW.amount;
    END IF;
    RETURN NULL;
END $$;

-- A lane's queued charges (all currencies) and the total of one currency,
-- read under the lane's lock, which is held until the transaction ends.
CREATE FUNCTION payterm_lane_queue(lane_id TEXT, cur TEXT, OUT queued BIGINT, OUT total BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(73020626, hashtext(lane_id));
    SELECT coalesce(sum(q.count), 0), coalesce(sum(q.total) FILTER (WHERE q.currency = cur), 0)
        INTO queued, total FROM offline_queue q WHERE q.lane = lane_id;
END $$;
