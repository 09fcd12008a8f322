SELECT * FROM t m WHERE m.a = $1 OR m.a = ANY (ARRAY (SELECT u.x FROM u))
