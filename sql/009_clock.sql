-- 009_clock.sql - a board's clock is not to be trusted (SPEC 17).
--
-- Every time in this database is "lane time" (core/clock.h): milliseconds
-- on the Unix epoch's scale that advance with the kernel's boot-time clock,
-- never with a step of the wall clock.  The anchor below says where lane
-- time stood against the boot-time clock of one boot, so that a daemon
-- restarted in the same boot continues it exactly, and whether it is the
-- trusted wall clock's or still provisional (a board that booted without a
-- trusted clock).  One row, rewritten at each start and correction.
CREATE TABLE clock (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    boot_id           TEXT    NOT NULL CHECK (length(boot_id) <= 63),
    boot_ms           INTEGER NOT NULL,
    lane_ms           INTEGER NOT NULL,
    trusted           INTEGER NOT NULL CHECK (trusted IN (0, 1)),
    provisional_since INTEGER NOT NULL,
    wall_high         INTEGER NOT NULL
);

-- The clock's own audit: each step of the wall clock seen while running,
-- and each correction of provisional times, once (append-only).
CREATE TABLE clock_events (
    id         INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind = 'step' OR kind = 'corrected'),
    size_ms    INTEGER NOT NULL,
    wall_ms    INTEGER NOT NULL,
    detail     TEXT,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER clock_events_append_only_d BEFORE DELETE ON clock_events
BEGIN
    SELECT RAISE(ABORT, 'clock_events is append-only');
END;

-- When the wall clock becomes trusted, provisional times are corrected
-- (pt_store_clock_shift): the audit's times too.  Its rows stay
-- append-only in everything else: the trigger now names every column but
-- created_at, and refuses an update of any of them.
DROP TRIGGER charge_events_append_only_u;
CREATE TRIGGER charge_events_append_only_u
    BEFORE UPDATE OF id, charge_id, seq, from_state, to_state, cause, actor, refused, detail,
                     refund_id ON charge_events
BEGIN
    SELECT RAISE(ABORT, 'charge_events is append-only');
END;
