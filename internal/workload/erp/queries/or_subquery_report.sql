-- Key operation 7, a filtered report whose filter is one indexed reference
-- column compared with OR where one arm is a subquery: sales of the chosen
-- customer $1 OR of any customer in the temporary table {tt} (the customers
-- the user manages), over [$2, $3). The sales register has an index whose
-- leading column is the customer (_accumrg1260_bydims1269_rtrn, on
-- _fld1262rref, _period, ...), yet stock PostgreSQL cannot use it for
-- "col = $1 OR col IN (SELECT ...)": the OR with a subquery arm stays a
-- filter (a hashed SubPlan) of a sequential scan of the whole register.

-- name: report
SELECT c._description AS customer, i._description AS item,
       sum(m._fld1264) AS qty, sum(m._fld1265) AS amount, sum(m._fld1266) AS vat
FROM _accumrg1260 m
JOIN _reference58 c ON c._idrref = m._fld1262rref{{sepand "c"}}
JOIN _reference42 i ON i._idrref = m._fld1263rref{{sepand "i"}}
WHERE m._period >= $2 AND m._period < $3 AND m._active{{sepand "m"}}
  AND (m._fld1262rref = $1 OR m._fld1262rref IN (SELECT u._ref FROM {tt} u))
GROUP BY c._description, i._description
ORDER BY amount DESC

-- name: report_any
-- The same report with the OR folded into one "= ANY (array)" condition, the
-- rewrite a server can do before planning (field notes, cause 3): the
-- array (the constant and the subquery's rows, an InitPlan) is computed
-- once and the customer index is usable. Not a key operation: the
-- contrast for EXPLAIN.
SELECT c._description AS customer, i._description AS item,
       sum(m._fld1264) AS qty, sum(m._fld1265) AS amount, sum(m._fld1266) AS vat
FROM _accumrg1260 m
JOIN _reference58 c ON c._idrref = m._fld1262rref{{sepand "c"}}
JOIN _reference42 i ON i._idrref = m._fld1263rref{{sepand "i"}}
WHERE m._period >= $2 AND m._period < $3 AND m._active{{sepand "m"}}
  AND m._fld1262rref = ANY (ARRAY[$1::bytea] || ARRAY(SELECT u._ref FROM {tt} u))
GROUP BY c._description, i._description
ORDER BY amount DESC

-- name: fill_customers
-- The customers whose main manager is user $1.
INSERT INTO {tt} (_ref)
SELECT c._idrref FROM _reference58 c
WHERE c._fld1103rref = $1 AND c._folder AND c._fld1104{{sepand "c"}}
