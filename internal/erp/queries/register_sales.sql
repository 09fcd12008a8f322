-- The sales turnover register (_accumrg1260, monthly turnover totals
-- _accumrgtn1270) part of posting a sales invoice (key operations 3 and
-- 10), after the goods register's totals are locked (every writer locks
-- balance totals before turnover totals). Same steps as register_goods.sql;
-- only the document's month has turnover totals to change.

-- name: create_movements
CREATE TEMP TABLE tt_sales_mov (
    _lineno numeric(9,0) NOT NULL,
    _fld1261rref bytea NOT NULL,
    _fld1262rref bytea NOT NULL,
    _fld1263rref bytea NOT NULL,
    _fld1264 numeric(15,3) NOT NULL,
    _fld1265 numeric(15,2) NOT NULL,
    _fld1266 numeric(15,2) NOT NULL)

-- name: index_movements
CREATE INDEX tt_sales_mov_bydims ON tt_sales_mov (_fld1261rref, _fld1262rref, _fld1263rref)

-- name: analyze_movements
ANALYZE tt_sales_mov

-- name: create_changes
CREATE TEMP TABLE tt_sales_chg (
    _period timestamp NOT NULL,
    _fld1261rref bytea NOT NULL,
    _fld1262rref bytea NOT NULL,
    _fld1263rref bytea NOT NULL,
    _dq numeric(21,3) NOT NULL,
    _da numeric(21,2) NOT NULL,
    _dv numeric(21,2) NOT NULL)

-- name: index_changes
CREATE INDEX tt_sales_chg_bykey ON tt_sales_chg (_period, _fld1261rref, _fld1262rref, _fld1263rref)

-- name: fill_changes
-- $1 recorder type, $2 recorder reference, $3 first day of the document's
-- month.
INSERT INTO tt_sales_chg (_period, _fld1261rref, _fld1262rref, _fld1263rref, _dq, _da, _dv)
SELECT $3::timestamp, m._fld1261rref, m._fld1262rref, m._fld1263rref, sum(m._q), sum(m._a), sum(m._v)
FROM (SELECT n._fld1261rref, n._fld1262rref, n._fld1263rref, n._fld1264 AS _q, n._fld1265 AS _a, n._fld1266 AS _v
      FROM tt_sales_mov n
      UNION ALL
      SELECT o._fld1261rref, o._fld1262rref, o._fld1263rref, -o._fld1264, -o._fld1265, -o._fld1266
      FROM _accumrg1260 o
      WHERE o._recordertref = $1 AND o._recorderrref = $2 AND o._active{{sepand "o"}}) m
GROUP BY m._fld1261rref, m._fld1262rref, m._fld1263rref

-- name: analyze_changes
ANALYZE tt_sales_chg

-- name: ensure_totals
INSERT INTO _accumrgtn1270 ({{sep}}_period, _fld1261rref, _fld1262rref, _fld1263rref,
                            _fld1264, _fld1265, _fld1266, _splitter)
SELECT {{sepv}}c._period, c._fld1261rref, c._fld1262rref, c._fld1263rref, 0, 0, 0, 0
FROM tt_sales_chg c
WHERE c._dq <> 0 OR c._da <> 0 OR c._dv <> 0
ORDER BY c._period, c._fld1261rref, c._fld1262rref, c._fld1263rref
ON CONFLICT ({{sep}}_period, _fld1261rref, _fld1262rref, _fld1263rref, _splitter) DO NOTHING

-- name: lock_totals
SELECT t._fld1264
FROM _accumrgtn1270 t
JOIN tt_sales_chg c
  ON t._period = c._period AND t._fld1261rref = c._fld1261rref AND t._fld1262rref = c._fld1262rref
 AND t._fld1263rref = c._fld1263rref{{sepand "t"}}
ORDER BY t._period, t._fld1261rref, t._fld1262rref, t._fld1263rref, t._splitter
FOR UPDATE OF t

-- name: delete_movements
DELETE FROM _accumrg1260 o WHERE o._recordertref = $1 AND o._recorderrref = $2{{sepand "o"}}

-- name: insert_movements
-- $1 recorder type, $2 recorder reference, $3 the document's date.
INSERT INTO _accumrg1260 ({{sep}}_period, _recordertref, _recorderrref, _lineno, _active,
                          _fld1261rref, _fld1262rref, _fld1263rref, _fld1264, _fld1265, _fld1266)
SELECT {{sepv}}$3, $1, $2, n._lineno, TRUE, n._fld1261rref, n._fld1262rref, n._fld1263rref,
       n._fld1264, n._fld1265, n._fld1266
FROM tt_sales_mov n
ORDER BY n._lineno

-- name: update_totals
UPDATE _accumrgtn1270 t
SET _fld1264 = t._fld1264 + c._dq, _fld1265 = t._fld1265 + c._da, _fld1266 = t._fld1266 + c._dv
FROM tt_sales_chg c
WHERE t._period = c._period AND t._fld1261rref = c._fld1261rref AND t._fld1262rref = c._fld1262rref
  AND t._fld1263rref = c._fld1263rref AND t._splitter = 0{{sepand "t"}}

-- name: drop_temp_tables
DROP TABLE tt_sales_mov, tt_sales_chg
