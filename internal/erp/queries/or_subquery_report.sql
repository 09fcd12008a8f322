-- Key operation 7, an item analysis report with a filter the platform turns
-- into OR over subqueries: for an item and its analogues, one row per item
-- with the goods statement of the period [$4, $5) (opening balance,
-- receipts, shipments, closing balance) and the sales of the period and of
-- the year before it ([$6, $4)), read from the records (movements) of the
-- goods and the sales registers.
--
-- The report's filter is on attributes of the item dimension:
--   (Item.Parent = $1 AND Item.Description LIKE $2)  the item's group and
--                                                    kind ("Drill %")
--   OR Item.Description LIKE $3                      the same product under
--                                                    any brand ("Drill steel
--                                                    12x40 %")
--   OR Item.Article LIKE $7                          the item's product line
--                                                    ("BAL-363%")
-- Inside a register's condition the platform translates a condition on a
-- dimension's attribute into "dimension IN (SELECT _idrref FROM catalog
-- WHERE ...)", so each register is filtered by
--   item IN (SELECT ... catalog ...) OR item IN (SELECT ...) OR item IN (...)
-- while the catalog itself, the report's main table, gets the plain
-- condition on its own columns. The subqueries select a few items (a group
-- holds ~200 items of ~50 kinds; a product is rarely sold under two
-- brands; a product line has one or two items): a few hundred register
-- rows at most.
--
-- Both registers have an index whose leading column is the item
-- (_accumrg1234_bydims1238_rtrn on _fld1236rref, _period, ...;
-- _accumrg1260_bydims1268_rtrn on _fld1263rref, _period, ...), the period
-- being its second column, yet stock PostgreSQL cannot use it for an OR
-- with a subquery arm: each register is read by a sequential scan whose
-- filter evaluates the OR (hashed SubPlans) row by row. The opening balance
-- is computed from the movements before $4 and the sales cover two years,
-- so both scans evaluate it on almost every row: about 1.7 million rows at
-- scale 1. Rewritten to "= ANY (ARRAY(subquery))" each register is read by
-- a BitmapOr of index scans of the few items' rows, and the catalog by its
-- own indexes: the report touches a few hundred rows at any scale.
--
-- report_any is the same report as erplab's rewrite rule or_any_array
-- (package rewrite) sends it: every "IN (subquery)" arm of the two ORs
-- becomes "= ANY (ARRAY (subquery))". Not a key operation: the contrast for
-- EXPLAIN; the tests check it equals the rule's output for report.

-- name: report
SELECT i._code AS code, i._description AS item,
       coalesce(g._opening, 0) AS opening, coalesce(g._receipt, 0) AS received,
       coalesce(g._expense, 0) AS shipped, coalesce(g._opening + g._receipt - g._expense, 0) AS closing,
       coalesce(s._qty, 0) AS sold_qty, coalesce(s._amount, 0) AS sold_amount,
       coalesce(s._qty_year_ago, 0) AS sold_qty_year_ago, coalesce(s._amount_year_ago, 0) AS sold_amount_year_ago
FROM _reference42 i
LEFT JOIN (SELECT m._fld1236rref AS _item,
                  sum(CASE WHEN m._period >= $4 THEN 0 WHEN m._recordkind = 0 THEN m._fld1237 ELSE -m._fld1237 END) AS _opening,
                  sum(CASE WHEN m._period >= $4 AND m._recordkind = 0 THEN m._fld1237 ELSE 0 END) AS _receipt,
                  sum(CASE WHEN m._period >= $4 AND m._recordkind = 1 THEN m._fld1237 ELSE 0 END) AS _expense
           FROM _accumrg1234 m
           WHERE m._period < $5 AND m._active{{sepand "m"}}
             AND (m._fld1236rref IN (SELECT a._idrref FROM _reference42 a
                                     WHERE a._folder AND a._parentidrref = $1 AND a._description LIKE $2{{sepand "a"}})
               OR m._fld1236rref IN (SELECT b._idrref FROM _reference42 b
                                     WHERE b._description LIKE $3{{sepand "b"}})
               OR m._fld1236rref IN (SELECT c._idrref FROM _reference42 c
                                     WHERE c._fld1060 LIKE $7{{sepand "c"}}))
           GROUP BY m._fld1236rref) g ON g._item = i._idrref
LEFT JOIN (SELECT r._fld1263rref AS _item,
                  sum(CASE WHEN r._period >= $4 THEN r._fld1264 ELSE 0 END) AS _qty,
                  sum(CASE WHEN r._period >= $4 THEN r._fld1265 ELSE 0 END) AS _amount,
                  sum(CASE WHEN r._period < $4 THEN r._fld1264 ELSE 0 END) AS _qty_year_ago,
                  sum(CASE WHEN r._period < $4 THEN r._fld1265 ELSE 0 END) AS _amount_year_ago
           FROM _accumrg1260 r
           WHERE r._period >= $6 AND r._period < $5 AND r._active{{sepand "r"}}
             AND (r._fld1263rref IN (SELECT a._idrref FROM _reference42 a
                                     WHERE a._folder AND a._parentidrref = $1 AND a._description LIKE $2{{sepand "a"}})
               OR r._fld1263rref IN (SELECT b._idrref FROM _reference42 b
                                     WHERE b._description LIKE $3{{sepand "b"}})
               OR r._fld1263rref IN (SELECT c._idrref FROM _reference42 c
                                     WHERE c._fld1060 LIKE $7{{sepand "c"}}))
           GROUP BY r._fld1263rref) s ON s._item = i._idrref
WHERE ((i._folder AND i._parentidrref = $1 AND i._description LIKE $2) OR i._description LIKE $3
       OR i._fld1060 LIKE $7){{sepand "i"}}
ORDER BY i._description, i._code

-- name: report_any
SELECT i._code AS code, i._description AS item,
       coalesce(g._opening, 0) AS opening, coalesce(g._receipt, 0) AS received,
       coalesce(g._expense, 0) AS shipped, coalesce(g._opening + g._receipt - g._expense, 0) AS closing,
       coalesce(s._qty, 0) AS sold_qty, coalesce(s._amount, 0) AS sold_amount,
       coalesce(s._qty_year_ago, 0) AS sold_qty_year_ago, coalesce(s._amount_year_ago, 0) AS sold_amount_year_ago
FROM _reference42 i
LEFT JOIN (SELECT m._fld1236rref AS _item,
                  sum(CASE WHEN m._period >= $4 THEN 0 WHEN m._recordkind = 0 THEN m._fld1237 ELSE -m._fld1237 END) AS _opening,
                  sum(CASE WHEN m._period >= $4 AND m._recordkind = 0 THEN m._fld1237 ELSE 0 END) AS _receipt,
                  sum(CASE WHEN m._period >= $4 AND m._recordkind = 1 THEN m._fld1237 ELSE 0 END) AS _expense
           FROM _accumrg1234 m
           WHERE m._period < $5 AND m._active{{sepand "m"}}
             AND (m._fld1236rref = ANY (ARRAY (SELECT a._idrref FROM _reference42 a
                                     WHERE a._folder AND a._parentidrref = $1 AND a._description LIKE $2{{sepand "a"}}))
               OR m._fld1236rref = ANY (ARRAY (SELECT b._idrref FROM _reference42 b
                                     WHERE b._description LIKE $3{{sepand "b"}}))
               OR m._fld1236rref = ANY (ARRAY (SELECT c._idrref FROM _reference42 c
                                     WHERE c._fld1060 LIKE $7{{sepand "c"}})))
           GROUP BY m._fld1236rref) g ON g._item = i._idrref
LEFT JOIN (SELECT r._fld1263rref AS _item,
                  sum(CASE WHEN r._period >= $4 THEN r._fld1264 ELSE 0 END) AS _qty,
                  sum(CASE WHEN r._period >= $4 THEN r._fld1265 ELSE 0 END) AS _amount,
                  sum(CASE WHEN r._period < $4 THEN r._fld1264 ELSE 0 END) AS _qty_year_ago,
                  sum(CASE WHEN r._period < $4 THEN r._fld1265 ELSE 0 END) AS _amount_year_ago
           FROM _accumrg1260 r
           WHERE r._period >= $6 AND r._period < $5 AND r._active{{sepand "r"}}
             AND (r._fld1263rref = ANY (ARRAY (SELECT a._idrref FROM _reference42 a
                                     WHERE a._folder AND a._parentidrref = $1 AND a._description LIKE $2{{sepand "a"}}))
               OR r._fld1263rref = ANY (ARRAY (SELECT b._idrref FROM _reference42 b
                                     WHERE b._description LIKE $3{{sepand "b"}}))
               OR r._fld1263rref = ANY (ARRAY (SELECT c._idrref FROM _reference42 c
                                     WHERE c._fld1060 LIKE $7{{sepand "c"}})))
           GROUP BY r._fld1263rref) s ON s._item = i._idrref
WHERE ((i._folder AND i._parentidrref = $1 AND i._description LIKE $2) OR i._description LIKE $3
       OR i._fld1060 LIKE $7){{sepand "i"}}
ORDER BY i._description, i._code
