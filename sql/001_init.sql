-- 001_init.sql - the first schema of payterm.
--
-- Times are integers: milliseconds since the Unix epoch (UTC).  Money is an
-- integer count of the currency's minor unit.
--
-- Sets of allowed values are written `x = 'a' OR x = 'b' ...`, never
-- `x IN ('a', 'b', 'c')`: SQLite evaluates an IN list of three or more
-- constants by building a temporary b-tree every time the statement runs,
-- which made these CHECKs and the partial index cost 14 us of the 20 us it
-- takes to insert a charge.  The UNIQUE constraints here are
-- the data layer of the exactly-once defence: even when an idempotency record
-- has expired, a second charge for the same order cannot exist.

-- Request layer: one row per client idempotency key and scope
-- ("POST /v1/charges", "cancel:<order_id>", ...).  A row with
-- completed_at NULL is a lock held by the request that inserted it.
CREATE TABLE idempotency_keys (
    id              INTEGER PRIMARY KEY,
    scope           TEXT    NOT NULL CHECK (length(scope) BETWEEN 1 AND 128),
    key             TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash    BLOB    NOT NULL CHECK (length(request_hash) = 32),
    locked_at       INTEGER,
    locked_by       INTEGER,
    completed_at    INTEGER,
    response_status INTEGER CHECK (response_status IS NULL OR response_status BETWEEN 100 AND 599),
    response_body   BLOB,
    order_id        TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    UNIQUE (scope, key),
    CHECK ((completed_at IS NULL) = (response_status IS NULL))
);
-- No index on expires_at: the hourly sweep scans the table, which costs
-- less than updating a second b-tree in every charge's durable commit.

-- State layer: one row per payment intent.  order_id is also the gateway's
-- idempotency key (Alipay/WeChat out_trade_no, 2C2P invoiceNo, Stripe
-- Idempotency-Key), so it is unique forever.
CREATE TABLE charges (
    id                 INTEGER PRIMARY KEY,
    order_id           TEXT    NOT NULL UNIQUE
                       CHECK (length(order_id) BETWEEN 1 AND 64
                              AND order_id NOT GLOB '*[^A-Za-z0-9_.-]*'),
    gateway            TEXT    NOT NULL CHECK (gateway = 'alipay' OR gateway = 'wechat'
                                               OR gateway = 'stripe' OR gateway = '2c2p'),
    method             TEXT    NOT NULL CHECK (method = 'barcode' OR method = 'qr'
                                               OR method = 'card_on_file' OR method = 'redirect'),
    amount             INTEGER NOT NULL CHECK (typeof(amount) = 'integer' AND amount > 0),
    currency           TEXT    NOT NULL CHECK (length(currency) = 3 AND currency GLOB '[A-Z][A-Z][A-Z]'),
    state              TEXT    NOT NULL CHECK (state = 'INIT' OR state = 'PROCESSING'
                                               OR state = 'PENDING' OR state = 'UNKNOWN'
                                               OR state = 'SUCCESS' OR state = 'FAILED'
                                               OR state = 'CANCELED'),
    offline_mode       TEXT    NOT NULL CHECK (offline_mode = 'prefer_online'
                                               OR offline_mode = 'require_online'
                                               OR offline_mode = 'force_offline'),
    -- SHA-256 of the canonical JSON of the charge parameters: decides "same
    -- parameters" for a retry of the order under another key.  (A hash, not
    -- the text: every byte here is written in each charge's durable commit.)
    params_hash        BLOB    NOT NULL CHECK (length(params_hash) = 32),
    subject            TEXT,
    payment_code       TEXT,
    payment_method     TEXT,
    customer           TEXT,
    metadata           TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at    INTEGER NOT NULL DEFAULT 0,
    first_sent_at      INTEGER,
    gateway_trade_no   TEXT,
    action_url         TEXT,
    error_code         TEXT,
    error_message      TEXT,
    review             INTEGER NOT NULL DEFAULT 0 CHECK (review IN (0, 1)),
    review_reason      TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
-- The sync engine's work list: due charges, oldest first.
-- Only charges that are not final are indexed: the index stays small however
-- many charges the device has taken.  It covers what the offline limits and
-- the status counters add up (currency, amount), so those never touch the
-- table, and next_attempt_at for the sync engine's work list.
CREATE INDEX charges_active ON charges (state, currency, amount, next_attempt_at)
    WHERE state = 'INIT' OR state = 'PROCESSING' OR state = 'PENDING' OR state = 'UNKNOWN';
-- Charges waiting for an operator: rare, so this index costs nothing until
-- one is raised.
CREATE INDEX charges_review ON charges (id) WHERE review = 1;

-- Append-only audit of every transition, refused ones included, written in
-- the same transaction as the change it records.
-- Keyed by (charge_id, seq) in one b-tree: a charge's trail is one range
-- scan and each commit touches one page of it, not a table and an index.
CREATE TABLE charge_events (
    charge_id   INTEGER NOT NULL REFERENCES charges (id),
    seq         INTEGER NOT NULL,
    from_state  TEXT,
    to_state    TEXT,
    cause       TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    refused     INTEGER NOT NULL DEFAULT 0 CHECK (refused IN (0, 1)),
    detail      TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (charge_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER charge_events_append_only_u BEFORE UPDATE ON charge_events
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;
CREATE TRIGGER charge_events_append_only_d BEFORE DELETE ON charge_events
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;

-- Gateway notifications, each applied once: (gateway, dedup_id) is unique.
CREATE TABLE notifications (
    id           INTEGER PRIMARY KEY,
    gateway      TEXT    NOT NULL,
    dedup_id     TEXT    NOT NULL CHECK (length(dedup_id) BETWEEN 1 AND 256),
    order_id     TEXT,
    status       TEXT,
    outcome      TEXT    NOT NULL,
    received_at  INTEGER NOT NULL,
    UNIQUE (gateway, dedup_id)
);

-- The fulfilment feed the kiosk reads.  seq only grows (AUTOINCREMENT never
-- reuses a value), and each charge gets each terminal event at most once, so
-- goods are delivered once whatever races between notifications and syncs.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    type        TEXT    NOT NULL CHECK (type = 'charge.succeeded' OR type = 'charge.failed'
                                        OR type = 'charge.canceled' OR type = 'charge.review'),
    charge_id   INTEGER NOT NULL REFERENCES charges (id),
    order_id    TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_once_per_charge ON events (charge_id, type)
    WHERE type <> 'charge.review';
