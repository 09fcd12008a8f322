SELECT 1 FROM t WHERE t.a = 1 OR t.a IN (SELECT myfn(u.x) FROM u)
