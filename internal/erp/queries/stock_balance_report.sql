-- Key operation 5, stock balance report: the balance "virtual table" of the
-- goods register for the warehouses $1 (the user's), valued at the
-- slice-last price of price type $3 on $2, joined to the catalogs.
-- The platform reads the balance at a moment from the totals:
--   current      the 3999-11-01 rows;
--   forward      the totals at the end of the previous month plus the
--                movements from the start of the month to the moment $4;
--   backward     the totals at the end of the moment's month minus the
--                movements from the moment to the end of that month
--                (chosen when the moment is in the second half of its month).
-- Totals are summed over _splitter and zero balances are left out.

-- name: current
SELECT w._description AS warehouse, g._description AS item_group, i._code, i._description AS item,
       u._description AS unit, b._qty, p._fld1303 AS price, round(b._qty * coalesce(p._fld1303, 0), 2) AS value
FROM (SELECT t._fld1235rref, t._fld1236rref, sum(t._fld1237) AS _qty
      FROM _accumrgt1239 t
      WHERE t._period = TIMESTAMP '3999-11-01 00:00:00' AND t._fld1235rref = ANY ($1::bytea[]){{sepand "t"}}
      GROUP BY t._fld1235rref, t._fld1236rref
      HAVING sum(t._fld1237) <> 0) b
JOIN _reference42 i ON i._idrref = b._fld1236rref{{sepand "i"}}
LEFT JOIN _reference42 g ON g._idrref = i._parentidrref{{sepand "g"}}
LEFT JOIN _reference27 u ON u._idrref = i._fld1061rref{{sepand "u"}}
LEFT JOIN _reference71 w ON w._idrref = b._fld1235rref{{sepand "w"}}
LEFT JOIN (SELECT s._fld1302rref, s._fld1303
           FROM _inforg1300 s
           JOIN (SELECT x._fld1301rref, x._fld1302rref, max(x._period) AS _period
                 FROM _inforg1300 x
                 WHERE x._period <= $2 AND x._fld1301rref = $3{{sepand "x"}}
                 GROUP BY x._fld1301rref, x._fld1302rref) last
             ON s._fld1301rref = last._fld1301rref AND s._fld1302rref = last._fld1302rref
            AND s._period = last._period{{sepand "s"}}) p ON p._fld1302rref = b._fld1236rref
ORDER BY w._description, g._description, i._description

-- name: forward
-- $4 the moment, $5 the first day of its month, $6 the first day of the
-- previous month (whose totals hold the balance at the end of it).
SELECT w._description AS warehouse, g._description AS item_group, i._code, i._description AS item,
       u._description AS unit, b._qty, p._fld1303 AS price, round(b._qty * coalesce(p._fld1303, 0), 2) AS value
FROM (SELECT v._fld1235rref, v._fld1236rref, sum(v._q) AS _qty
      FROM (SELECT t._fld1235rref, t._fld1236rref, t._fld1237 AS _q
            FROM _accumrgt1239 t
            WHERE t._period = $6 AND t._fld1235rref = ANY ($1::bytea[]){{sepand "t"}}
            UNION ALL
            SELECT m._fld1235rref, m._fld1236rref,
                   CASE WHEN m._recordkind = 0 THEN m._fld1237 ELSE -m._fld1237 END
            FROM _accumrg1234 m
            WHERE m._period >= $5 AND m._period < $4 AND m._active
              AND m._fld1235rref = ANY ($1::bytea[]){{sepand "m"}}) v
      GROUP BY v._fld1235rref, v._fld1236rref
      HAVING sum(v._q) <> 0) b
JOIN _reference42 i ON i._idrref = b._fld1236rref{{sepand "i"}}
LEFT JOIN _reference42 g ON g._idrref = i._parentidrref{{sepand "g"}}
LEFT JOIN _reference27 u ON u._idrref = i._fld1061rref{{sepand "u"}}
LEFT JOIN _reference71 w ON w._idrref = b._fld1235rref{{sepand "w"}}
LEFT JOIN (SELECT s._fld1302rref, s._fld1303
           FROM _inforg1300 s
           JOIN (SELECT x._fld1301rref, x._fld1302rref, max(x._period) AS _period
                 FROM _inforg1300 x
                 WHERE x._period <= $2 AND x._fld1301rref = $3{{sepand "x"}}
                 GROUP BY x._fld1301rref, x._fld1302rref) last
             ON s._fld1301rref = last._fld1301rref AND s._fld1302rref = last._fld1302rref
            AND s._period = last._period{{sepand "s"}}) p ON p._fld1302rref = b._fld1236rref
ORDER BY w._description, g._description, i._description

-- name: backward
-- $4 the moment, $5 the first day of its month (whose totals hold the
-- balance at the end of it), $6 the first day of the next month.
SELECT w._description AS warehouse, g._description AS item_group, i._code, i._description AS item,
       u._description AS unit, b._qty, p._fld1303 AS price, round(b._qty * coalesce(p._fld1303, 0), 2) AS value
FROM (SELECT v._fld1235rref, v._fld1236rref, sum(v._q) AS _qty
      FROM (SELECT t._fld1235rref, t._fld1236rref, t._fld1237 AS _q
            FROM _accumrgt1239 t
            WHERE t._period = $5 AND t._fld1235rref = ANY ($1::bytea[]){{sepand "t"}}
            UNION ALL
            SELECT m._fld1235rref, m._fld1236rref,
                   CASE WHEN m._recordkind = 0 THEN -m._fld1237 ELSE m._fld1237 END
            FROM _accumrg1234 m
            WHERE m._period >= $4 AND m._period < $6 AND m._active
              AND m._fld1235rref = ANY ($1::bytea[]){{sepand "m"}}) v
      GROUP BY v._fld1235rref, v._fld1236rref
      HAVING sum(v._q) <> 0) b
JOIN _reference42 i ON i._idrref = b._fld1236rref{{sepand "i"}}
LEFT JOIN _reference42 g ON g._idrref = i._parentidrref{{sepand "g"}}
LEFT JOIN _reference27 u ON u._idrref = i._fld1061rref{{sepand "u"}}
LEFT JOIN _reference71 w ON w._idrref = b._fld1235rref{{sepand "w"}}
LEFT JOIN (SELECT s._fld1302rref, s._fld1303
           FROM _inforg1300 s
           JOIN (SELECT x._fld1301rref, x._fld1302rref, max(x._period) AS _period
                 FROM _inforg1300 x
                 WHERE x._period <= $2 AND x._fld1301rref = $3{{sepand "x"}}
                 GROUP BY x._fld1301rref, x._fld1302rref) last
             ON s._fld1301rref = last._fld1301rref AND s._fld1302rref = last._fld1302rref
            AND s._period = last._period{{sepand "s"}}) p ON p._fld1302rref = b._fld1236rref
ORDER BY w._description, g._description, i._description
