-- What a virtual user's session looks up once, not on every key operation:
-- the catalogs' keys with their popularity (a snapshot shared by the VUs of
-- one database) and the identity of the user the VU logs in as.

-- name: meta
-- The marker Init writes (see load.go): its creation time identifies the
-- data set, so a snapshot of an older one is not reused.
SELECT coalesce(max(value) FILTER (WHERE key = 'created_at'), ''),
       coalesce(max(value) FILTER (WHERE key = 'separator'), 'false'),
       coalesce(max(value) FILTER (WHERE key = 'state'), '')
FROM _erplab_meta

-- name: users
-- Users that may log in, with their home warehouse.
SELECT u._idrref, u._fld1052rref
FROM _reference37 u
WHERE NOT u._fld1053 AND NOT u._marked
ORDER BY u._code

-- name: user_warehouses
-- Warehouses a user may see under record-level security: allowed directly
-- (a warehouse value, table 71 = \x00000047) or through their organization
-- (an organization value, table 19 = \x00000013); with each warehouse's
-- organization.
SELECT w._idrref, w._fld1150rref
FROM _reference71 w
WHERE EXISTS (
    SELECT 1 FROM _inforg1420 v
    WHERE v._fld1421rref = $1 AND v._fld1422_type = '\x08'
      AND ((v._fld1422_rtref = '\x00000047' AND v._fld1422_rrref = w._idrref)
        OR (v._fld1422_rtref = '\x00000013' AND v._fld1422_rrref = w._fld1150rref)))
ORDER BY w._code

-- name: items_by_stock
-- Item elements, most stocked first (stock follows demand in the data), with
-- their description (item picker search words), group and article (the item
-- analysis report's filter).
SELECT i._idrref, i._description, i._parentidrref, i._fld1060
FROM _reference42 i
LEFT JOIN (SELECT t._fld1236rref, sum(t._fld1237) AS _qty
           FROM _accumrgt1239 t
           WHERE t._period = TIMESTAMP '3999-11-01 00:00:00'
           GROUP BY t._fld1236rref) b ON b._fld1236rref = i._idrref
WHERE i._folder AND NOT i._marked
ORDER BY coalesce(b._qty, 0) DESC, i._code

-- name: item_groups
SELECT _idrref FROM _reference42 WHERE NOT _folder ORDER BY _code

-- name: customers_by_sales
-- Customers, the most invoiced first, with their main manager.
SELECT c._idrref, c._fld1103rref
FROM _reference58 c
LEFT JOIN (SELECT _fld3002rref, count(*) AS n FROM _document187 GROUP BY _fld3002rref) s
       ON s._fld3002rref = c._idrref
WHERE c._folder AND NOT c._marked AND c._fld1104
ORDER BY coalesce(s.n, 0) DESC, c._code

-- name: price_types
-- Purchase, wholesale, retail, in code order.
SELECT _idrref FROM _reference33 ORDER BY _code
