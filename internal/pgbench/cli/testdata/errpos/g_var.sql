\set x 12345
SELECT :x + nosuchcol;
