select /* keep */ * from T m where M.A = 7 or m.a = any (ARRAY(select u.x from u -- c
))
