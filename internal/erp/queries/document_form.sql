-- Key operation 2, opening a document form: the header with every
-- reference field's presentation, and the lines with theirs. The platform
-- joins a catalog for each reference field and for the fields of those
-- catalogs that the form shows (the counterparty's group and manager, the
-- contract's currency and price type, the warehouse's responsible user and
-- department, ...): 20+ relations, beyond join_collapse_limit (8) and
-- geqo_threshold (12), so planning costs more than executing a lookup by
-- primary key. The values are sent with every execution (an unnamed
-- statement, planned each time, like the platform's generated texts).
-- $1 is the document reference.

-- name: header_sales_invoice
SELECT d._idrref, d._version, d._marked, d._date_time, d._number, d._posted,
       d._fld3009 AS amount, d._fld3010 AS vat, d._fld3012 AS comment,
       org._description AS organization, org._fld1010 AS organization_tax_id,
       cp._description AS counterparty, cp._fld1100 AS counterparty_tax_id, cp._fld1102 AS counterparty_full_name,
       cpg._description AS counterparty_group,
       mgr._description AS counterparty_manager, mgrdep._description AS manager_department,
       mgrorg._description AS manager_organization,
       ctr._description AS contract, ctrorg._description AS contract_organization,
       ctrcur._code AS contract_currency, ctrpt._description AS contract_price_type,
       wh._description AS warehouse, whresp._description AS warehouse_responsible,
       whdep._description AS warehouse_department, whpt._description AS warehouse_price_type,
       cur._code AS currency, cur._fld1020 AS currency_name,
       pt._description AS price_type, ptcur._code AS price_type_currency,
       usr._description AS responsible, usr._fld1050 AS responsible_login, usrwh._description AS responsible_home_warehouse,
       dep._description AS department, deporg._description AS department_organization,
       CASE WHEN d._fld3011_type = '\x08' AND d._fld3011_rtref = '\x000000be' THEN base._number END AS base_number,
       CASE WHEN d._fld3011_type = '\x08' AND d._fld3011_rtref = '\x000000be' THEN base._date_time END AS base_date,
       basecp._description AS base_counterparty, basewh._description AS base_warehouse
FROM _document187 d
LEFT JOIN _reference19 org ON org._idrref = d._fld3001rref{{sepand "org"}}
LEFT JOIN _reference58 cp ON cp._idrref = d._fld3002rref{{sepand "cp"}}
LEFT JOIN _reference58 cpg ON cpg._idrref = cp._parentidrref{{sepand "cpg"}}
LEFT JOIN _reference37 mgr ON mgr._idrref = cp._fld1103rref{{sepand "mgr"}}
LEFT JOIN _reference31 mgrdep ON mgrdep._idrref = mgr._fld1051rref{{sepand "mgrdep"}}
LEFT JOIN _reference19 mgrorg ON mgrorg._idrref = mgrdep._fld1035rref{{sepand "mgrorg"}}
LEFT JOIN _reference61 ctr ON ctr._idrref = d._fld3003rref{{sepand "ctr"}}
LEFT JOIN _reference19 ctrorg ON ctrorg._idrref = ctr._fld1110rref{{sepand "ctrorg"}}
LEFT JOIN _reference24 ctrcur ON ctrcur._idrref = ctr._fld1111rref{{sepand "ctrcur"}}
LEFT JOIN _reference33 ctrpt ON ctrpt._idrref = ctr._fld1112rref{{sepand "ctrpt"}}
LEFT JOIN _reference71 wh ON wh._idrref = d._fld3004rref{{sepand "wh"}}
LEFT JOIN _reference37 whresp ON whresp._idrref = wh._fld1151rref{{sepand "whresp"}}
LEFT JOIN _reference31 whdep ON whdep._idrref = wh._fld1152rref{{sepand "whdep"}}
LEFT JOIN _reference33 whpt ON whpt._idrref = wh._fld1153rref{{sepand "whpt"}}
LEFT JOIN _reference24 cur ON cur._idrref = d._fld3005rref{{sepand "cur"}}
LEFT JOIN _reference33 pt ON pt._idrref = d._fld3006rref{{sepand "pt"}}
LEFT JOIN _reference24 ptcur ON ptcur._idrref = pt._fld1040rref{{sepand "ptcur"}}
LEFT JOIN _reference37 usr ON usr._idrref = d._fld3007rref{{sepand "usr"}}
LEFT JOIN _reference71 usrwh ON usrwh._idrref = usr._fld1052rref{{sepand "usrwh"}}
LEFT JOIN _reference31 dep ON dep._idrref = d._fld3008rref{{sepand "dep"}}
LEFT JOIN _reference19 deporg ON deporg._idrref = dep._fld1035rref{{sepand "deporg"}}
LEFT JOIN _document190 base ON d._fld3011_type = '\x08' AND d._fld3011_rtref = '\x000000be'
      AND base._idrref = d._fld3011_rrref{{sepand "base"}}
LEFT JOIN _reference58 basecp ON basecp._idrref = base._fld3102rref{{sepand "basecp"}}
LEFT JOIN _reference71 basewh ON basewh._idrref = base._fld3104rref{{sepand "basewh"}}
WHERE d._idrref = $1{{sepand "d"}}

-- name: lines_sales_invoice
SELECT l._lineno3021, l._keyfield, i._code, i._description AS item, i._fld1060 AS article,
       g._description AS item_group, u._description AS unit, l._fld3024 AS quantity, l._fld3025 AS price,
       l._fld3026 AS amount, v._description AS vat_rate, l._fld3028 AS vat,
       iu._description AS item_unit, iv._fld1030 AS item_vat_percent
FROM _document187_vt3020 l
LEFT JOIN _reference42 i ON i._idrref = l._fld3022rref{{sepand "i"}}
LEFT JOIN _reference42 g ON g._idrref = i._parentidrref{{sepand "g"}}
LEFT JOIN _reference27 u ON u._idrref = l._fld3023rref{{sepand "u"}}
LEFT JOIN _reference29 v ON v._idrref = l._fld3027rref{{sepand "v"}}
LEFT JOIN _reference27 iu ON iu._idrref = i._fld1061rref{{sepand "iu"}}
LEFT JOIN _reference29 iv ON iv._idrref = i._fld1062rref{{sepand "iv"}}
WHERE l._document187_idrref = $1{{sepand "l"}}
ORDER BY l._lineno3021

-- name: header_goods_receipt
SELECT d._idrref, d._version, d._marked, d._date_time, d._number, d._posted,
       d._fld3108 AS amount, d._fld3109 AS vat, d._fld3111 AS comment,
       d._fld3112 AS supplier_invoice_number, d._fld3113 AS supplier_invoice_date,
       org._description AS organization, org._fld1010 AS organization_tax_id,
       cp._description AS supplier, cp._fld1100 AS supplier_tax_id, cp._fld1102 AS supplier_full_name,
       cpg._description AS supplier_group,
       mgr._description AS supplier_manager, mgrdep._description AS manager_department,
       mgrorg._description AS manager_organization,
       ctr._description AS contract, ctrorg._description AS contract_organization,
       ctrcur._code AS contract_currency, ctrpt._description AS contract_price_type,
       wh._description AS warehouse, whresp._description AS warehouse_responsible,
       whdep._description AS warehouse_department, whpt._description AS warehouse_price_type,
       whorg._description AS warehouse_organization,
       cur._code AS currency, cur._fld1020 AS currency_name,
       pt._description AS price_type, ptcur._code AS price_type_currency,
       usr._description AS responsible, usr._fld1050 AS responsible_login,
       usrdep._description AS responsible_department, usrwh._description AS responsible_home_warehouse,
       CASE WHEN d._fld3110_type = '\x08' AND d._fld3110_rtref = '\x000000be' THEN base._number END AS base_number
FROM _document190 d
LEFT JOIN _reference19 org ON org._idrref = d._fld3101rref{{sepand "org"}}
LEFT JOIN _reference58 cp ON cp._idrref = d._fld3102rref{{sepand "cp"}}
LEFT JOIN _reference58 cpg ON cpg._idrref = cp._parentidrref{{sepand "cpg"}}
LEFT JOIN _reference37 mgr ON mgr._idrref = cp._fld1103rref{{sepand "mgr"}}
LEFT JOIN _reference31 mgrdep ON mgrdep._idrref = mgr._fld1051rref{{sepand "mgrdep"}}
LEFT JOIN _reference19 mgrorg ON mgrorg._idrref = mgrdep._fld1035rref{{sepand "mgrorg"}}
LEFT JOIN _reference61 ctr ON ctr._idrref = d._fld3103rref{{sepand "ctr"}}
LEFT JOIN _reference19 ctrorg ON ctrorg._idrref = ctr._fld1110rref{{sepand "ctrorg"}}
LEFT JOIN _reference24 ctrcur ON ctrcur._idrref = ctr._fld1111rref{{sepand "ctrcur"}}
LEFT JOIN _reference33 ctrpt ON ctrpt._idrref = ctr._fld1112rref{{sepand "ctrpt"}}
LEFT JOIN _reference71 wh ON wh._idrref = d._fld3104rref{{sepand "wh"}}
LEFT JOIN _reference37 whresp ON whresp._idrref = wh._fld1151rref{{sepand "whresp"}}
LEFT JOIN _reference31 whdep ON whdep._idrref = wh._fld1152rref{{sepand "whdep"}}
LEFT JOIN _reference33 whpt ON whpt._idrref = wh._fld1153rref{{sepand "whpt"}}
LEFT JOIN _reference19 whorg ON whorg._idrref = wh._fld1150rref{{sepand "whorg"}}
LEFT JOIN _reference24 cur ON cur._idrref = d._fld3105rref{{sepand "cur"}}
LEFT JOIN _reference33 pt ON pt._idrref = d._fld3106rref{{sepand "pt"}}
LEFT JOIN _reference24 ptcur ON ptcur._idrref = pt._fld1040rref{{sepand "ptcur"}}
LEFT JOIN _reference37 usr ON usr._idrref = d._fld3107rref{{sepand "usr"}}
LEFT JOIN _reference31 usrdep ON usrdep._idrref = usr._fld1051rref{{sepand "usrdep"}}
LEFT JOIN _reference71 usrwh ON usrwh._idrref = usr._fld1052rref{{sepand "usrwh"}}
LEFT JOIN _document190 base ON d._fld3110_type = '\x08' AND d._fld3110_rtref = '\x000000be'
      AND base._idrref = d._fld3110_rrref{{sepand "base"}}
WHERE d._idrref = $1{{sepand "d"}}

-- name: lines_goods_receipt
SELECT l._lineno3121, l._keyfield, i._code, i._description AS item, i._fld1060 AS article,
       g._description AS item_group, u._description AS unit, l._fld3124 AS quantity, l._fld3125 AS price,
       l._fld3126 AS amount, v._description AS vat_rate, l._fld3128 AS vat,
       iu._description AS item_unit, iv._fld1030 AS item_vat_percent
FROM _document190_vt3120 l
LEFT JOIN _reference42 i ON i._idrref = l._fld3122rref{{sepand "i"}}
LEFT JOIN _reference42 g ON g._idrref = i._parentidrref{{sepand "g"}}
LEFT JOIN _reference27 u ON u._idrref = l._fld3123rref{{sepand "u"}}
LEFT JOIN _reference29 v ON v._idrref = l._fld3127rref{{sepand "v"}}
LEFT JOIN _reference27 iu ON iu._idrref = i._fld1061rref{{sepand "iu"}}
LEFT JOIN _reference29 iv ON iv._idrref = i._fld1062rref{{sepand "iv"}}
WHERE l._document190_idrref = $1{{sepand "l"}}
ORDER BY l._lineno3121
