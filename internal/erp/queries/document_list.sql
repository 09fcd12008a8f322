-- Key operation 1, document list under record-level security (RLS).
-- The platform copies the user's allowed access values into a temporary
-- table {tt} (see temp_tables.sql), then reads a keyset page of the list,
-- newest first, keeping only documents whose access key (_inforg1400)
-- has a value (_inforg1410) among the user's: an EXISTS chain evaluated for
-- every document scanned until the page is full. Users who may see few
-- warehouses make the scan long.
-- $1 date and $2 reference of the row the page starts after (the keyset),
-- $3 page size.

-- name: fill_rls_values
INSERT INTO {tt} (_type, _rtref, _rrref)
SELECT v._fld1422_type, v._fld1422_rtref, v._fld1422_rrref
FROM _inforg1420 v
WHERE v._fld1421rref = $1{{sepand "v"}}

-- name: page_sales_invoices
SELECT d._idrref, d._date_time, d._number, d._posted, d._marked, d._fld3009 AS amount,
       c._description AS counterparty, w._description AS warehouse, o._description AS organization
FROM _document187 d
LEFT JOIN _reference58 c ON c._idrref = d._fld3002rref{{sepand "c"}}
LEFT JOIN _reference71 w ON w._idrref = d._fld3004rref{{sepand "w"}}
LEFT JOIN _reference19 o ON o._idrref = d._fld3001rref{{sepand "o"}}
WHERE d._date_time <= $1 AND (d._date_time < $1 OR d._idrref < $2){{sepand "d"}}
  AND EXISTS (
      SELECT 1 FROM _inforg1400 k
      WHERE k._fld1401_type = '\x08' AND k._fld1401_rtref = '\x000000bb'
        AND k._fld1401_rrref = d._idrref{{sepand "k"}}
        AND EXISTS (
            SELECT 1 FROM _inforg1410 v
            WHERE v._fld1411rref = k._fld1402rref{{sepand "v"}}
              AND EXISTS (
                  SELECT 1 FROM {tt} u
                  WHERE u._type = v._fld1412_type AND u._rtref = v._fld1412_rtref
                    AND u._rrref = v._fld1412_rrref)))
ORDER BY d._date_time DESC, d._idrref DESC
LIMIT $3

-- name: page_goods_receipts
SELECT d._idrref, d._date_time, d._number, d._posted, d._marked, d._fld3108 AS amount,
       c._description AS counterparty, w._description AS warehouse, o._description AS organization
FROM _document190 d
LEFT JOIN _reference58 c ON c._idrref = d._fld3102rref{{sepand "c"}}
LEFT JOIN _reference71 w ON w._idrref = d._fld3104rref{{sepand "w"}}
LEFT JOIN _reference19 o ON o._idrref = d._fld3101rref{{sepand "o"}}
WHERE d._date_time <= $1 AND (d._date_time < $1 OR d._idrref < $2){{sepand "d"}}
  AND EXISTS (
      SELECT 1 FROM _inforg1400 k
      WHERE k._fld1401_type = '\x08' AND k._fld1401_rtref = '\x000000be'
        AND k._fld1401_rrref = d._idrref{{sepand "k"}}
        AND EXISTS (
            SELECT 1 FROM _inforg1410 v
            WHERE v._fld1411rref = k._fld1402rref{{sepand "v"}}
              AND EXISTS (
                  SELECT 1 FROM {tt} u
                  WHERE u._type = v._fld1412_type AND u._rtref = v._fld1412_rtref
                    AND u._rrref = v._fld1412_rrref)))
ORDER BY d._date_time DESC, d._idrref DESC
LIMIT $3
