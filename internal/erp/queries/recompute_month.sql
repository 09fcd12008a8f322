-- Key operation 11 (batch), recomputing a month of register totals from the
-- movements, the platform's "recalculate totals" for month $1 ($2 is the
-- next month's first day). One transaction:
--   lock_totals          SHARE ROW EXCLUSIVE on both totals tables, balance
--                        first (the order postings touch them): postings
--                        queue behind the recomputation, readers do not;
--   fresh balances       every movement before $2 summed per dimension set
--                        (the balance at the end of the month) into a temp
--                        table; fresh turnovers of the month likewise;
--   delete_stale_*       totals rows of the month that differ from the fresh
--                        values (or sit in another _splitter, or are zero),
--                        returning whether each deleted row was non-zero;
--   insert_missing_*     fresh values without a row;
--   drop_temp_tables.
-- On consistent totals nothing is written; the cost is the reading.

-- name: lock_totals
LOCK TABLE _accumrgt1239, _accumrgtn1270 IN SHARE ROW EXCLUSIVE MODE

-- name: create_fresh_balance
CREATE TEMP TABLE tt_fresh_balance (
    _fld1235rref bytea NOT NULL,
    _fld1236rref bytea NOT NULL,
    _fld1237 numeric(21,3) NOT NULL)

-- name: fill_fresh_balance
-- $1 the next month's first day.
INSERT INTO tt_fresh_balance (_fld1235rref, _fld1236rref, _fld1237)
SELECT m._fld1235rref, m._fld1236rref, sum(CASE WHEN m._recordkind = 0 THEN m._fld1237 ELSE -m._fld1237 END)
FROM _accumrg1234 m
WHERE m._period < $1 AND m._active{{sepand "m"}}
GROUP BY m._fld1235rref, m._fld1236rref
HAVING sum(CASE WHEN m._recordkind = 0 THEN m._fld1237 ELSE -m._fld1237 END) <> 0

-- name: index_fresh_balance
CREATE INDEX tt_fresh_balance_bydims ON tt_fresh_balance (_fld1235rref, _fld1236rref)

-- name: analyze_fresh_balance
ANALYZE tt_fresh_balance

-- name: delete_stale_balance
DELETE FROM _accumrgt1239 t
WHERE t._period = $1{{sepand "t"}}
  AND NOT EXISTS (SELECT 1 FROM tt_fresh_balance f
                  WHERE f._fld1235rref = t._fld1235rref AND f._fld1236rref = t._fld1236rref
                    AND f._fld1237 = t._fld1237 AND t._splitter = 0)
RETURNING t._fld1237 <> 0

-- name: insert_missing_balance
INSERT INTO _accumrgt1239 ({{sep}}_period, _fld1235rref, _fld1236rref, _fld1237, _splitter)
SELECT {{sepv}}$1, f._fld1235rref, f._fld1236rref, f._fld1237, 0
FROM tt_fresh_balance f
WHERE NOT EXISTS (SELECT 1 FROM _accumrgt1239 t
                  WHERE t._period = $1 AND t._fld1235rref = f._fld1235rref
                    AND t._fld1236rref = f._fld1236rref{{sepand "t"}})

-- name: create_fresh_turnover
CREATE TEMP TABLE tt_fresh_turnover (
    _fld1261rref bytea NOT NULL,
    _fld1262rref bytea NOT NULL,
    _fld1263rref bytea NOT NULL,
    _fld1264 numeric(21,3) NOT NULL,
    _fld1265 numeric(21,2) NOT NULL,
    _fld1266 numeric(21,2) NOT NULL)

-- name: fill_fresh_turnover
INSERT INTO tt_fresh_turnover (_fld1261rref, _fld1262rref, _fld1263rref, _fld1264, _fld1265, _fld1266)
SELECT m._fld1261rref, m._fld1262rref, m._fld1263rref, sum(m._fld1264), sum(m._fld1265), sum(m._fld1266)
FROM _accumrg1260 m
WHERE m._period >= $1 AND m._period < $2 AND m._active{{sepand "m"}}
GROUP BY m._fld1261rref, m._fld1262rref, m._fld1263rref
HAVING sum(m._fld1264) <> 0 OR sum(m._fld1265) <> 0 OR sum(m._fld1266) <> 0

-- name: index_fresh_turnover
CREATE INDEX tt_fresh_turnover_bydims ON tt_fresh_turnover (_fld1261rref, _fld1262rref, _fld1263rref)

-- name: analyze_fresh_turnover
ANALYZE tt_fresh_turnover

-- name: delete_stale_turnover
DELETE FROM _accumrgtn1270 t
WHERE t._period = $1{{sepand "t"}}
  AND NOT EXISTS (SELECT 1 FROM tt_fresh_turnover f
                  WHERE f._fld1261rref = t._fld1261rref AND f._fld1262rref = t._fld1262rref
                    AND f._fld1263rref = t._fld1263rref AND f._fld1264 = t._fld1264
                    AND f._fld1265 = t._fld1265 AND f._fld1266 = t._fld1266 AND t._splitter = 0)
RETURNING t._fld1264 <> 0 OR t._fld1265 <> 0 OR t._fld1266 <> 0

-- name: insert_missing_turnover
INSERT INTO _accumrgtn1270 ({{sep}}_period, _fld1261rref, _fld1262rref, _fld1263rref,
                            _fld1264, _fld1265, _fld1266, _splitter)
SELECT {{sepv}}$1, f._fld1261rref, f._fld1262rref, f._fld1263rref, f._fld1264, f._fld1265, f._fld1266, 0
FROM tt_fresh_turnover f
WHERE NOT EXISTS (SELECT 1 FROM _accumrgtn1270 t
                  WHERE t._period = $1 AND t._fld1261rref = f._fld1261rref AND t._fld1262rref = f._fld1262rref
                    AND t._fld1263rref = f._fld1263rref{{sepand "t"}})

-- name: drop_temp_tables
DROP TABLE tt_fresh_balance, tt_fresh_turnover
