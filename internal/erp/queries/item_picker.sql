-- Key operation 8, the item picker of a document form: a "contains" search
-- on the description (ILIKE '%word%', no index can serve it), the first 50
-- matches with their slice-last price of price type $3 on $2 (the periodic
-- prices register: per item the row with the greatest _period <= $2, the
-- platform's max(_period) subquery joined back) and the current balance in
-- warehouse $4.

-- name: search
WITH found AS (
    SELECT i._idrref, i._code, i._description, i._fld1060, i._fld1061rref
    FROM _reference42 i
    WHERE i._folder AND NOT i._marked AND i._description ILIKE $1{{sepand "i"}}
    ORDER BY i._description, i._idrref
    LIMIT 50)
SELECT f._idrref, f._code, f._description, f._fld1060 AS article, u._description AS unit,
       p._fld1303 AS price, coalesce(b._qty, 0) AS balance
FROM found f
LEFT JOIN _reference27 u ON u._idrref = f._fld1061rref{{sepand "u"}}
LEFT JOIN (SELECT s._fld1302rref, s._fld1303
           FROM _inforg1300 s
           JOIN (SELECT x._fld1301rref, x._fld1302rref, max(x._period) AS _period
                 FROM _inforg1300 x
                 WHERE x._period <= $2 AND x._fld1301rref = $3
                   AND x._fld1302rref IN (SELECT f2._idrref FROM found f2){{sepand "x"}}
                 GROUP BY x._fld1301rref, x._fld1302rref) last
             ON s._fld1301rref = last._fld1301rref AND s._fld1302rref = last._fld1302rref
            AND s._period = last._period{{sepand "s"}}) p ON p._fld1302rref = f._idrref
LEFT JOIN (SELECT t._fld1236rref, sum(t._fld1237) AS _qty
           FROM _accumrgt1239 t
           WHERE t._period = TIMESTAMP '3999-11-01 00:00:00' AND t._fld1235rref = $4
             AND t._fld1236rref IN (SELECT f3._idrref FROM found f3){{sepand "t"}}
           GROUP BY t._fld1236rref) b ON b._fld1236rref = f._idrref
ORDER BY f._description, f._idrref
