-- Key operation 6, sales turnover report by customer over N months for
-- organization $1: the turnover "virtual table" of the sales register reads
-- the monthly turnover totals for the whole months [$2, $3) and the
-- movements of the partial last month [$3, $4), UNION ALL, then groups and
-- joins the catalogs. Totals are summed over _splitter by the GROUP BY.

-- name: report
SELECT cg._description AS customer_group, c._description AS customer, c._fld1100 AS tax_id,
       sum(s._q) AS qty, sum(s._a) AS amount, sum(s._v) AS vat, count(DISTINCT s._fld1263rref) AS items
FROM (SELECT t._fld1262rref, t._fld1263rref, t._fld1264 AS _q, t._fld1265 AS _a, t._fld1266 AS _v
      FROM _accumrgtn1270 t
      WHERE t._period >= $2 AND t._period < $3 AND t._fld1261rref = $1{{sepand "t"}}
      UNION ALL
      SELECT m._fld1262rref, m._fld1263rref, m._fld1264, m._fld1265, m._fld1266
      FROM _accumrg1260 m
      WHERE m._period >= $3 AND m._period < $4 AND m._active AND m._fld1261rref = $1{{sepand "m"}}) s
JOIN _reference58 c ON c._idrref = s._fld1262rref{{sepand "c"}}
LEFT JOIN _reference58 cg ON cg._idrref = c._parentidrref{{sepand "cg"}}
GROUP BY cg._description, c._description, c._fld1100
ORDER BY amount DESC
