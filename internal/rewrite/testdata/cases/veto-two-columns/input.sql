SELECT 1 FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x, u.y FROM u)
