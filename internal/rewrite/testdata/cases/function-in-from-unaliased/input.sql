SELECT t.b FROM t WHERE t.a = 1 OR t.a IN (SELECT generate_series.generate_series FROM generate_series(1, 3))
