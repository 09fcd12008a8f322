package erp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/erplab/erplab/internal/workload"
)

// execMode is how every statement of the key operations is sent: an unnamed
// statement with binary parameters, planned at each execution (no generic
// plan is ever reused), like the platform's generated query texts.
const execMode = pgx.QueryExecModeExec

// Skews of the parameters (the data's own skews: gen_plan.go).
const (
	// itemSkew and customerSkew are the Zipf thetas of item and customer
	// popularity in the key operations.
	itemSkew     = 0.99
	customerSkew = 0.8
	// recentMeanDays is the mean age of the documents users open and post
	// (exponential; older than the history: uniform over it).
	recentMeanDays = 20
)

// snapshot is what the key operations need to know about one data set,
// read once and shared by every VU on that database: catalog keys with
// their popularity order. It is immutable after loading.
type snapshot struct {
	sep bool
	q   *querySet

	users       []userRow
	items       [][]byte // item elements, most stocked first
	itemNames   []string // their descriptions
	itemParent  [][]byte // their groups and articles (key operation 7's filter)
	itemArticle []string
	itemGroups  [][]byte
	customers   [][]byte // customers, most invoiced first
	priceTypes  [][]byte // purchase, wholesale, retail
	itemZipf    *zipf
	custZipf    *zipf
	// lastMonth is the last month with balance totals (the first day of
	// HistoryEnd's previous month).
	lastMonth time.Time
}

type userRow struct{ ref, home []byte }

// vuSession is a VU's log-in: the user it works as and what the user may
// see; kept in workload.VU.State.
type vuSession struct {
	snap       *snapshot
	user       []byte
	home       []byte   // home warehouse
	warehouses [][]byte // warehouses visible under RLS, the home one included
	orgs       [][]byte // organizations of those warehouses
	// cursor is where the last document list page ended, for scrolling on.
	cursor listCursor
}

type listCursor struct {
	ok   bool
	kind *docKind
	at   time.Time
	ref  []byte
}

// session returns vu's session, logging the VU in on its first operation:
// the data set's snapshot (loaded by the first VU on that database) and a
// user drawn with vu.Rand.
func (w *Workload) session(ctx context.Context, conn *pgx.Conn, vu *workload.VU) (*vuSession, error) {
	if s, ok := vu.State.(*vuSession); ok {
		return s, nil
	}
	snap, err := w.snapshotFor(ctx, conn)
	if err != nil {
		return nil, err
	}
	u := snap.users[vu.Rand.IntN(len(snap.users))]
	s := &vuSession{snap: snap, user: u.ref, home: u.home}
	rows, err := conn.Query(ctx, snap.q.session.UserWarehouses, execMode, u.ref)
	if err != nil {
		return nil, fmt.Errorf("erp: log in: user warehouses: %w", err)
	}
	seenOrg := map[string]bool{}
	homeSeen := false
	for rows.Next() {
		var wh, org []byte
		if err := rows.Scan(&wh, &org); err != nil {
			rows.Close()
			return nil, fmt.Errorf("erp: log in: user warehouses: %w", err)
		}
		s.warehouses = append(s.warehouses, wh)
		homeSeen = homeSeen || string(wh) == string(u.home)
		if !seenOrg[string(org)] {
			seenOrg[string(org)] = true
			s.orgs = append(s.orgs, org)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erp: log in: user warehouses: %w", err)
	}
	if len(s.warehouses) == 0 || len(s.orgs) == 0 {
		return nil, fmt.Errorf("erp: log in: user %x may see no warehouse (RLS registers empty?)", u.ref)
	}
	if !homeSeen {
		s.home = s.warehouses[0]
	}
	vu.State = s
	return s, nil
}

// snapshotFor returns the snapshot of conn's database, loading it on first
// use. Snapshots are keyed by server, database and the marker's creation
// time, so a rebuilt data set is read afresh.
func (w *Workload) snapshotFor(ctx context.Context, conn *pgx.Conn) (*snapshot, error) {
	q0 := w.queries[0]
	var created, sepText, state string
	if err := conn.QueryRow(ctx, q0.session.Meta, execMode).Scan(&created, &sepText, &state); err != nil {
		return nil, fmt.Errorf("erp: read the data set marker %s (run setup first): %w", TableMeta, err)
	}
	if state != "ready" {
		return nil, fmt.Errorf("erp: the data set is not ready (state %q): run setup first", state)
	}
	sep, err := strconv.ParseBool(sepText)
	if err != nil {
		return nil, fmt.Errorf("erp: marker separator value %q: %w", sepText, err)
	}
	cfg := conn.Config()
	key := fmt.Sprintf("%s:%d/%s@%s", cfg.Host, cfg.Port, cfg.Database, created)
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.snaps[key]; ok {
		return s, nil
	}
	q := w.queries[0]
	if sep {
		q = w.queries[1]
	}
	s, err := loadSnapshot(ctx, conn, q, sep)
	if err != nil {
		return nil, err
	}
	w.snaps[key] = s
	return s, nil
}

func loadSnapshot(ctx context.Context, conn *pgx.Conn, q *querySet, sep bool) (*snapshot, error) {
	s := &snapshot{sep: sep, q: q, lastMonth: HistoryEnd.AddDate(0, -1, 0)}
	rows, err := conn.Query(ctx, q.session.Users, execMode)
	if err != nil {
		return nil, fmt.Errorf("erp: read users: %w", err)
	}
	s.users, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (userRow, error) {
		var u userRow
		return u, r.Scan(&u.ref, &u.home)
	})
	if err != nil {
		return nil, fmt.Errorf("erp: read users: %w", err)
	}
	rows, err = conn.Query(ctx, q.session.ItemsByStock, execMode)
	if err != nil {
		return nil, fmt.Errorf("erp: read items: %w", err)
	}
	for rows.Next() {
		var ref, group []byte
		var name, article string
		if err := rows.Scan(&ref, &name, &group, &article); err != nil {
			rows.Close()
			return nil, fmt.Errorf("erp: read items: %w", err)
		}
		s.items = append(s.items, ref)
		s.itemNames = append(s.itemNames, name)
		s.itemParent = append(s.itemParent, group)
		s.itemArticle = append(s.itemArticle, article)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erp: read items: %w", err)
	}
	if s.itemGroups, err = collectRefs(ctx, conn, q.session.ItemGroups); err != nil {
		return nil, fmt.Errorf("erp: read item groups: %w", err)
	}
	rows, err = conn.Query(ctx, q.session.CustomersBySales, execMode)
	if err != nil {
		return nil, fmt.Errorf("erp: read customers: %w", err)
	}
	s.customers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]byte, error) {
		var ref, manager []byte
		return ref, r.Scan(&ref, &manager)
	})
	if err != nil {
		return nil, fmt.Errorf("erp: read customers: %w", err)
	}
	if s.priceTypes, err = collectRefs(ctx, conn, q.session.PriceTypes); err != nil {
		return nil, fmt.Errorf("erp: read price types: %w", err)
	}
	switch {
	case len(s.users) == 0:
		return nil, fmt.Errorf("erp: no users that may log in in %s", TableUsers)
	case len(s.items) == 0 || len(s.itemGroups) == 0:
		return nil, fmt.Errorf("erp: no items or item groups in %s", TableItems)
	case len(s.customers) == 0:
		return nil, fmt.Errorf("erp: no customers in %s", TableCounterparties)
	case len(s.priceTypes) <= PriceTypeRetail:
		return nil, fmt.Errorf("erp: %d price types in %s, want 3", len(s.priceTypes), TablePriceTypes)
	}
	s.itemZipf = newZipf(len(s.items), itemSkew)
	s.custZipf = newZipf(len(s.customers), customerSkew)
	return s, nil
}

func collectRefs(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([][]byte, error) {
	rows, err := conn.Query(ctx, sql, append([]any{execMode}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}

// item draws an item index with the items' Zipf skew.
func (s *snapshot) item(r *rand.Rand) int { return s.itemZipf.rank(r.Float64()) }

// customer draws a customer with the customers' Zipf skew.
func (s *snapshot) customer(r *rand.Rand) []byte { return s.customers[s.custZipf.rank(r.Float64())] }

// warehouse draws one of the user's warehouses: the home one 70 % of the
// time.
func (s *vuSession) warehouse(r *rand.Rand) []byte {
	if len(s.warehouses) == 1 || r.IntN(10) < 7 {
		return s.home
	}
	return s.warehouses[r.IntN(len(s.warehouses))]
}

// org draws one of the user's organizations (the home warehouse's first).
func (s *vuSession) org(r *rand.Rand) []byte { return s.orgs[r.IntN(len(s.orgs))] }

// searchPattern makes an item picker pattern from a popular item's
// description (noun material size brand): the noun, the brand, the noun and
// material, or the first letters of the noun, as users type them.
func (s *snapshot) searchPattern(r *rand.Rand) string {
	words := strings.Fields(s.itemNames[s.item(r)])
	if len(words) == 0 {
		return "%"
	}
	var p string
	switch k := r.IntN(4); {
	case k == 0 && len(words) >= 2:
		p = words[0] + " " + words[1]
	case k == 1:
		p = words[len(words)-1]
	case k == 2 && len(words[0]) > 3:
		p = words[0][:3]
	default:
		p = words[0]
	}
	p = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(strings.ToLower(p))
	return "%" + p + "%"
}

// recentMoment draws a moment in the history, exponentially more likely
// recent (mean age meanDays; older than the history: uniform over it).
func recentMoment(r *rand.Rand, meanDays float64) time.Time {
	span := HistoryEnd.Sub(HistoryStart)
	age := time.Duration(r.ExpFloat64() * meanDays * float64(24*time.Hour))
	if age >= span || age < 0 {
		age = time.Duration(r.Int64N(int64(span)))
	}
	return HistoryEnd.Add(-age).Truncate(time.Second)
}

// monthStart is the first day of t's month.
func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// ts is t as a timestamp without time zone parameter (its UTC wall clock):
// a time.Time would be sent as timestamptz and compared in the session's
// TimeZone.
func ts(t time.Time) pgtype.Timestamp {
	return pgtype.Timestamp{Time: t.UTC(), Valid: true}
}

// pickWeighted draws an index with probability proportional to its weight.
func pickWeighted(r *rand.Rand, weights ...float64) int {
	total := 0.0
	for _, x := range weights {
		total += x
	}
	u := r.Float64() * total
	for i, x := range weights {
		if u < x {
			return i
		}
		u -= x
	}
	return len(weights) - 1
}
