package erp

import (
	"embed"
	"fmt"
	"reflect"
	"strings"
	"text/template"
)

// queryFiles holds the SQL of every key operation, one file per operation
// (or per shared part), readable as a whole: see queries/*.sql.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// A query file is a Go text/template (for the data separator, below) holding
// named statements: a line "-- name: NAME" starts statement NAME, which runs
// to the next such line; the comment lines before the first one describe the
// file. After rendering, "{tt}" and "{tt2}" in a statement stand for the
// names of temporary tables chosen at run time (tempStyle).
//
// Template functions, for the data separator column _fld1000 (the first
// column of every table and index when the data set was initialised with
// Options.Separator; loaded rows and the operations use the value 0):
//
//	{{sep}}          "_fld1000, " in a column list (INSERT, ON CONFLICT)
//	{{sepv}}         "0, " in the matching select list
//	{{sepand "a"}}   " AND a._fld1000 = 0" after a condition on alias a, as
//	                 the platform qualifies every table of a separated query
//
// all empty without the separator.
const nameMarker = "-- name:"

// tempSQL is queries/temp_tables.sql.
type tempSQL struct {
	CreateRLSValues  string `sql:"create_rls_values"`
	IndexRLSValues   string `sql:"index_rls_values"`
	Stats10RLSValues string `sql:"stats10_rls_values"`
	CreateGoods      string `sql:"create_goods"`
	IndexGoods       string `sql:"index_goods"`
	Stats10Goods     string `sql:"stats10_goods"`
	Analyze          string `sql:"analyze"`
	Truncate         string `sql:"truncate"`
	Drop             string `sql:"drop"`
	DropIfExists     string `sql:"drop_if_exists"`
}

// sessionSQL is queries/session.sql.
type sessionSQL struct {
	Meta             string `sql:"meta"`
	Users            string `sql:"users"`
	UserWarehouses   string `sql:"user_warehouses"`
	ItemsByStock     string `sql:"items_by_stock"`
	ItemGroups       string `sql:"item_groups"`
	CustomersBySales string `sql:"customers_by_sales"`
	PriceTypes       string `sql:"price_types"`
}

// documentsSQL is queries/documents.sql.
type documentsSQL struct {
	PickSalesInvoiceBefore string `sql:"pick_sales_invoice_before"`
	PickSalesInvoiceAfter  string `sql:"pick_sales_invoice_after"`
	PickGoodsReceiptBefore string `sql:"pick_goods_receipt_before"`
	PickGoodsReceiptAfter  string `sql:"pick_goods_receipt_after"`
}

// listSQL is queries/document_list.sql.
type listSQL struct {
	FillRLSValues     string `sql:"fill_rls_values"`
	PageSalesInvoices string `sql:"page_sales_invoices"`
	PageGoodsReceipts string `sql:"page_goods_receipts"`
}

// formSQL is queries/document_form.sql.
type formSQL struct {
	HeaderSalesInvoice string `sql:"header_sales_invoice"`
	LinesSalesInvoice  string `sql:"lines_sales_invoice"`
	HeaderGoodsReceipt string `sql:"header_goods_receipt"`
	LinesGoodsReceipt  string `sql:"lines_goods_receipt"`
}

// postSQL is the document part of a posting: queries/post_sales_invoice.sql
// or queries/post_goods_receipt.sql.
type postSQL struct {
	LockDocument       string `sql:"lock_document"`
	ReadLines          string `sql:"read_lines"`
	DeleteLines        string `sql:"delete_lines"`
	InsertLines        string `sql:"insert_lines"`
	WriteHeader        string `sql:"write_header"`
	FillGoodsMovements string `sql:"fill_goods_movements"`
	FillSalesMovements string `sql:"fill_sales_movements,optional"`
}

// registerSQL is the register part of a posting: queries/register_goods.sql
// or queries/register_sales.sql.
type registerSQL struct {
	CreateMovements  string `sql:"create_movements"`
	IndexMovements   string `sql:"index_movements"`
	AnalyzeMovements string `sql:"analyze_movements"`
	CreateChanges    string `sql:"create_changes"`
	IndexChanges     string `sql:"index_changes"`
	FillChanges      string `sql:"fill_changes"`
	AnalyzeChanges   string `sql:"analyze_changes"`
	EnsureTotals     string `sql:"ensure_totals"`
	LockTotals       string `sql:"lock_totals"`
	DeleteMovements  string `sql:"delete_movements"`
	InsertMovements  string `sql:"insert_movements"`
	UpdateTotals     string `sql:"update_totals"`
	NegativeBalances string `sql:"negative_balances,optional"`
	DropTempTables   string `sql:"drop_temp_tables"`
}

// balanceSQL is queries/stock_balance_report.sql.
type balanceSQL struct {
	Current  string `sql:"current"`
	Forward  string `sql:"forward"`
	Backward string `sql:"backward"`
}

// turnoverSQL is queries/sales_turnover_report.sql.
type turnoverSQL struct {
	Report string `sql:"report"`
}

// orSQL is queries/or_subquery_report.sql.
type orSQL struct {
	Report    string `sql:"report"`
	ReportAny string `sql:"report_any"`
}

// pickerSQL is queries/item_picker.sql.
type pickerSQL struct {
	Search string `sql:"search"`
}

// stormSQL is queries/temp_table_storm.sql.
type stormSQL struct {
	FillSelection string `sql:"fill_selection"`
	FillValuation string `sql:"fill_valuation"`
	Read          string `sql:"read"`
}

// repostSQL is queries/repost_day.sql.
type repostSQL struct {
	LastDay   string `sql:"last_day"`
	Documents string `sql:"documents"`
}

// recomputeSQL is queries/recompute_month.sql.
type recomputeSQL struct {
	LockTotals            string `sql:"lock_totals"`
	CreateFreshBalance    string `sql:"create_fresh_balance"`
	FillFreshBalance      string `sql:"fill_fresh_balance"`
	IndexFreshBalance     string `sql:"index_fresh_balance"`
	AnalyzeFreshBalance   string `sql:"analyze_fresh_balance"`
	DeleteStaleBalance    string `sql:"delete_stale_balance"`
	InsertMissingBalance  string `sql:"insert_missing_balance"`
	CreateFreshTurnover   string `sql:"create_fresh_turnover"`
	FillFreshTurnover     string `sql:"fill_fresh_turnover"`
	IndexFreshTurnover    string `sql:"index_fresh_turnover"`
	AnalyzeFreshTurnover  string `sql:"analyze_fresh_turnover"`
	DeleteStaleTurnover   string `sql:"delete_stale_turnover"`
	InsertMissingTurnover string `sql:"insert_missing_turnover"`
	DropTempTables        string `sql:"drop_temp_tables"`
}

// querySet is every statement of the key operations, rendered for one
// separator setting.
type querySet struct {
	temp        tempSQL
	session     sessionSQL
	documents   documentsSQL
	list        listSQL
	form        formSQL
	postSales   postSQL
	postReceipt postSQL
	goodsReg    registerSQL
	salesReg    registerSQL
	balance     balanceSQL
	turnover    turnoverSQL
	or          orSQL
	picker      pickerSQL
	storm       stormSQL
	repost      repostSQL
	recompute   recomputeSQL
}

// loadQueries renders every query file for the separator setting and fills
// the statement structs; a statement missing from its file, or a name in a
// file that no field takes, is an error (the files are embedded, so this
// fails only on a broken build).
func loadQueries(sep bool) (*querySet, error) {
	q := &querySet{}
	files := []struct {
		file string
		dst  any
	}{
		{"temp_tables.sql", &q.temp},
		{"session.sql", &q.session},
		{"documents.sql", &q.documents},
		{"document_list.sql", &q.list},
		{"document_form.sql", &q.form},
		{"post_sales_invoice.sql", &q.postSales},
		{"post_goods_receipt.sql", &q.postReceipt},
		{"register_goods.sql", &q.goodsReg},
		{"register_sales.sql", &q.salesReg},
		{"stock_balance_report.sql", &q.balance},
		{"sales_turnover_report.sql", &q.turnover},
		{"or_subquery_report.sql", &q.or},
		{"item_picker.sql", &q.picker},
		{"temp_table_storm.sql", &q.storm},
		{"repost_day.sql", &q.repost},
		{"recompute_month.sql", &q.recompute},
	}
	funcs := template.FuncMap{
		"sep": func() string {
			if sep {
				return SeparatorColumn + ", "
			}
			return ""
		},
		"sepv": func() string {
			if sep {
				return "0, "
			}
			return ""
		},
		"sepand": func(alias string) string {
			if !sep {
				return ""
			}
			if alias == "" {
				return " AND " + SeparatorColumn + " = 0"
			}
			return " AND " + alias + "." + SeparatorColumn + " = 0"
		},
	}
	for _, f := range files {
		text, err := queryFiles.ReadFile("queries/" + f.file)
		if err != nil {
			return nil, fmt.Errorf("erp: read queries/%s: %w", f.file, err)
		}
		tmpl, err := template.New(f.file).Funcs(funcs).Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("erp: parse queries/%s: %w", f.file, err)
		}
		var sb strings.Builder
		if err := tmpl.Execute(&sb, nil); err != nil {
			return nil, fmt.Errorf("erp: render queries/%s: %w", f.file, err)
		}
		sections, err := splitNamed(sb.String())
		if err != nil {
			return nil, fmt.Errorf("erp: queries/%s: %w", f.file, err)
		}
		if err := fillStatements(f.dst, sections); err != nil {
			return nil, fmt.Errorf("erp: queries/%s: %w", f.file, err)
		}
	}
	return q, nil
}

// splitNamed splits a rendered query file at its "-- name: NAME" lines.
// Lines are not parsed as SQL: a marker must be a whole line of its own.
func splitNamed(text string) (map[string]string, error) {
	out := map[string]string{}
	name := ""
	var cur []string
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSpace(strings.Join(cur, "\n"))
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), nameMarker); ok {
			flush()
			name = strings.TrimSpace(rest)
			if name == "" {
				return nil, fmt.Errorf("empty statement name")
			}
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("statement %q defined twice", name)
			}
			cur = cur[:0]
			continue
		}
		cur = append(cur, line)
	}
	flush()
	for n, s := range out {
		if s == "" {
			return nil, fmt.Errorf("statement %q is empty", n)
		}
	}
	return out, nil
}

// fillStatements sets the string fields of the struct *dst from sections by
// their `sql:"name[,optional]"` tags.
func fillStatements(dst any, sections map[string]string) error {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	used := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("sql")
		name, opt, _ := strings.Cut(tag, ",")
		s, ok := sections[name]
		if !ok {
			if opt == "optional" {
				continue
			}
			return fmt.Errorf("no statement %q", name)
		}
		v.Field(i).SetString(s)
		used[name] = true
	}
	for n := range sections {
		if !used[n] {
			return fmt.Errorf("statement %q is not used by the workload", n)
		}
	}
	return nil
}

// withTemp puts temporary table names into a statement: {tt} becomes tt and
// {tt2} becomes tt2.
func withTemp(sql, tt, tt2 string) string {
	return strings.NewReplacer("{tt2}", tt2, "{tt}", tt).Replace(sql)
}
