-- erplab ERP workload: a 1C:Enterprise-like database on stock PostgreSQL.
--
-- Tables are named and shaped the way the 1C:Enterprise 8 platform lays out a
-- configuration on PostgreSQL (lower-case names, _idrref 16-byte bytea
-- references, _fldNNN columns, composite references split in
-- _fldN_type/_fldN_rtref/_fldN_rrref, registers with recorder columns and
-- separate totals tables). 1C's own PostgreSQL build stores strings as
-- mchar/mvarchar; stock PostgreSQL has no such types, so varchar is used.
--
-- Conventions (shared with the generator, see gen*.go):
--   * a reference is 16 bytes; the empty reference is 16 zero bytes; columns
--     are NOT NULL (the platform never stores NULL in them);
--   * _recordertref / _fldN_rtref hold the referenced table's number as a
--     4-byte big-endian integer: 187 = \x000000bb (sales invoice),
--     190 = \x000000be (goods receipt), 19 = organizations, 71 = warehouses;
--   * _fldN_type is 1 byte: \x01 = undefined (rtref and rrref zero),
--     \x08 = a reference (rtref + rrref set);
--   * _keyfield of a tabular part is the 4-byte big-endian line number;
--   * _folder is TRUE for an element and FALSE for a group (the platform
--     stores the negation of IsFolder); _parentidrref is the group, zero ref
--     at the root;
--   * _numberprefix is the start of the document's year (numbers restart
--     every year); the empty date is 0001-01-01 00:00:00;
--   * _recordkind: 0 receipt (adds to the balance), 1 expense (subtracts);
--   * balance totals (_accumrgt1239): for every month M (period = first day
--     of M) the balance at the END of M, i.e. the sum of all movements with
--     _period < M + 1 month (receipts minus expenses); plus one row per
--     dimension set at period 3999-11-01 holding the current balance (all
--     movements). Rows whose resources are all zero may be absent;
--   * turnover totals (_accumrgtn1270): per month (period = first day of the
--     month) and dimension set, the sums of that month's movements;
--   * _splitter is 0 in loaded data (the platform uses it to spread
--     concurrent writers over several totals rows; readers must SUM over it).
--
-- Template: this file is a Go text/template. {{sepcol}} expands to the data
-- separator column "_fld1000 numeric(7,0) NOT NULL," when the Separator
-- option is on, else to nothing; {{sep}} expands to "_fld1000, " in index
-- column lists (the separator is the first column of every index, as the
-- platform does for separated configurations). Loaded rows have _fld1000 = 0.
--
-- Everything above the line "-- erplab:indexes" is run before loading;
-- every line below it that is not a comment is one CREATE INDEX statement,
-- run after loading (in parallel, one statement per line).
--
-- Catalogs
--   _reference19   Organizations: _fld1010 tax id, _fld1011 number prefix.
--   _reference24   Currencies: _code ISO code, _fld1020 full name.
--   _reference27   Units of measure: _fld1025 full name.
--   _reference29   VAT rates: _fld1030 rate in percent.
--   _reference31   Departments: _fld1035rref organization.
--   _reference33   Price types: _fld1040rref currency, _fld1041 price includes VAT.
--   _reference37   Users: _fld1050 login, _fld1051rref department,
--                  _fld1052rref home warehouse, _fld1053 invalid (blocked).
--   _reference42   Items (hierarchical: groups and elements): _fld1060 article,
--                  _fld1061rref unit, _fld1062rref VAT rate, _fld1063 weight kg,
--                  _fld1064 is a service, _fld1065 long description.
--   _reference58   Counterparties (hierarchical): _fld1100 tax id, _fld1101 KPP,
--                  _fld1102 full name, _fld1103rref main manager (user),
--                  _fld1104 is a customer, _fld1105 is a supplier.
--   _reference61   Contracts, subordinate to counterparties (_owneridrref):
--                  _fld1110rref organization, _fld1111rref currency,
--                  _fld1112rref price type, _fld1113 kind (0 sale, 1 purchase).
--   _reference71   Warehouses: _fld1150rref organization, _fld1151rref
--                  responsible user, _fld1152rref department, _fld1153rref
--                  sales price type.
--   _reference80   Access keys (record-level security): one per warehouse.
--
-- Documents
--   _document187   Sales invoice: _fld3001rref organization, _fld3002rref
--                  counterparty, _fld3003rref contract, _fld3004rref warehouse,
--                  _fld3005rref currency, _fld3006rref price type,
--                  _fld3007rref responsible user, _fld3008rref department,
--                  _fld3009 amount incl. VAT, _fld3010 VAT amount,
--                  _fld3011 base document (composite: undefined or a goods
--                  receipt), _fld3012 comment.
--   _document187_vt3020  its lines: _lineno3021, _fld3022rref item,
--                  _fld3023rref unit, _fld3024 quantity, _fld3025 price,
--                  _fld3026 amount incl. VAT, _fld3027rref VAT rate,
--                  _fld3028 VAT amount.
--   _document190   Goods receipt: _fld3101rref organization, _fld3102rref
--                  counterparty (supplier), _fld3103rref contract,
--                  _fld3104rref warehouse, _fld3105rref currency,
--                  _fld3106rref price type, _fld3107rref responsible user,
--                  _fld3108 amount incl. VAT, _fld3109 VAT amount,
--                  _fld3110 base document (composite, undefined in loaded
--                  data), _fld3111 comment, _fld3112 supplier's invoice
--                  number, _fld3113 supplier's invoice date.
--   _document190_vt3120  its lines: _lineno3121, _fld3122rref item,
--                  _fld3123rref unit, _fld3124 quantity, _fld3125 price,
--                  _fld3126 amount incl. VAT, _fld3127rref VAT rate,
--                  _fld3128 VAT amount.
--
-- Registers
--   _accumrg1234   Goods in warehouses (balance register), movements:
--                  dimensions _fld1235rref warehouse, _fld1236rref item;
--                  resource _fld1237 quantity. Receipts (kind 0) from goods
--                  receipts, expenses (kind 1) from sales invoices, one
--                  record per document line (_lineno = line number).
--   _accumrgt1239  its balance totals (see conventions above).
--   _accumrg1260   Sales (turnover register, no _recordkind), movements:
--                  dimensions _fld1261rref organization, _fld1262rref
--                  counterparty, _fld1263rref item; resources _fld1264
--                  quantity, _fld1265 amount incl. VAT, _fld1266 VAT amount.
--                  One record per sales invoice line.
--   _accumrgtn1270 its turnover totals per month.
--   _inforg1300    Prices (periodic information register, independent):
--                  _period, dimensions _fld1301rref price type, _fld1302rref
--                  item; resources _fld1303 price, _fld1304rref currency.
--                  "Slice last" = for each (price type, item) the row with the
--                  greatest _period <= the date.
--   _inforg1400    RLS: object -> access key. _fld1401 object (composite:
--                  a sales invoice or a goods receipt), _fld1402rref access key.
--   _inforg1410    RLS: access key -> allowed value. _fld1411rref access key,
--                  _fld1412 value (composite: an organization or a warehouse).
--                  Every key has one organization row and one warehouse row.
--   _inforg1420    RLS: user -> allowed value. _fld1421rref user, _fld1422 value
--                  (composite: an organization or a warehouse). A document is
--                  visible to a user when some value of its access key is
--                  among the user's values.

-- ---------------------------------------------------------------- catalogs

CREATE TABLE _reference19 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(100) NOT NULL,
    _fld1010 varchar(12) NOT NULL,
    _fld1011 varchar(4) NOT NULL
);

CREATE TABLE _reference24 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(3) NOT NULL,
    _description varchar(10) NOT NULL,
    _fld1020 varchar(50) NOT NULL
);

CREATE TABLE _reference27 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(4) NOT NULL,
    _description varchar(25) NOT NULL,
    _fld1025 varchar(100) NOT NULL
);

CREATE TABLE _reference29 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(3) NOT NULL,
    _description varchar(25) NOT NULL,
    _fld1030 numeric(5,2) NOT NULL
);

CREATE TABLE _reference31 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(100) NOT NULL,
    _fld1035rref bytea NOT NULL
);

CREATE TABLE _reference33 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(50) NOT NULL,
    _fld1040rref bytea NOT NULL,
    _fld1041 boolean NOT NULL
);

CREATE TABLE _reference37 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(100) NOT NULL,
    _fld1050 varchar(64) NOT NULL,
    _fld1051rref bytea NOT NULL,
    _fld1052rref bytea NOT NULL,
    _fld1053 boolean NOT NULL
);

CREATE TABLE _reference42 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _parentidrref bytea NOT NULL,
    _folder boolean NOT NULL,
    _code varchar(11) NOT NULL,
    _description varchar(150) NOT NULL,
    _fld1060 varchar(25) NOT NULL,
    _fld1061rref bytea NOT NULL,
    _fld1062rref bytea NOT NULL,
    _fld1063 numeric(10,3) NOT NULL,
    _fld1064 boolean NOT NULL,
    _fld1065 varchar(1024) NOT NULL
);

CREATE TABLE _reference58 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _parentidrref bytea NOT NULL,
    _folder boolean NOT NULL,
    _code varchar(11) NOT NULL,
    _description varchar(150) NOT NULL,
    _fld1100 varchar(12) NOT NULL,
    _fld1101 varchar(9) NOT NULL,
    _fld1102 varchar(250) NOT NULL,
    _fld1103rref bytea NOT NULL,
    _fld1104 boolean NOT NULL,
    _fld1105 boolean NOT NULL
);

CREATE TABLE _reference61 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _owneridrref bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(150) NOT NULL,
    _fld1110rref bytea NOT NULL,
    _fld1111rref bytea NOT NULL,
    _fld1112rref bytea NOT NULL,
    _fld1113 numeric(1,0) NOT NULL
);

CREATE TABLE _reference71 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(100) NOT NULL,
    _fld1150rref bytea NOT NULL,
    _fld1151rref bytea NOT NULL,
    _fld1152rref bytea NOT NULL,
    _fld1153rref bytea NOT NULL
);

CREATE TABLE _reference80 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _predefinedid bytea NOT NULL,
    _code varchar(9) NOT NULL,
    _description varchar(150) NOT NULL
);

-- --------------------------------------------------------------- documents

CREATE TABLE _document187 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _date_time timestamp NOT NULL,
    _numberprefix timestamp NOT NULL,
    _number varchar(11) NOT NULL,
    _posted boolean NOT NULL,
    _fld3001rref bytea NOT NULL,
    _fld3002rref bytea NOT NULL,
    _fld3003rref bytea NOT NULL,
    _fld3004rref bytea NOT NULL,
    _fld3005rref bytea NOT NULL,
    _fld3006rref bytea NOT NULL,
    _fld3007rref bytea NOT NULL,
    _fld3008rref bytea NOT NULL,
    _fld3009 numeric(15,2) NOT NULL,
    _fld3010 numeric(15,2) NOT NULL,
    _fld3011_type bytea NOT NULL,
    _fld3011_rtref bytea NOT NULL,
    _fld3011_rrref bytea NOT NULL,
    _fld3012 varchar(150) NOT NULL
);

CREATE TABLE _document187_vt3020 (
    {{sepcol}}
    _document187_idrref bytea NOT NULL,
    _keyfield bytea NOT NULL,
    _lineno3021 numeric(5,0) NOT NULL,
    _fld3022rref bytea NOT NULL,
    _fld3023rref bytea NOT NULL,
    _fld3024 numeric(15,3) NOT NULL,
    _fld3025 numeric(15,2) NOT NULL,
    _fld3026 numeric(15,2) NOT NULL,
    _fld3027rref bytea NOT NULL,
    _fld3028 numeric(15,2) NOT NULL
);

CREATE TABLE _document190 (
    {{sepcol}}
    _idrref bytea NOT NULL,
    _version integer NOT NULL,
    _marked boolean NOT NULL,
    _date_time timestamp NOT NULL,
    _numberprefix timestamp NOT NULL,
    _number varchar(11) NOT NULL,
    _posted boolean NOT NULL,
    _fld3101rref bytea NOT NULL,
    _fld3102rref bytea NOT NULL,
    _fld3103rref bytea NOT NULL,
    _fld3104rref bytea NOT NULL,
    _fld3105rref bytea NOT NULL,
    _fld3106rref bytea NOT NULL,
    _fld3107rref bytea NOT NULL,
    _fld3108 numeric(15,2) NOT NULL,
    _fld3109 numeric(15,2) NOT NULL,
    _fld3110_type bytea NOT NULL,
    _fld3110_rtref bytea NOT NULL,
    _fld3110_rrref bytea NOT NULL,
    _fld3111 varchar(150) NOT NULL,
    _fld3112 varchar(30) NOT NULL,
    _fld3113 timestamp NOT NULL
);

CREATE TABLE _document190_vt3120 (
    {{sepcol}}
    _document190_idrref bytea NOT NULL,
    _keyfield bytea NOT NULL,
    _lineno3121 numeric(5,0) NOT NULL,
    _fld3122rref bytea NOT NULL,
    _fld3123rref bytea NOT NULL,
    _fld3124 numeric(15,3) NOT NULL,
    _fld3125 numeric(15,2) NOT NULL,
    _fld3126 numeric(15,2) NOT NULL,
    _fld3127rref bytea NOT NULL,
    _fld3128 numeric(15,2) NOT NULL
);

-- --------------------------------------------------------------- registers

CREATE TABLE _accumrg1234 (
    {{sepcol}}
    _period timestamp NOT NULL,
    _recordertref bytea NOT NULL,
    _recorderrref bytea NOT NULL,
    _lineno numeric(9,0) NOT NULL,
    _active boolean NOT NULL,
    _recordkind numeric(1,0) NOT NULL,
    _fld1235rref bytea NOT NULL,
    _fld1236rref bytea NOT NULL,
    _fld1237 numeric(15,3) NOT NULL
);

CREATE TABLE _accumrgt1239 (
    {{sepcol}}
    _period timestamp NOT NULL,
    _fld1235rref bytea NOT NULL,
    _fld1236rref bytea NOT NULL,
    _fld1237 numeric(21,3) NOT NULL,
    _splitter numeric(10,0) NOT NULL
);

CREATE TABLE _accumrg1260 (
    {{sepcol}}
    _period timestamp NOT NULL,
    _recordertref bytea NOT NULL,
    _recorderrref bytea NOT NULL,
    _lineno numeric(9,0) NOT NULL,
    _active boolean NOT NULL,
    _fld1261rref bytea NOT NULL,
    _fld1262rref bytea NOT NULL,
    _fld1263rref bytea NOT NULL,
    _fld1264 numeric(15,3) NOT NULL,
    _fld1265 numeric(15,2) NOT NULL,
    _fld1266 numeric(15,2) NOT NULL
);

CREATE TABLE _accumrgtn1270 (
    {{sepcol}}
    _period timestamp NOT NULL,
    _fld1261rref bytea NOT NULL,
    _fld1262rref bytea NOT NULL,
    _fld1263rref bytea NOT NULL,
    _fld1264 numeric(21,3) NOT NULL,
    _fld1265 numeric(21,2) NOT NULL,
    _fld1266 numeric(21,2) NOT NULL,
    _splitter numeric(10,0) NOT NULL
);

CREATE TABLE _inforg1300 (
    {{sepcol}}
    _period timestamp NOT NULL,
    _fld1301rref bytea NOT NULL,
    _fld1302rref bytea NOT NULL,
    _fld1303 numeric(15,2) NOT NULL,
    _fld1304rref bytea NOT NULL
);

CREATE TABLE _inforg1400 (
    {{sepcol}}
    _fld1401_type bytea NOT NULL,
    _fld1401_rtref bytea NOT NULL,
    _fld1401_rrref bytea NOT NULL,
    _fld1402rref bytea NOT NULL
);

CREATE TABLE _inforg1410 (
    {{sepcol}}
    _fld1411rref bytea NOT NULL,
    _fld1412_type bytea NOT NULL,
    _fld1412_rtref bytea NOT NULL,
    _fld1412_rrref bytea NOT NULL
);

CREATE TABLE _inforg1420 (
    {{sepcol}}
    _fld1421rref bytea NOT NULL,
    _fld1422_type bytea NOT NULL,
    _fld1422_rtref bytea NOT NULL,
    _fld1422_rrref bytea NOT NULL
);

-- erplab:indexes
-- catalogs: hpk = the clustered unique key on the reference; bycode_sr /
-- bydescr_sr = code / description then reference.
CREATE UNIQUE INDEX _reference19hpk ON _reference19 ({{sep}}_idrref);
CREATE INDEX _reference19_bycode_sr ON _reference19 ({{sep}}_code, _idrref);
CREATE INDEX _reference19_bydescr_sr ON _reference19 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference24hpk ON _reference24 ({{sep}}_idrref);
CREATE INDEX _reference24_bycode_sr ON _reference24 ({{sep}}_code, _idrref);
CREATE INDEX _reference24_bydescr_sr ON _reference24 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference27hpk ON _reference27 ({{sep}}_idrref);
CREATE INDEX _reference27_bycode_sr ON _reference27 ({{sep}}_code, _idrref);
CREATE INDEX _reference27_bydescr_sr ON _reference27 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference29hpk ON _reference29 ({{sep}}_idrref);
CREATE INDEX _reference29_bycode_sr ON _reference29 ({{sep}}_code, _idrref);
CREATE INDEX _reference29_bydescr_sr ON _reference29 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference31hpk ON _reference31 ({{sep}}_idrref);
CREATE INDEX _reference31_bycode_sr ON _reference31 ({{sep}}_code, _idrref);
CREATE INDEX _reference31_bydescr_sr ON _reference31 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference33hpk ON _reference33 ({{sep}}_idrref);
CREATE INDEX _reference33_bycode_sr ON _reference33 ({{sep}}_code, _idrref);
CREATE INDEX _reference33_bydescr_sr ON _reference33 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference37hpk ON _reference37 ({{sep}}_idrref);
CREATE INDEX _reference37_bycode_sr ON _reference37 ({{sep}}_code, _idrref);
CREATE INDEX _reference37_bydescr_sr ON _reference37 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference42hpk ON _reference42 ({{sep}}_idrref);
CREATE INDEX _reference42_bycode_sr ON _reference42 ({{sep}}_code, _idrref);
CREATE INDEX _reference42_bydescr_sr ON _reference42 ({{sep}}_description, _idrref);
CREATE INDEX _reference42_byparentcode_lrsr ON _reference42 ({{sep}}_folder, _parentidrref, _code, _idrref);
CREATE INDEX _reference42_byparentdescr_lrsr ON _reference42 ({{sep}}_folder, _parentidrref, _description, _idrref);
CREATE INDEX _reference42_byfield1060_sr ON _reference42 ({{sep}}_fld1060, _idrref);
CREATE UNIQUE INDEX _reference58hpk ON _reference58 ({{sep}}_idrref);
CREATE INDEX _reference58_bycode_sr ON _reference58 ({{sep}}_code, _idrref);
CREATE INDEX _reference58_bydescr_sr ON _reference58 ({{sep}}_description, _idrref);
CREATE INDEX _reference58_byparentdescr_lrsr ON _reference58 ({{sep}}_folder, _parentidrref, _description, _idrref);
CREATE INDEX _reference58_byfield1100_sr ON _reference58 ({{sep}}_fld1100, _idrref);
CREATE UNIQUE INDEX _reference61hpk ON _reference61 ({{sep}}_idrref);
CREATE INDEX _reference61_bycode_sr ON _reference61 ({{sep}}_code, _idrref);
CREATE INDEX _reference61_bydescr_sr ON _reference61 ({{sep}}_description, _idrref);
CREATE INDEX _reference61_byownerdescr_rsr ON _reference61 ({{sep}}_owneridrref, _description, _idrref);
CREATE UNIQUE INDEX _reference71hpk ON _reference71 ({{sep}}_idrref);
CREATE INDEX _reference71_bycode_sr ON _reference71 ({{sep}}_code, _idrref);
CREATE INDEX _reference71_bydescr_sr ON _reference71 ({{sep}}_description, _idrref);
CREATE UNIQUE INDEX _reference80hpk ON _reference80 ({{sep}}_idrref);
CREATE INDEX _reference80_bycode_sr ON _reference80 ({{sep}}_code, _idrref);
CREATE INDEX _reference80_bydescr_sr ON _reference80 ({{sep}}_description, _idrref);
-- documents: hpk, by date (_tr), by number (_sr, _tsr), by reference fields (_rr).
CREATE UNIQUE INDEX _document187hpk ON _document187 ({{sep}}_idrref);
CREATE INDEX _document187_bydocdate_tr ON _document187 ({{sep}}_date_time, _idrref);
CREATE INDEX _document187_bydocnum_sr ON _document187 ({{sep}}_number, _idrref);
CREATE INDEX _document187_bydocnumprefix_tsr ON _document187 ({{sep}}_numberprefix, _number, _idrref);
CREATE INDEX _document187_byfield3030_rr ON _document187 ({{sep}}_fld3002rref, _idrref);
CREATE INDEX _document187_byfield3031_rr ON _document187 ({{sep}}_fld3004rref, _idrref);
CREATE INDEX _document187_byfield3032_rr ON _document187 ({{sep}}_fld3011_type, _fld3011_rtref, _fld3011_rrref, _idrref);
CREATE UNIQUE INDEX _document187_vt3020_intkeyind ON _document187_vt3020 ({{sep}}_document187_idrref, _keyfield);
CREATE UNIQUE INDEX _document190hpk ON _document190 ({{sep}}_idrref);
CREATE INDEX _document190_bydocdate_tr ON _document190 ({{sep}}_date_time, _idrref);
CREATE INDEX _document190_bydocnum_sr ON _document190 ({{sep}}_number, _idrref);
CREATE INDEX _document190_bydocnumprefix_tsr ON _document190 ({{sep}}_numberprefix, _number, _idrref);
CREATE INDEX _document190_byfield3130_rr ON _document190 ({{sep}}_fld3102rref, _idrref);
CREATE INDEX _document190_byfield3131_rr ON _document190 ({{sep}}_fld3104rref, _idrref);
CREATE UNIQUE INDEX _document190_vt3120_intkeyind ON _document190_vt3120 ({{sep}}_document190_idrref, _keyfield);
-- registers: movements by period (_trn), by recorder (_rn), by an indexed
-- dimension (_rtrn); totals by all dimensions (+ _splitter).
CREATE UNIQUE INDEX _accumrg1234_byperiod_trn ON _accumrg1234 ({{sep}}_period, _recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrg1234_byrecorder_rn ON _accumrg1234 ({{sep}}_recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrg1234_bydims1238_rtrn ON _accumrg1234 ({{sep}}_fld1236rref, _period, _recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrgt1239_bydims_trrn ON _accumrgt1239 ({{sep}}_period, _fld1235rref, _fld1236rref, _splitter);
CREATE INDEX _accumrgt1239_bydims1238_tr ON _accumrgt1239 ({{sep}}_period, _fld1236rref);
CREATE UNIQUE INDEX _accumrg1260_byperiod_trn ON _accumrg1260 ({{sep}}_period, _recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrg1260_byrecorder_rn ON _accumrg1260 ({{sep}}_recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrg1260_bydims1268_rtrn ON _accumrg1260 ({{sep}}_fld1263rref, _period, _recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrg1260_bydims1269_rtrn ON _accumrg1260 ({{sep}}_fld1262rref, _period, _recordertref, _recorderrref, _lineno);
CREATE UNIQUE INDEX _accumrgtn1270_bydims_trrrn ON _accumrgtn1270 ({{sep}}_period, _fld1261rref, _fld1262rref, _fld1263rref, _splitter);
CREATE INDEX _accumrgtn1270_bydims1268_rt ON _accumrgtn1270 ({{sep}}_fld1263rref, _period);
CREATE UNIQUE INDEX _inforg1300_bydims_rrt ON _inforg1300 ({{sep}}_fld1301rref, _fld1302rref, _period);
CREATE UNIQUE INDEX _inforg1300_byperiod_trr ON _inforg1300 ({{sep}}_period, _fld1301rref, _fld1302rref);
CREATE UNIQUE INDEX _inforg1400_bydims_r ON _inforg1400 ({{sep}}_fld1401_type, _fld1401_rtref, _fld1401_rrref);
CREATE INDEX _inforg1400_byresource1403_rr ON _inforg1400 ({{sep}}_fld1402rref, _fld1401_type, _fld1401_rtref, _fld1401_rrref);
CREATE UNIQUE INDEX _inforg1410_bydims_rr ON _inforg1410 ({{sep}}_fld1411rref, _fld1412_type, _fld1412_rtref, _fld1412_rrref);
CREATE INDEX _inforg1410_bydims1413_rr ON _inforg1410 ({{sep}}_fld1412_type, _fld1412_rtref, _fld1412_rrref, _fld1411rref);
CREATE UNIQUE INDEX _inforg1420_bydims_rr ON _inforg1420 ({{sep}}_fld1421rref, _fld1422_type, _fld1422_rtref, _fld1422_rrref);
CREATE INDEX _inforg1420_bydims1423_rr ON _inforg1420 ({{sep}}_fld1422_type, _fld1422_rtref, _fld1422_rrref, _fld1421rref);
