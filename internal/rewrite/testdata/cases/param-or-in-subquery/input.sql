SELECT * FROM t m WHERE m.a = $1 OR m.a IN (SELECT u.x FROM u)
