-- 005_erase_payment_codes.sql - a customer's payment code is not kept.
--
-- A barcode payment code (Alipay auth_code, WeChat 付款码) is a credential
-- the customer's phone shows for about a minute.  payterm needs it only
-- while a send may still need it: from now on the transition into SUCCESS,
-- FAILED or CANCELED sets it to NULL in the same UPDATE (store.c), the
-- database erases deleted bytes (PRAGMA secure_delete) and the daemon
-- checkpoints and truncates the WAL once such a charge is final, so the
-- digits leave every file under data_dir.  Charges that were final before
-- this migration lose theirs here.
--
-- (004 said no parameter of a charge ever changes; this one does, once, and
-- the intake compares a retry's payment code only while the charge keeps it.)

UPDATE charges SET payment_code = NULL
 WHERE payment_code IS NOT NULL
   AND (state = 'SUCCESS' OR state = 'FAILED' OR state = 'CANCELED');
