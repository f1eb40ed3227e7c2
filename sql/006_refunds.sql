-- 006_refunds.sql - refunds: money of a SUCCESS charge returned, exactly once
-- (SPEC section 5a).
--
-- A refund is a row of its own with the states of a charge but CANCELED.
-- refund_id is unique forever: it is the gateway's refund idempotency key
-- (Alipay out_request_no, WeChat out_refund_no, Stripe Idempotency-Key), so
-- a resend or a query can never make a second refund.
--
-- "Refunds never exceed the charge" is kept here, in the inserting
-- statement's own transaction: whatever the intake checked before, an
-- INSERT that would bring the refunds of a charge that are not FAILED above
-- its amount aborts, and so does a refund of a charge that is not SUCCESS.
-- With one writer per daemon no two requests interleave inside one
-- transaction, so concurrent refunds under different keys cannot overdraw.

CREATE TABLE refunds (
    id                INTEGER PRIMARY KEY,
    refund_id         TEXT    NOT NULL UNIQUE
                      CHECK (length(refund_id) BETWEEN 1 AND 64
                             AND refund_id NOT GLOB '*[^A-Za-z0-9_.-]*'),
    charge_id         INTEGER NOT NULL REFERENCES charges (id),
    amount            INTEGER NOT NULL CHECK (typeof(amount) = 'integer' AND amount > 0),
    state             TEXT    NOT NULL CHECK (state = 'INIT' OR state = 'PROCESSING'
                                              OR state = 'PENDING' OR state = 'UNKNOWN'
                                              OR state = 'SUCCESS' OR state = 'FAILED'),
    offline_mode      TEXT    NOT NULL CHECK (offline_mode = 'prefer_online'
                                              OR offline_mode = 'require_online'
                                              OR offline_mode = 'force_offline'),
    reason            TEXT,
    metadata          TEXT,
    gateway_refund_no TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at   INTEGER NOT NULL DEFAULT 0,
    first_sent_at     INTEGER,
    error_code        TEXT,
    error_message     TEXT,
    review            INTEGER NOT NULL DEFAULT 0 CHECK (review IN (0, 1)),
    review_reason     TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
-- A charge's refunds (the sum that may not exceed it, GET .../refunds).
CREATE INDEX refunds_by_charge ON refunds (charge_id);
-- The sync engine's refund work list: only refunds that are not final.
CREATE INDEX refunds_active ON refunds (next_attempt_at)
    WHERE state = 'INIT' OR state = 'PROCESSING' OR state = 'PENDING' OR state = 'UNKNOWN';

CREATE TRIGGER refunds_never_exceed BEFORE INSERT ON refunds
BEGIN
    SELECT RAISE(ABORT, 'charge_not_refundable')
     WHERE (SELECT state FROM charges WHERE id = NEW.charge_id) IS NOT 'SUCCESS';
    SELECT RAISE(ABORT, 'refund_exceeds_charge')
     WHERE NEW.amount + (SELECT coalesce(sum(amount), 0) FROM refunds
                          WHERE charge_id = NEW.charge_id AND state <> 'FAILED')
           > (SELECT amount FROM charges WHERE id = NEW.charge_id);
END;
-- A refund never leaves a final state and never changes charge or amount.
CREATE TRIGGER refunds_final BEFORE UPDATE OF state, charge_id, amount ON refunds
    WHEN OLD.state = 'SUCCESS' OR OLD.state = 'FAILED'
         OR NEW.charge_id <> OLD.charge_id OR NEW.amount <> OLD.amount
BEGIN
    SELECT RAISE(ABORT, 'a final refund does not change');
END;

-- The charge object's amount_refunded (sum of SUCCESS refunds) and refunds
-- (how many refunds it has), kept by triggers in the same statement.
ALTER TABLE charges ADD COLUMN amount_refunded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN refunds INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER refunds_count AFTER INSERT ON refunds
BEGIN
    UPDATE charges SET refunds = refunds + 1 WHERE id = NEW.charge_id;
END;
-- A refund that provably never left the device and may not wait
-- (offline: require_online) is withdrawn: its row goes, so its refund_id
-- and the client's key can be used again once the gateway is back.
CREATE TRIGGER refunds_uncount AFTER DELETE ON refunds
BEGIN
    UPDATE charges SET refunds = refunds - 1 WHERE id = OLD.charge_id;
END;
CREATE TRIGGER refunds_refunded AFTER UPDATE OF state ON refunds
    WHEN NEW.state = 'SUCCESS' AND OLD.state <> 'SUCCESS'
BEGIN
    UPDATE charges SET amount_refunded = amount_refunded + NEW.amount WHERE id = NEW.charge_id;
END;

-- A refund's transitions are audited in its charge's trail, with its id.
ALTER TABLE charge_events ADD COLUMN refund_id TEXT;

-- The fulfilment feed takes refund.succeeded / refund.failed, once per
-- refund.  Its type CHECK cannot be altered in place: the table is rebuilt,
-- seq values and the AUTOINCREMENT high-water mark kept.
CREATE TABLE events_new (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    type        TEXT    NOT NULL CHECK (type = 'charge.succeeded' OR type = 'charge.failed'
                                        OR type = 'charge.canceled' OR type = 'charge.review'
                                        OR type = 'refund.succeeded' OR type = 'refund.failed'),
    charge_id   INTEGER NOT NULL REFERENCES charges (id),
    order_id    TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    refund_id   INTEGER REFERENCES refunds (id),
    CHECK ((refund_id IS NULL) = (type <> 'refund.succeeded' AND type <> 'refund.failed'))
);
INSERT INTO events_new (seq, type, charge_id, order_id, payload, created_at)
    SELECT seq, type, charge_id, order_id, payload, created_at FROM events ORDER BY seq;
DELETE FROM sqlite_sequence WHERE name = 'events_new';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'events_new', max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
                             coalesce((SELECT max(seq) FROM events), 0));
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_once_per_charge ON events (charge_id, type)
    WHERE type = 'charge.succeeded' OR type = 'charge.failed' OR type = 'charge.canceled';
CREATE UNIQUE INDEX events_once_per_refund ON events (refund_id)
    WHERE refund_id IS NOT NULL;
