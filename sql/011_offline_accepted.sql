-- 011_offline_accepted.sql - the offline limits count everything accepted
-- offline and not final (SPEC 18).
--
-- The figures of 002 counted INIT charges only.  A drain marks up to 16 of
-- them PROCESSING in one commit, and a charge whose answer was lost is
-- UNKNOWN: none of those counted, so while a drain was out a lane took
-- offline.max_total 5000 of charges worth 9000, and offline.max_count 3
-- let 4 in.  The money is no less at risk while a charge is on its way.
-- A charge is accepted offline when it is answered 202 as queued (at once,
-- or after an online send that provably never left); it counts from then
-- until it is final.  A charge sent online while the customer waits was
-- never accepted offline and never counts (it costs the figures nothing).
ALTER TABLE charges ADD COLUMN offline_accepted INTEGER NOT NULL DEFAULT 0
    CHECK (offline_accepted IN (0, 1));
-- Every queued charge so far was accepted offline; of those on their way,
-- which were is not known: they are not counted (they end soon).
UPDATE charges SET offline_accepted = 1 WHERE state = 'INIT';

DROP TRIGGER offline_queue_insert;
DROP TRIGGER offline_queue_leave;
DROP TRIGGER offline_queue_enter;
DROP TRIGGER offline_queue_delete;
DELETE FROM offline_queue;
INSERT INTO offline_queue (currency, count, total)
    SELECT currency, count(*), sum(amount) FROM charges
     WHERE offline_accepted = 1
       AND (state = 'INIT' OR state = 'PROCESSING' OR state = 'PENDING' OR state = 'UNKNOWN')
     GROUP BY currency;

CREATE TRIGGER offline_queue_insert AFTER INSERT ON charges
    WHEN NEW.offline_accepted = 1
         AND (NEW.state = 'INIT' OR NEW.state = 'PROCESSING' OR NEW.state = 'PENDING'
              OR NEW.state = 'UNKNOWN')
BEGIN
    INSERT INTO offline_queue (currency, count, total) VALUES (NEW.currency, 1, NEW.amount)
        ON CONFLICT (currency) DO UPDATE SET count = count + 1, total = total + excluded.total;
END;
-- An update takes a charge out (final), puts it in (accepted after an
-- online send that never left), or both (the row changes but stays in).
-- Moves between the states in progress leave the figures as they are.
CREATE TRIGGER offline_queue_leave AFTER UPDATE OF state, currency, amount, offline_accepted
    ON charges
    WHEN OLD.offline_accepted = 1
         AND (OLD.state = 'INIT' OR OLD.state = 'PROCESSING' OR OLD.state = 'PENDING'
              OR OLD.state = 'UNKNOWN')
         AND NOT (NEW.offline_accepted = 1 AND NEW.currency = OLD.currency
                  AND NEW.amount = OLD.amount
                  AND (NEW.state = 'INIT' OR NEW.state = 'PROCESSING' OR NEW.state = 'PENDING'
                       OR NEW.state = 'UNKNOWN'))
BEGIN
    UPDATE offline_queue SET count = count - 1, total = total - OLD.amount
        WHERE currency = OLD.currency;
END;
CREATE TRIGGER offline_queue_enter AFTER UPDATE OF state, currency, amount, offline_accepted
    ON charges
    WHEN NEW.offline_accepted = 1
         AND (NEW.state = 'INIT' OR NEW.state = 'PROCESSING' OR NEW.state = 'PENDING'
              OR NEW.state = 'UNKNOWN')
         AND NOT (OLD.offline_accepted = 1 AND NEW.currency = OLD.currency
                  AND NEW.amount = OLD.amount
                  AND (OLD.state = 'INIT' OR OLD.state = 'PROCESSING' OR OLD.state = 'PENDING'
                       OR OLD.state = 'UNKNOWN'))
BEGIN
    INSERT INTO offline_queue (currency, count, total) VALUES (NEW.currency, 1, NEW.amount)
        ON CONFLICT (currency) DO UPDATE SET count = count + 1, total = total + excluded.total;
END;
CREATE TRIGGER offline_queue_delete AFTER DELETE ON charges
    WHEN OLD.offline_accepted = 1
         AND (OLD.state = 'INIT' OR OLD.state = 'PROCESSING' OR OLD.state = 'PENDING'
              OR OLD.state = 'UNKNOWN')
BEGIN
    UPDATE offline_queue SET count = count - 1, total = total - OLD.amount
        WHERE currency = OLD.currency;
END;
