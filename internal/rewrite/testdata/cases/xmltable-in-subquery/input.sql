SELECT t.b FROM t WHERE t.a = 1 OR t.a IN (SELECT x.c FROM XMLTABLE('/r/i' PASSING xml '<r><i c="5"/></r>' COLUMNS c int PATH '@c') x)
