-- 002_offline_queue.sql - the offline queue's figures without a scan.
--
-- The offline limits need the number and the amount of the queued (INIT)
-- charges at every new charge.  Counted from the charges, that is a walk of
-- the whole queue each time (a long outage: thousands of rows per charge).
-- SQLite keeps one row per currency (sql/002); here many connections of many
-- lanes insert at once, and one row per currency would be a lock they all
-- queue on until their commits.  So each connection counts into a slot of
-- its own: store_pg.c takes a free slot number under a session advisory
-- lock when it connects and names it in the setting payterm.slot.  The
-- figures are the sums over the slots.  A slot may go below zero (a charge
-- counted in by one connection and out by another): only the sums mean
-- anything.
--
-- A charge enters the queue in the statement that inserts it (store_pg.c:
-- CHARGE_INSERT and CHARGE_QUEUE_GUARDED count it in themselves: a row
-- trigger calling PL/pgSQL took about a fifth of the guarded new charge's
-- server time, measured); it leaves, or comes back, through the triggers
-- below.
CREATE TABLE offline_queue (
    slot     INTEGER NOT NULL,
    currency TEXT    NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    count    BIGINT  NOT NULL,
    total    BIGINT  NOT NULL,
    PRIMARY KEY (currency, slot)
);

INSERT INTO offline_queue (slot, currency, count, total)
    SELECT 0, currency, count(*), sum(amount) FROM charges WHERE state = 'INIT' GROUP BY currency;

CREATE FUNCTION offline_queue_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s INTEGER := coalesce(nullif(current_setting('payterm.slot', true), '')::integer,
                          1024 + pg_backend_pid() % 64);
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state = 'INIT' THEN
        INSERT INTO offline_queue (slot, currency, count, total) VALUES (s, OLD.currency, -1, -OLD.amount)
            ON CONFLICT (currency, slot) DO UPDATE
            SET count = offline_queue.count - 1, total = offline_queue.total - OLD.amount;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = 'INIT' THEN
        INSERT INTO offline_queue (slot, currency, count, total) VALUES (s, NEW.currency, 1, NEW.amount)
            ON CONFLICT (currency, slot) DO UPDATE
            SET count = offline_queue.count + 1, total = offline_queue.total + NEW.amount;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER offline_queue_update AFTER UPDATE OF state, currency, amount ON charges
    FOR EACH ROW WHEN (OLD.state = 'INIT' OR NEW.state = 'INIT') EXECUTE FUNCTION offline_queue_count();
CREATE TRIGGER offline_queue_delete AFTER DELETE ON charges
    FOR EACH ROW WHEN (OLD.state = 'INIT') EXECUTE FUNCTION offline_queue_count();
