-- Key operation 10 (batch), re-posting a day: every posted document of the
-- last day at or before $1 that has documents, in time order, each posted
-- again in its own transaction with the posting statements of operations 3
-- and 4 (lines written back unchanged, movements and totals rewritten).

-- name: last_day
SELECT date_trunc('day', max(d._date_time))
FROM (SELECT s._date_time FROM _document187 s WHERE s._date_time <= $1 AND s._posted{{sepand "s"}}
      UNION ALL
      SELECT r._date_time FROM _document190 r WHERE r._date_time <= $1 AND r._posted{{sepand "r"}}) d

-- name: documents
-- $1 the day's start, $2 the next day's start. Kind 187 sales invoice, 190
-- goods receipt.
SELECT 187 AS kind, s._idrref, s._date_time
FROM _document187 s
WHERE s._date_time >= $1 AND s._date_time < $2 AND s._posted AND NOT s._marked{{sepand "s"}}
UNION ALL
SELECT 190, r._idrref, r._date_time
FROM _document190 r
WHERE r._date_time >= $1 AND r._date_time < $2 AND r._posted AND NOT r._marked{{sepand "r"}}
ORDER BY 3, 1, 2
