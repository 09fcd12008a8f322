SELECT 1 FROM t WHERE t.a IN (1, 2) OR t.a = ANY ($2) OR CASE WHEN false THEN t.a IN (SELECT u.x FROM u WHERE u.y > $1) ELSE t.a = ANY (ARRAY (SELECT u.x FROM u WHERE u.y > $1)) END
