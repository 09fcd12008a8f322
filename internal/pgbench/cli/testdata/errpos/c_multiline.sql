SELECT 1,
  2 +;
