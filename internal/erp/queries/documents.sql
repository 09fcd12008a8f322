-- Picking the document a user works on: the newest document of the user's
-- warehouse dated at or before a moment drawn with a recency skew (users
-- mostly work on this week's documents), or the oldest one after it when
-- there is none before. Marked-for-deletion documents are not opened.
-- $1 the moment, $2 the warehouse.

-- name: pick_sales_invoice_before
SELECT d._idrref FROM _document187 d
WHERE d._date_time <= $1 AND d._fld3004rref = $2 AND NOT d._marked{{sepand "d"}}
ORDER BY d._date_time DESC, d._idrref DESC
LIMIT 1

-- name: pick_sales_invoice_after
SELECT d._idrref FROM _document187 d
WHERE d._date_time > $1 AND d._fld3004rref = $2 AND NOT d._marked{{sepand "d"}}
ORDER BY d._date_time, d._idrref
LIMIT 1

-- name: pick_goods_receipt_before
SELECT d._idrref FROM _document190 d
WHERE d._date_time <= $1 AND d._fld3104rref = $2 AND NOT d._marked{{sepand "d"}}
ORDER BY d._date_time DESC, d._idrref DESC
LIMIT 1

-- name: pick_goods_receipt_after
SELECT d._idrref FROM _document190 d
WHERE d._date_time > $1 AND d._fld3104rref = $2 AND NOT d._marked{{sepand "d"}}
ORDER BY d._date_time, d._idrref
LIMIT 1
