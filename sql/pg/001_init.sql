-- 001_init.sql - the PostgreSQL store server's schema (SPEC section 16).
--
-- The same tables, constraints and invariants as the SQLite schema of
-- sql/001..008, written for many daemons (lanes) writing at once:
--   * idempotency_keys is the seed pattern's table: (scope, key) UNIQUE,
--     the lock taken by INSERT ... ON CONFLICT DO NOTHING, locked_at,
--     completed_at, expires_at;
--   * order_id and refund_id UNIQUE: a charge or refund inserted twice -
--     by two lanes, or moved twice from a lane's local queue - is refused
--     here, never doubled;
--   * state changes are conditional UPDATEs (core/store_pg.c), audit rows
--     are append-only, events at most once per charge and type;
--   * a refund locks its charge's row, so two lanes refunding one charge at
--     once cannot together exceed its amount.
-- Applied by store_pg.c in one transaction with its row in
-- payterm_schema, under an advisory lock (several daemons may start at
-- once).  Times are Unix milliseconds, as in SQLite.

-- The columns' rules are domains rather than table CHECKs: PostgreSQL reads
-- a table's CHECK expressions back from their text at every statement that
-- writes the table (about a quarter of the guarded new charge's server
-- time, measured), while a domain's rules are compiled once per
-- connection.  The rules are the same as SQLite's CHECKs (sql/001..008).
CREATE DOMAIN pt_scope AS TEXT CHECK (length(VALUE) BETWEEN 1 AND 128);
CREATE DOMAIN pt_key AS TEXT CHECK (length(VALUE) BETWEEN 1 AND 255);
CREATE DOMAIN pt_hash AS BYTEA CHECK (length(VALUE) = 32);
CREATE DOMAIN pt_http_status AS INTEGER CHECK (VALUE BETWEEN 100 AND 599);
CREATE DOMAIN pt_ref AS TEXT CHECK (length(VALUE) BETWEEN 1 AND 64 AND VALUE ~ '^[A-Za-z0-9_.-]+$');
CREATE DOMAIN pt_gateway AS TEXT CHECK (VALUE IN ('alipay', 'wechat', 'stripe', '2c2p'));
CREATE DOMAIN pt_method AS TEXT CHECK (VALUE IN ('barcode', 'qr', 'card_on_file', 'redirect'));
CREATE DOMAIN pt_amount AS BIGINT CHECK (VALUE > 0);
CREATE DOMAIN pt_currency AS TEXT CHECK (VALUE ~ '^[A-Z]{3}$');
CREATE DOMAIN pt_charge_state AS TEXT
    CHECK (VALUE IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN', 'SUCCESS', 'FAILED', 'CANCELED'));
CREATE DOMAIN pt_refund_state AS TEXT
    CHECK (VALUE IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN', 'SUCCESS', 'FAILED'));
CREATE DOMAIN pt_offline_mode AS TEXT
    CHECK (VALUE IN ('prefer_online', 'require_online', 'force_offline'));
CREATE DOMAIN pt_count AS INTEGER CHECK (VALUE >= 0);
CREATE DOMAIN pt_flag AS INTEGER CHECK (VALUE IN (0, 1));

CREATE TABLE idempotency_keys (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope           pt_scope NOT NULL,
    key             pt_key  NOT NULL,
    request_hash    pt_hash NOT NULL,
    locked_at       BIGINT,
    locked_by       BIGINT,
    completed_at    BIGINT,
    response_status pt_http_status,
    response_body   BYTEA,
    order_id        TEXT,
    created_at      BIGINT  NOT NULL,
    expires_at      BIGINT  NOT NULL,
    UNIQUE (scope, key),
    CHECK ((completed_at IS NULL) = (response_status IS NULL))
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at) WHERE completed_at IS NOT NULL;

CREATE TABLE charges (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id         pt_ref  NOT NULL UNIQUE,
    gateway          pt_gateway NOT NULL,
    method           pt_method NOT NULL,
    amount           pt_amount NOT NULL,
    currency         pt_currency NOT NULL,
    state            pt_charge_state NOT NULL,
    offline_mode     pt_offline_mode NOT NULL,
    subject          TEXT,
    payment_code     TEXT,
    payment_method   TEXT,
    customer         TEXT,
    metadata         TEXT,
    attempts         pt_count NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT  NOT NULL DEFAULT 0,
    first_sent_at    BIGINT,
    gateway_trade_no TEXT,
    action_url       TEXT,
    error_code       TEXT,
    error_message    TEXT,
    review           pt_flag NOT NULL DEFAULT 0,
    review_reason    TEXT,
    amount_refunded  BIGINT  NOT NULL DEFAULT 0,
    -- The lane whose daemon last sent it (set with PROCESSING): at a
    -- daemon's start only its own interrupted sends are due at once.
    claimed_by       TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
-- The sync engine's work list and the offline queue's figures read only
-- the charges in progress (PostgreSQL ids are not committed in order, so
-- the SQLite store's "active floor" does not apply: a partial index does).
CREATE INDEX charges_active ON charges (next_attempt_at, id)
    WHERE state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN');
CREATE INDEX charges_queued ON charges (currency) INCLUDE (amount, created_at)
    WHERE state = 'INIT';
CREATE INDEX charges_review ON charges (id) WHERE review = 1;
CREATE INDEX charges_state ON charges (state, id);

CREATE TABLE refunds (
    id                BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    refund_id         pt_ref  NOT NULL UNIQUE,
    charge_id         BIGINT  NOT NULL REFERENCES charges (id),
    amount            pt_amount NOT NULL,
    state             pt_refund_state NOT NULL,
    offline_mode      pt_offline_mode NOT NULL,
    reason            TEXT,
    metadata          TEXT,
    gateway_refund_no TEXT,
    attempts          pt_count NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT  NOT NULL DEFAULT 0,
    first_sent_at     BIGINT,
    error_code        TEXT,
    error_message     TEXT,
    review            pt_flag NOT NULL DEFAULT 0,
    review_reason     TEXT,
    claimed_by        TEXT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL
);
CREATE INDEX refunds_by_charge ON refunds (charge_id);
CREATE INDEX refunds_active ON refunds (next_attempt_at, id)
    WHERE state IN ('INIT', 'PROCESSING', 'PENDING', 'UNKNOWN');
CREATE INDEX refunds_review ON refunds (id) WHERE review = 1;
CREATE INDEX refunds_state ON refunds (state, id);

-- Never more than the charge, and only of a successful charge: checked with
-- the charge's row locked, so concurrent refunds of one charge queue here.
CREATE FUNCTION refunds_never_exceed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    c_state  TEXT;
    c_amount BIGINT;
    taken    BIGINT;
BEGIN
    SELECT state, amount INTO c_state, c_amount FROM charges WHERE id = NEW.charge_id FOR UPDATE;
    IF c_state IS DISTINCT FROM 'SUCCESS' THEN
        RAISE EXCEPTION 'charge_not_refundable' USING ERRCODE = 'PT002';
    END IF;
    SELECT coalesce(sum(amount), 0) INTO taken FROM refunds
     WHERE charge_id = NEW.charge_id AND state <> 'FAILED';
    IF NEW.amount + taken > c_amount THEN
        RAISE EXCEPTION 'refund_exceeds_charge' USING ERRCODE = 'PT001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refunds_never_exceed BEFORE INSERT ON refunds
    FOR EACH ROW EXECUTE FUNCTION refunds_never_exceed();

CREATE FUNCTION refunds_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('SUCCESS', 'FAILED') AND NEW.state <> OLD.state
       OR NEW.charge_id <> OLD.charge_id OR NEW.amount <> OLD.amount THEN
        RAISE EXCEPTION 'a final refund does not change' USING ERRCODE = 'PT003';
    END IF;
    IF NEW.state = 'SUCCESS' AND OLD.state <> 'SUCCESS' THEN
        UPDATE charges SET amount_refunded = amount_refunded + NEW.amount WHERE id = NEW.charge_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refunds_final BEFORE UPDATE ON refunds
    FOR EACH ROW EXECUTE FUNCTION refunds_final();

-- The audit trail.  Rows are numbered within a charge when read (the id is
-- global, so two lanes appending to one charge's trail never collide).
CREATE TABLE charge_events (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    charge_id  BIGINT  NOT NULL REFERENCES charges (id),
    from_state TEXT,
    to_state   TEXT,
    cause      TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    refused    pt_flag NOT NULL DEFAULT 0,
    detail     TEXT,
    created_at BIGINT  NOT NULL,
    refund_id  TEXT
);
CREATE INDEX charge_events_trail ON charge_events (charge_id, id);
CREATE FUNCTION charge_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'charge_events is append-only' USING ERRCODE = 'PT004';
END $$;
CREATE TRIGGER charge_events_append_only BEFORE UPDATE OR DELETE ON charge_events
    FOR EACH ROW EXECUTE FUNCTION charge_events_append_only();

CREATE TABLE notifications (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gateway     TEXT   NOT NULL,
    dedup_id    TEXT   NOT NULL CHECK (length(dedup_id) BETWEEN 1 AND 256),
    order_id    TEXT,
    status      TEXT,
    outcome     TEXT   NOT NULL,
    received_at BIGINT NOT NULL,
    UNIQUE (gateway, dedup_id)
);

-- The fulfilment feed, one for the shop.  Its numbers are taken under a
-- transaction-scoped advisory lock held to the commit (store_pg.c), so the
-- events of concurrent lanes become visible in seq order: a reader that has
-- seen seq N never later finds a smaller one.
CREATE TABLE events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type       TEXT   NOT NULL CHECK (type IN ('charge.succeeded', 'charge.failed',
                                               'charge.canceled', 'charge.review',
                                               'refund.succeeded', 'refund.failed')),
    charge_id  BIGINT NOT NULL REFERENCES charges (id),
    order_id   TEXT   NOT NULL,
    payload    TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    refund_id  BIGINT REFERENCES refunds (id),
    CHECK ((refund_id IS NULL) = (type NOT IN ('refund.succeeded', 'refund.failed')))
);
CREATE UNIQUE INDEX events_once_per_charge ON events (charge_id, type)
    WHERE type IN ('charge.succeeded', 'charge.failed', 'charge.canceled');
CREATE UNIQUE INDEX events_once_per_refund ON events (refund_id) WHERE refund_id IS NOT NULL;
