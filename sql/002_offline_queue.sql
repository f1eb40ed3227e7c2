-- 002_offline_queue.sql - the offline queue's figures, kept by triggers.
--
-- Before a charge joins the offline queue the intake checks the limits:
-- how many charges are queued (offline.max_count) and their total in the
-- charge's currency (offline.limits.<CUR>.max_total).  Adding them up from
-- the charges took time proportional to the queue, in every new charge's
-- write transaction.  These rows hold the sums instead; the triggers below
-- change them in the same statement that changes a charge, so they are
-- exactly as durable and as current as the charges themselves.
--
-- Queued = state INIT (taken, not sent yet).

CREATE TABLE offline_queue (
    currency TEXT    PRIMARY KEY
                     CHECK (length(currency) = 3 AND currency GLOB '[A-Z][A-Z][A-Z]'),
    count    INTEGER NOT NULL CHECK (count >= 0),
    total    INTEGER NOT NULL CHECK (total >= 0)
) WITHOUT ROWID;

INSERT INTO offline_queue (currency, count, total)
    SELECT currency, count(*), sum(amount) FROM charges WHERE state = 'INIT' GROUP BY currency;

CREATE TRIGGER offline_queue_insert AFTER INSERT ON charges WHEN NEW.state = 'INIT'
BEGIN
    INSERT INTO offline_queue (currency, count, total) VALUES (NEW.currency, 1, NEW.amount)
        ON CONFLICT (currency) DO UPDATE SET count = count + 1, total = total + excluded.total;
END;

-- An update may take a charge out of the queue (sent, canceled, expired),
-- put it back (provably not sent), or both at once (INIT -> INIT).
CREATE TRIGGER offline_queue_leave AFTER UPDATE OF state, currency, amount ON charges
    WHEN OLD.state = 'INIT'
BEGIN
    UPDATE offline_queue SET count = count - 1, total = total - OLD.amount
        WHERE currency = OLD.currency;
END;
CREATE TRIGGER offline_queue_enter AFTER UPDATE OF state, currency, amount ON charges
    WHEN NEW.state = 'INIT'
BEGIN
    INSERT INTO offline_queue (currency, count, total) VALUES (NEW.currency, 1, NEW.amount)
        ON CONFLICT (currency) DO UPDATE SET count = count + 1, total = total + excluded.total;
END;

-- Charges are never deleted; should one ever be, it leaves the queue too.
CREATE TRIGGER offline_queue_delete AFTER DELETE ON charges WHEN OLD.state = 'INIT'
BEGIN
    UPDATE offline_queue SET count = count - 1, total = total - OLD.amount
        WHERE currency = OLD.currency;
END;
