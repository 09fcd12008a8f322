select /* keep */ * from T m where M.A = 7 or CASE WHEN false THEN m.a = any (select u.x from u -- c
) ELSE m.a = any (ARRAY(select u.x from u -- c
)) END
