-- Key operation 3, posting a sales invoice (_document187), the document
-- part; the register parts are register_goods.sql (expense from the
-- warehouse) and register_sales.sql (sales turnover). One transaction:
--   1. lock_document      lock the header row first (two users posting the
--                         same document queue here, before any other lock);
--   2. read_lines, delete_lines, insert_lines
--                         rewrite the tabular part (the platform writes the
--                         whole object: DELETE all lines, INSERT them again,
--                         here with edited quantities);
--   3. write_header       bump _version, set _posted and the amounts;
--   4. the registers' temp tables, totals locks, movements, totals, the
--      negative-stock check and DROP of the temp tables.
-- $1 is the document reference.

-- name: lock_document
SELECT d._date_time, d._fld3001rref, d._fld3002rref, d._fld3004rref
FROM _document187 d
WHERE d._idrref = $1{{sepand "d"}}
FOR UPDATE

-- name: read_lines
-- Quantities in thousandths and prices in cents, so the application edits
-- them as integers.
SELECT l._keyfield, l._lineno3021::int, l._fld3022rref, l._fld3023rref,
       (l._fld3024 * 1000)::bigint, (l._fld3025 * 100)::bigint, l._fld3027rref
FROM _document187_vt3020 l
WHERE l._document187_idrref = $1{{sepand "l"}}
ORDER BY l._keyfield

-- name: delete_lines
DELETE FROM _document187_vt3020 l WHERE l._document187_idrref = $1{{sepand "l"}}

-- name: insert_lines
-- Amount = quantity x price rounded to cents; VAT = amount x rate / (100 +
-- rate) rounded to cents (the rate from the VAT rates catalog).
INSERT INTO _document187_vt3020 ({{sep}}_document187_idrref, _keyfield, _lineno3021, _fld3022rref, _fld3023rref,
                                 _fld3024, _fld3025, _fld3026, _fld3027rref, _fld3028)
SELECT {{sepv}}$1, l.keyfield, l.lineno, l.item, l.unit, l.qty, l.price, l.amount, l.vat,
       round(l.amount * coalesce(r._fld1030, 0) / (100 + coalesce(r._fld1030, 0)), 2)
FROM (SELECT u.keyfield, u.lineno, u.item, u.unit, u.vat,
             u.qty_milli / 1000.0 AS qty, u.price_cents / 100.0 AS price,
             round(u.qty_milli * u.price_cents / 100000.0, 2) AS amount
      FROM unnest($2::bytea[], $3::int[], $4::bytea[], $5::bytea[], $6::bigint[], $7::bigint[], $8::bytea[])
           AS u(keyfield, lineno, item, unit, qty_milli, price_cents, vat)) l
LEFT JOIN _reference29 r ON r._idrref = l.vat{{sepand "r"}}
ORDER BY l.keyfield

-- name: write_header
UPDATE _document187 d
SET _version = d._version + 1, _posted = TRUE, _fld3009 = s.amount, _fld3010 = s.vat
FROM (SELECT coalesce(sum(l._fld3026), 0) AS amount, coalesce(sum(l._fld3028), 0) AS vat
      FROM _document187_vt3020 l
      WHERE l._document187_idrref = $1{{sepand "l"}}) s
WHERE d._idrref = $1{{sepand "d"}}

-- name: fill_goods_movements
-- Expense (record kind 1) of every line from the document's warehouse $2.
INSERT INTO tt_goods_mov (_lineno, _recordkind, _fld1235rref, _fld1236rref, _fld1237)
SELECT l._lineno3021, 1, $2, l._fld3022rref, l._fld3024
FROM _document187_vt3020 l
WHERE l._document187_idrref = $1 AND l._fld3024 <> 0{{sepand "l"}}

-- name: fill_sales_movements
-- Sales of every line: organization $2, counterparty $3.
INSERT INTO tt_sales_mov (_lineno, _fld1261rref, _fld1262rref, _fld1263rref, _fld1264, _fld1265, _fld1266)
SELECT l._lineno3021, $2, $3, l._fld3022rref, l._fld3024, l._fld3026, l._fld3028
FROM _document187_vt3020 l
WHERE l._document187_idrref = $1{{sepand "l"}}
