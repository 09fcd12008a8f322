select /* keep */ * from T m where M.A = 7 or m.a = any (select u.x from u -- c
)
