SELECT	1	+	nosuchcol;
