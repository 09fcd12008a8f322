SELECT '日本語日本語日本語' || nosuchcol;
