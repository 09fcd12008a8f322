-- Key operation 9, the temp-table storm: several rounds of the platform's
-- "split a query through temporary tables" pattern. Each round takes two
-- temporary tables of the goods shape (temp_tables.sql; created and dropped
-- in the "1c" style, cached and truncated in the "lsfusion" style): the
-- selection {tt} (current balances of one item group in warehouse $1),
-- ANALYZE, the valuation {tt2} (the selection times the latest price),
-- ANALYZE, and a final read joined to the items catalog.

-- name: fill_selection
-- $1 warehouse, $2 item group.
INSERT INTO {tt} (_fld1235rref, _fld1236rref, _fld1237)
SELECT t._fld1235rref, t._fld1236rref, sum(t._fld1237)
FROM _accumrgt1239 t
JOIN _reference42 i ON i._idrref = t._fld1236rref{{sepand "i"}}
WHERE t._period = TIMESTAMP '3999-11-01 00:00:00' AND t._fld1235rref = $1 AND i._parentidrref = $2{{sepand "t"}}
GROUP BY t._fld1235rref, t._fld1236rref

-- name: fill_valuation
-- $1 the price date, $2 the price type: per item the latest price on or
-- before $1 (an index probe of _inforg1300_bydims_rrt per row), so the round
-- costs mostly its temp-table DDL.
INSERT INTO {tt2} (_fld1235rref, _fld1236rref, _fld1237)
SELECT a._fld1235rref, a._fld1236rref, round(a._fld1237 * coalesce(p._fld1303, 0), 3)
FROM {tt} a
LEFT JOIN LATERAL (SELECT x._fld1303
                   FROM _inforg1300 x
                   WHERE x._fld1301rref = $2 AND x._fld1302rref = a._fld1236rref AND x._period <= $1{{sepand "x"}}
                   ORDER BY x._period DESC
                   LIMIT 1) p ON TRUE

-- name: read
SELECT count(*), coalesce(sum(v._fld1237), 0)::float8, count(DISTINCT i._parentidrref)
FROM {tt2} v
JOIN _reference42 i ON i._idrref = v._fld1236rref{{sepand "i"}}
