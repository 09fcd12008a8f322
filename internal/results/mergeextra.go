package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// extraKind is how Merge combines one section of the segments' extra
// (see the "Merge" section of the package doc).
type extraKind int

const (
	// extraPerSegment: a fact of the agent's machine or of its own
	// measurement (e.g. stress: the load machine's CPU and vmstat) or a
	// section this package does not know: kept in each segment's
	// merged.segments[].extra only.
	extraPerSegment extraKind = iota
	// extraSame: what must be the same on every agent (experiment,
	// remedies): kept once; a segment with another value, or without it
	// in an extra it wrote (not a killed agent's stream, which has no
	// extra), is refused.
	extraSame
	// extraServerView: the server as each agent saw it over the same
	// run (observations, profile): every segment's in
	// merged.segments[].extra, and extra the first piece's that has one,
	// for the readers of a run (report, compare).
	extraServerView
	// extraSpan: the catalog sizes each agent measured at its start and
	// end: extra is before_bytes of the segment that started first and
	// after_bytes of the one that ended last, the run's span; every
	// segment's in merged.segments[].extra.
	extraSpan
)

// extraKinds names the sections of extra whose merge is known; any other
// is extraPerSegment.
var extraKinds = map[string]extraKind{
	"catalog":      extraSpan,
	"observations": extraServerView,
	"profile":      extraServerView,
	"invalidation": extraServerView,
	"stress":       extraPerSegment,
	"experiment":   extraSame,
	"remedies":     extraSame,
}

// mergeExtra combines the extra sections of the segments docs (in
// sequence order, names[k] naming docs[k] in errors): a section equal
// (as JSON values) in every segment is kept once in top and not
// repeated; any other follows its extraKind. per[k] holds what docs[k]
// keeps in merged.segments[k].extra (nil when nothing); notes say which
// unknown sections were kept per segment only. The error (one line)
// names an extraSame section that differs or is missing in a segment,
// or a section that is not JSON.
func mergeExtra(docs []*Document, names []string) (top map[string]json.RawMessage, per []map[string]json.RawMessage, notes []string, err error) {
	var keys []string
	seen := map[string]bool{}
	for _, d := range docs {
		for k := range d.Extra {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	per = make([]map[string]json.RawMessage, len(docs))
	keep := func(i int, key string) {
		if per[i] == nil {
			per[i] = map[string]json.RawMessage{}
		}
		per[i][key] = docs[i].Extra[key]
	}
	put := func(key string, v json.RawMessage) {
		if top == nil {
			top = map[string]json.RawMessage{}
		}
		top[key] = v
	}
	label := func(i int) string { return fmt.Sprintf("%s (segment %s)", names[i], docs[i].Segment.Label()) }
	for _, key := range keys {
		first, same := -1, true
		vals := make([]any, len(docs))
		for i, d := range docs {
			raw, ok := d.Extra[key]
			if !ok {
				same = false
				continue
			}
			if err := json.Unmarshal(raw, &vals[i]); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: extra.%s: %w", label(i), key, err)
			}
			if first < 0 {
				first = i
			} else if same && !reflect.DeepEqual(vals[i], vals[first]) {
				same = false
			}
		}
		if same {
			put(key, docs[first].Extra[key])
			continue
		}
		kind := extraKinds[key]
		if kind == extraSame {
			for i, d := range docs {
				if _, ok := d.Extra[key]; !ok {
					if d.Extra == nil {
						continue // rebuilt from a killed agent's stream: recorded no extra
					}
					return nil, nil, nil, fmt.Errorf("%s has no extra.%s, %s has one: the agents must run the same experiment", label(i), key, label(first))
				}
				if !reflect.DeepEqual(vals[i], vals[first]) {
					return nil, nil, nil, fmt.Errorf("%s has another extra.%s than %s: the agents must run the same experiment", label(i), key, label(first))
				}
			}
			put(key, docs[first].Extra[key])
			continue
		}
		for i, d := range docs {
			if _, ok := d.Extra[key]; ok {
				keep(i, key)
			}
		}
		switch kind {
		case extraServerView:
			put(key, docs[first].Extra[key])
		case extraSpan:
			v, err := catalogSpan(docs, key)
			if err != nil {
				return nil, nil, nil, err
			}
			put(key, v)
		case extraPerSegment:
			if _, known := extraKinds[key]; !known {
				notes = append(notes, fmt.Sprintf("extra.%s is not the same in every segment: kept per segment (merged.segments[].extra.%s)", key, key))
			}
		}
	}
	return top, per, notes, nil
}

// catalogSpan makes extra.catalog of the run from the segments' ones:
// before_bytes of the segment that started first, after_bytes of the one
// that ended last (among those that have the section and that figure).
func catalogSpan(docs []*Document, key string) (json.RawMessage, error) {
	type growth struct {
		Before json.RawMessage `json:"before_bytes,omitempty"`
		After  json.RawMessage `json:"after_bytes,omitempty"`
	}
	var out growth
	var from, to *Document
	for _, d := range docs {
		raw, ok := d.Extra[key]
		if !ok {
			continue
		}
		var g growth
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, fmt.Errorf("segment %s: extra.%s: %w", d.Segment.Label(), key, err)
		}
		if len(g.Before) > 0 && !bytes.Equal(g.Before, []byte("null")) && (from == nil || d.StartedAt.Before(from.StartedAt)) {
			from, out.Before = d, g.Before
		}
		if len(g.After) > 0 && !bytes.Equal(g.After, []byte("null")) && (to == nil || d.EndedAt.After(to.EndedAt)) {
			to, out.After = d, g.After
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("extra.%s: %w", key, err)
	}
	return b, nil
}

// hostFacts returns each segment's environment.host (the agent's
// machine: host name, kernel, CPUs, memory, THP) when they are not all
// equal, else nil: the merged environment is the first segment's.
func hostFacts(docs []*Document) []json.RawMessage {
	hosts := make([]json.RawMessage, len(docs))
	vals := make([]any, len(docs))
	same := true
	for i, d := range docs {
		var env struct {
			Host json.RawMessage `json:"host"`
		}
		if len(d.Environment) > 0 {
			_ = json.Unmarshal(d.Environment, &env) // an unreadable environment records no host
		}
		hosts[i] = env.Host
		if len(env.Host) > 0 {
			_ = json.Unmarshal(env.Host, &vals[i])
		}
		same = same && reflect.DeepEqual(vals[i], vals[0])
	}
	if same {
		return nil
	}
	return hosts
}
