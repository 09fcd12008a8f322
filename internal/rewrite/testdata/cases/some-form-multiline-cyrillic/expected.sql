-- отчёт «Остатки»: строка 1
SELECT т.наименование
  FROM справочник т
  WHERE т.вид = 'Товар ёжик'
     OR CASE WHEN false THEN т.вид = some (SELECT в.код FROM виды в) ELSE т.вид = some (ARRAY(SELECT в.код FROM виды в)) END
