SELECT 1 FROM t WHERE (t.a, t.b) IN (SELECT u.x, u.y FROM u) OR t.a = 1
