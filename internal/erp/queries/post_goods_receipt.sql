-- Key operation 4, posting a goods receipt (_document190), the document
-- part; same shape as post_sales_invoice.sql, with a receipt (record kind
-- 0) into the goods register and no sales movements.
-- $1 is the document reference.

-- name: lock_document
SELECT d._date_time, d._fld3101rref, d._fld3102rref, d._fld3104rref
FROM _document190 d
WHERE d._idrref = $1{{sepand "d"}}
FOR UPDATE

-- name: read_lines
SELECT l._keyfield, l._lineno3121::int, l._fld3122rref, l._fld3123rref,
       (l._fld3124 * 1000)::bigint, (l._fld3125 * 100)::bigint, l._fld3127rref
FROM _document190_vt3120 l
WHERE l._document190_idrref = $1{{sepand "l"}}
ORDER BY l._keyfield

-- name: delete_lines
DELETE FROM _document190_vt3120 l WHERE l._document190_idrref = $1{{sepand "l"}}

-- name: insert_lines
INSERT INTO _document190_vt3120 ({{sep}}_document190_idrref, _keyfield, _lineno3121, _fld3122rref, _fld3123rref,
                                 _fld3124, _fld3125, _fld3126, _fld3127rref, _fld3128)
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
UPDATE _document190 d
SET _version = d._version + 1, _posted = TRUE, _fld3108 = s.amount, _fld3109 = s.vat
FROM (SELECT coalesce(sum(l._fld3126), 0) AS amount, coalesce(sum(l._fld3128), 0) AS vat
      FROM _document190_vt3120 l
      WHERE l._document190_idrref = $1{{sepand "l"}}) s
WHERE d._idrref = $1{{sepand "d"}}

-- name: fill_goods_movements
-- Receipt (record kind 0) of every line into the document's warehouse $2.
INSERT INTO tt_goods_mov (_lineno, _recordkind, _fld1235rref, _fld1236rref, _fld1237)
SELECT l._lineno3121, 0, $2, l._fld3122rref, l._fld3124
FROM _document190_vt3120 l
WHERE l._document190_idrref = $1 AND l._fld3124 <> 0{{sepand "l"}}
