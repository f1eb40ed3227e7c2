-- 015_at_final.sql - what the day's books need of a row is written when it
-- becomes final, not read back from elsewhere later (SPEC 13: a close in at
-- most twice the time of one scan of the rows it adds up, a reconciliation
-- at a third of the rate of parsing the bill).
--
-- The Z report a row is in.
--
-- 013 left z NULL until a close stamped every final row: a close over
-- 100 000 charges rewrote 100 000 rows.  Now the transaction that makes a
-- row final also gives it the number of the report that is open, one more
-- than the last closed: a read of the last key of z_reports, in the same
-- write transaction, and the row's own page, which that transaction writes
-- anyway.  A close and a transition are both write transactions, so they
-- are ordered by commit as before: a row made final before the close
-- commits is in it, one made final after is in the next - whatever the
-- clock said.  A close then only adds up the rows carrying its number and
-- writes nothing but its report.  z stays NULL while a row is not final,
-- and z_once (013) still keeps a number once given.
CREATE TRIGGER charges_z_final AFTER UPDATE OF state ON charges
    WHEN NEW.z IS NULL
     AND (NEW.state = 'SUCCESS' OR NEW.state = 'FAILED' OR NEW.state = 'CANCELED')
BEGIN
    UPDATE charges SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports) WHERE id = NEW.id;
END;
CREATE TRIGGER charges_z_final_i AFTER INSERT ON charges
    WHEN NEW.z IS NULL
     AND (NEW.state = 'SUCCESS' OR NEW.state = 'FAILED' OR NEW.state = 'CANCELED')
BEGIN
    UPDATE charges SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports) WHERE id = NEW.id;
END;
CREATE TRIGGER refunds_z_final AFTER UPDATE OF state ON refunds
    WHEN NEW.z IS NULL AND (NEW.state = 'SUCCESS' OR NEW.state = 'FAILED')
BEGIN
    UPDATE refunds SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports) WHERE id = NEW.id;
END;
CREATE TRIGGER refunds_z_final_i AFTER INSERT ON refunds
    WHEN NEW.z IS NULL AND (NEW.state = 'SUCCESS' OR NEW.state = 'FAILED')
BEGIN
    UPDATE refunds SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports) WHERE id = NEW.id;
END;

-- The rows already final and in no report are in the open one.
UPDATE charges SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports)
    WHERE z IS NULL AND (state = 'SUCCESS' OR state = 'FAILED' OR state = 'CANCELED');
UPDATE refunds SET z = (SELECT coalesce(max(z), 0) + 1 FROM z_reports)
    WHERE z IS NULL AND (state = 'SUCCESS' OR state = 'FAILED');

-- When a charge (refund) became final, by its audit row: the time its
-- reconciliation dates a SUCCESS by (SPEC 19), and the month retention
-- archives it in.  014 read it from the trail, one seek into charge_events
-- per record of the day; it is now copied into the row when that audit row
-- is written, in the same transaction, once (a review or a later note
-- never moves a record to another day).
ALTER TABLE charges ADD COLUMN final_at INTEGER;
ALTER TABLE refunds ADD COLUMN final_at INTEGER;

CREATE TRIGGER charge_events_final_at AFTER INSERT ON charge_events
    WHEN NEW.refused = 0
     AND (NEW.to_state = 'SUCCESS' OR NEW.to_state = 'FAILED' OR NEW.to_state = 'CANCELED')
     AND (NEW.from_state IS NULL OR NOT (NEW.from_state = 'SUCCESS' OR NEW.from_state = 'FAILED'
                                         OR NEW.from_state = 'CANCELED'))
BEGIN
    UPDATE charges SET final_at = NEW.created_at
        WHERE NEW.refund_id IS NULL AND id = NEW.charge_id AND final_at IS NULL;
    UPDATE refunds SET final_at = NEW.created_at
        WHERE NEW.refund_id IS NOT NULL AND refund_id = NEW.refund_id AND final_at IS NULL;
END;

UPDATE charges SET final_at = (SELECT min(e.created_at) FROM charge_events e
        WHERE e.id BETWEEN charges.id * 4294967296 + 1 AND charges.id * 4294967296 + 4294967295
          AND e.refund_id IS NULL AND e.refused = 0 AND e.to_state = charges.state
          AND (e.from_state IS NULL OR NOT (e.from_state = 'SUCCESS' OR e.from_state = 'FAILED'
                                            OR e.from_state = 'CANCELED')))
    WHERE state = 'SUCCESS' OR state = 'FAILED' OR state = 'CANCELED';
UPDATE refunds SET final_at = (SELECT min(e.created_at) FROM charge_events e
        WHERE e.id BETWEEN refunds.charge_id * 4294967296 + 1
                       AND refunds.charge_id * 4294967296 + 4294967295
          AND e.refund_id = refunds.refund_id AND e.refused = 0 AND e.to_state = refunds.state
          AND (e.from_state IS NULL OR NOT (e.from_state = 'SUCCESS' OR e.from_state = 'FAILED')))
    WHERE state = 'SUCCESS' OR state = 'FAILED';
