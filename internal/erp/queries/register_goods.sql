-- The goods-in-warehouses register (_accumrg1234, balance totals
-- _accumrgt1239) part of posting a document (key operations 3, 4 and 10),
-- inside the posting transaction, in this order:
--   create/index/fill/analyze tt_goods_mov   the new record set (the fill is
--                                            the document's own statement);
--   create/index/fill/analyze tt_goods_chg   the totals changes: new records
--                                            minus the recorder's old ones per
--                                            dimension set, for the document's
--                                            month, every later month and the
--                                            current period 3999-11-01;
--   ensure_totals, lock_totals               lock the totals rows in
--                                            (period, warehouse, item) order,
--                                            the order every writer uses, so
--                                            concurrent postings queue instead
--                                            of deadlocking;
--   delete_movements, insert_movements       replace the recorder's records;
--   update_totals                            add the changes;
--   negative_balances                        refuse a posting that leaves a
--                                            current balance below zero;
--   drop_temp_tables.
-- Balance totals rule (schema.sql): the row at month M holds the balance at
-- the end of M; the 3999-11-01 row the current balance; rows are summed over
-- _splitter, and postings write the _splitter = 0 row.

-- name: create_movements
CREATE TEMP TABLE tt_goods_mov (
    _lineno numeric(9,0) NOT NULL,
    _recordkind numeric(1,0) NOT NULL,
    _fld1235rref bytea NOT NULL,
    _fld1236rref bytea NOT NULL,
    _fld1237 numeric(15,3) NOT NULL)

-- name: index_movements
CREATE INDEX tt_goods_mov_bydims ON tt_goods_mov (_fld1235rref, _fld1236rref)

-- name: analyze_movements
ANALYZE tt_goods_mov

-- name: create_changes
CREATE TEMP TABLE tt_goods_chg (
    _period timestamp NOT NULL,
    _fld1235rref bytea NOT NULL,
    _fld1236rref bytea NOT NULL,
    _delta numeric(21,3) NOT NULL)

-- name: index_changes
CREATE INDEX tt_goods_chg_bykey ON tt_goods_chg (_period, _fld1235rref, _fld1236rref)

-- name: fill_changes
-- $1 recorder type (table number), $2 recorder reference, $3 first day of
-- the document's month, $4 the last month that has totals.
INSERT INTO tt_goods_chg (_period, _fld1235rref, _fld1236rref, _delta)
SELECT p._period, c._fld1235rref, c._fld1236rref, c._delta
FROM (SELECT m._fld1235rref, m._fld1236rref, sum(m._q) AS _delta
      FROM (SELECT n._fld1235rref, n._fld1236rref,
                   CASE WHEN n._recordkind = 0 THEN n._fld1237 ELSE -n._fld1237 END AS _q
            FROM tt_goods_mov n
            UNION ALL
            SELECT o._fld1235rref, o._fld1236rref,
                   CASE WHEN o._recordkind = 0 THEN -o._fld1237 ELSE o._fld1237 END
            FROM _accumrg1234 o
            WHERE o._recordertref = $1 AND o._recorderrref = $2 AND o._active{{sepand "o"}}) m
      GROUP BY m._fld1235rref, m._fld1236rref) c
CROSS JOIN (SELECT generate_series($3::timestamp, $4::timestamp, interval '1 month') AS _period
            UNION ALL
            SELECT TIMESTAMP '3999-11-01 00:00:00') p

-- name: analyze_changes
ANALYZE tt_goods_chg

-- name: ensure_totals
-- A dimension set without a totals row (zero balance) gets one, so that it
-- can be locked; inserted in lock order.
INSERT INTO _accumrgt1239 ({{sep}}_period, _fld1235rref, _fld1236rref, _fld1237, _splitter)
SELECT {{sepv}}c._period, c._fld1235rref, c._fld1236rref, 0, 0
FROM tt_goods_chg c
WHERE c._delta <> 0
ORDER BY c._period, c._fld1235rref, c._fld1236rref
ON CONFLICT ({{sep}}_period, _fld1235rref, _fld1236rref, _splitter) DO NOTHING

-- name: lock_totals
SELECT t._fld1237
FROM _accumrgt1239 t
JOIN tt_goods_chg c
  ON t._period = c._period AND t._fld1235rref = c._fld1235rref AND t._fld1236rref = c._fld1236rref{{sepand "t"}}
ORDER BY t._period, t._fld1235rref, t._fld1236rref, t._splitter
FOR UPDATE OF t

-- name: delete_movements
-- $1 recorder type, $2 recorder reference.
DELETE FROM _accumrg1234 o WHERE o._recordertref = $1 AND o._recorderrref = $2{{sepand "o"}}

-- name: insert_movements
-- $1 recorder type, $2 recorder reference, $3 the document's date.
INSERT INTO _accumrg1234 ({{sep}}_period, _recordertref, _recorderrref, _lineno, _active, _recordkind,
                          _fld1235rref, _fld1236rref, _fld1237)
SELECT {{sepv}}$3, $1, $2, n._lineno, TRUE, n._recordkind, n._fld1235rref, n._fld1236rref, n._fld1237
FROM tt_goods_mov n
ORDER BY n._lineno

-- name: update_totals
UPDATE _accumrgt1239 t
SET _fld1237 = t._fld1237 + c._delta
FROM tt_goods_chg c
WHERE t._period = c._period AND t._fld1235rref = c._fld1235rref AND t._fld1236rref = c._fld1236rref
  AND t._splitter = 0{{sepand "t"}}

-- name: negative_balances
-- Dimension sets whose current balance this posting lowered below zero.
SELECT count(*)
FROM (SELECT t._fld1235rref, t._fld1236rref
      FROM _accumrgt1239 t
      JOIN tt_goods_chg c
        ON t._period = c._period AND t._fld1235rref = c._fld1235rref AND t._fld1236rref = c._fld1236rref{{sepand "t"}}
      WHERE c._period = TIMESTAMP '3999-11-01 00:00:00' AND c._delta < 0
      GROUP BY t._fld1235rref, t._fld1236rref
      HAVING sum(t._fld1237) < 0) n

-- name: drop_temp_tables
DROP TABLE tt_goods_mov, tt_goods_chg
