package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/remedy"
)

// What the report compares between runs: every item is a label and one
// value per run ("-" when a run lacks it). The sections are shown in this
// order, and "what differs" lists, in the same order, the items whose
// values are not all equal.
const (
	secRemedies = "remedies"
	secVersion  = "erplab"
	secParams   = "parameters"
	secServer   = "server"
	secHost     = "host"
)

// item is one compared figure of the runs' configuration.
type item struct {
	Section, Key string
	Values       []string
	Differs      bool
}

// configItems lists, for runs, the remedies (extra.remedies and the
// variant of extra.experiment), erplab's version, the parameters (scalars;
// stages, rate stages and roles in one line each; the key operations are
// a table of their own), the server's version and settings and the host's
// facts. Per-run bookkeeping (the ab round, its database copy, the
// command line) is left out, and the server's DSN is compared without
// its dbname (ab gives every run its own copy of the data).
func configItems(runs []Run) []item {
	per := make([]map[string]string, len(runs))
	var order []string
	seen := map[string]bool{}
	add := func(i int, sec, key, v string) {
		k := sec + "\x00" + key
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		per[i][k] = v
	}
	for i, r := range runs {
		per[i] = map[string]string{}
		add(i, secRemedies, "remedies", remediesOf(r))
		if v := experimentVariant(r); v != "" {
			add(i, secRemedies, "ab variant", v)
		}
		add(i, secVersion, "erplab version", r.Doc.Version)
		add(i, secParams, "workload", r.Doc.Workload)
		for _, kv := range paramItems(r.Doc.Parameters) {
			add(i, secParams, kv.Key, kv.Value)
		}
		var env struct {
			Host   map[string]any `json:"host"`
			Server struct {
				Version    string            `json:"version"`
				VersionNum int               `json:"version_num"`
				InRecovery *bool             `json:"in_recovery"`
				Settings   map[string]string `json:"settings"`
			} `json:"server"`
			Embedded *bool `json:"embedded"`
		}
		_ = json.Unmarshal(r.Doc.Environment, &env)
		// Facts are named as in the results (environment.server.*,
		// environment.host.*), settings by their own names.
		if env.Server.Version != "" {
			add(i, secServer, "server.version", env.Server.Version)
			add(i, secServer, "server.version_num", strconv.Itoa(env.Server.VersionNum))
		}
		if env.Server.InRecovery != nil {
			add(i, secServer, "server.in_recovery", strconv.FormatBool(*env.Server.InRecovery))
		}
		if env.Embedded != nil {
			add(i, secServer, "embedded (started by erplab)", strconv.FormatBool(*env.Embedded))
		}
		for _, k := range sortedKeys(env.Server.Settings) {
			add(i, secServer, k, env.Server.Settings[k])
		}
		for _, k := range sortedKeys(env.Host) {
			add(i, secHost, "host."+k, scalar(env.Host[k]))
		}
	}
	rank := map[string]int{secRemedies: 0, secVersion: 1, secParams: 2, secServer: 3, secHost: 4}
	sort.SliceStable(order, func(a, b int) bool {
		sa, _, _ := strings.Cut(order[a], "\x00")
		sb, _, _ := strings.Cut(order[b], "\x00")
		return rank[sa] < rank[sb]
	})
	out := make([]item, 0, len(order))
	for _, k := range order {
		sec, key, _ := strings.Cut(k, "\x00")
		it := item{Section: sec, Key: key, Values: make([]string, len(runs))}
		for i := range runs {
			v, ok := per[i][k]
			if !ok || v == "" {
				v = "-"
			}
			it.Values[i] = v
			if i > 0 && v != it.Values[0] {
				it.Differs = true
			}
		}
		out = append(out, it)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// remediesOf describes extra.remedies: "none" when the run recorded an
// empty list (an ab baseline), "" when it has no such section (a plain
// run), else each remedy with what it changed, e.g. "settings:tuned.conf:
// work_mem 4MB → 16MB, random_page_cost 4 → 1.1".
func remediesOf(r Run) string {
	raw, ok := r.Doc.Extra["remedies"]
	if !ok {
		return ""
	}
	var recs []remedy.Record
	if json.Unmarshal(raw, &recs) != nil {
		return "(unreadable extra.remedies)"
	}
	if len(recs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(recs))
	for _, rec := range recs {
		parts = append(parts, rec.Remedy+changedOf(rec.Changed))
	}
	return strings.Join(parts, "; ")
}

// changedOf describes what a remedy changed: the settings it set (name
// before → during) when it lists them, else its other fields as
// key=value, a field holding counters by name as "name key count" (the
// rewrite proxy's fired: "or_any_array fired 6"). method and summary (a
// multi-line text of the same counters) are left out.
func changedOf(ch map[string]any) string {
	if len(ch) == 0 {
		return ""
	}
	if list, ok := ch["settings"].([]any); ok {
		var parts []string
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s → %s", scalar(m["name"]), scalar(m["before"]), scalar(m["during"])))
		}
		if len(parts) > 0 {
			return ": " + strings.Join(parts, ", ")
		}
	}
	var parts []string
	for _, k := range sortedKeys(ch) {
		switch m, isMap := ch[k].(map[string]any); {
		case k == "method" || k == "summary":
		case isMap && len(m) == 0:
			parts = append(parts, "none "+k)
		case isMap:
			for _, name := range sortedKeys(m) {
				parts = append(parts, name+" "+k+" "+scalar(m[name]))
			}
		default:
			parts = append(parts, k+"="+scalar(ch[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

func experimentVariant(r Run) string {
	var e struct {
		Variant   string `json:"variant"`
		TempStyle string `json:"temp_style"`
		Cache     string `json:"cache"`
	}
	raw, ok := r.Doc.Extra["experiment"]
	if !ok || json.Unmarshal(raw, &e) != nil {
		return ""
	}
	v := e.Variant
	if e.TempStyle != "" {
		v += ", temp style " + e.TempStyle
	}
	if e.Cache != "" {
		v += ", " + e.Cache
	}
	return v
}

// scalar prints a JSON value for a table cell: strings as they are,
// numbers without needless decimals, other values as compact JSON.
func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// paramItems lists a run's parameters for the parameter table: scalars by
// name; stages as "30s:10 5m:10" (DURATION:VUS), rate stages as
// "1m0s:100/s"; each role as "share 3: item_lookup 5, post_order 3";
// workload_details flattened with dots. The key operations and the
// server DSN's dbname are left out (operationRows; see configItems).
func paramItems(raw json.RawMessage) []kv {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []kv
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "operations", "workload":
		case "stages", "rate_stages":
			out = append(out, kv{k, stagesOf(v, k == "rate_stages")})
		case "roles":
			list, _ := v.([]any)
			for _, e := range list {
				r, _ := e.(map[string]any)
				mix, _ := r["mix"].(map[string]any)
				parts := make([]string, 0, len(mix))
				for _, op := range sortedKeys(mix) {
					parts = append(parts, op+" "+scalar(mix[op]))
				}
				out = append(out, kv{"role " + scalar(r["name"]), "share " + scalar(r["share"]) + ": " + strings.Join(parts, ", ")})
			}
		case "server":
			out = append(out, kv{k, dropDBName(scalar(v))})
		case "workload_details":
			for _, f := range flatten(mustJSON(v)) {
				out = append(out, kv{k + "." + f.Key, f.Value})
			}
		default:
			out = append(out, kv{k, scalar(v)})
		}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func stagesOf(v any, rate bool) string {
	list, _ := v.([]any)
	parts := make([]string, 0, len(list))
	for _, e := range list {
		s, _ := e.(map[string]any)
		d, _ := s["duration_s"].(float64)
		dur := time.Duration(d * float64(time.Second)).String()
		if rate {
			parts = append(parts, dur+":"+scalar(s["rate_per_s"])+"/s")
		} else {
			parts = append(parts, dur+":"+scalar(s["target_vus"]))
		}
	}
	return strings.Join(parts, " ")
}

// dropDBName removes the dbname of a key=value DSN: the database copy of
// an ab run is bookkeeping, the server is what counts.
func dropDBName(dsn string) string {
	f := strings.Fields(dsn)
	out := f[:0]
	for _, p := range f {
		if !strings.HasPrefix(p, "dbname=") {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// opDef is one key operation as the parameters define it.
type opDef struct {
	Name, Target, Description string
	Priority                  int
	Runs                      string // the runs that define it, when not all
}

// operationRows lists the key operations of the runs' parameters (name,
// T, priority, description), once; an operation not defined alike in
// every run names the runs that define it so.
func operationRows(runs []Run) []opDef {
	type key struct {
		name, desc string
		target     float64
		prio       int
	}
	var order []key
	users := map[key][]string{}
	for _, r := range runs {
		var p struct {
			Operations []struct {
				Name        string  `json:"name"`
				TargetMs    float64 `json:"target_ms"`
				Priority    int     `json:"priority"`
				Description string  `json:"description"`
			} `json:"operations"`
		}
		_ = json.Unmarshal(r.Doc.Parameters, &p)
		for _, o := range p.Operations {
			k := key{o.Name, o.Description, o.TargetMs, o.Priority}
			if _, ok := users[k]; !ok {
				order = append(order, k)
			}
			users[k] = append(users[k], r.Name)
		}
	}
	out := make([]opDef, 0, len(order))
	for _, k := range order {
		d := opDef{Name: k.name, Target: fmtMs(k.target), Priority: k.prio, Description: k.desc}
		if len(users[k]) != len(runs) {
			d.Runs = strings.Join(users[k], ", ")
		}
		out = append(out, d)
	}
	return out
}
