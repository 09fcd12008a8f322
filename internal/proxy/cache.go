package proxy

import (
	"container/list"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/erplab/erplab/internal/rewrite"
)

// decisionKey identifies a statement text in one context: database,
// user, the session's search_path setting ("" for the default, see
// setPath) and the parameter types the client declared. A key whose
// text starts with NUL holds a statement fingerprint instead
// (neverKey): the "never rewrite" verdicts.
type decisionKey struct{ db, user, path, params, text string }

// appendKey appends the cache's map key of a decisionKey with these
// fields to b: the fields joined by NUL (no field but text holds one; a
// text with a NUL is rejected by the server and by pg_query alike, and
// params is paramsKey's fixed-width form). The relay builds it from a
// message's bytes in a reused buffer, so that a cached statement costs
// one map lookup and no allocation.
func appendKey[T string | []byte](b []byte, db, user, path string, params, text T) []byte {
	b = append(append(b, db...), 0)
	b = append(append(b, user...), 0)
	b = append(append(b, path...), 0)
	b = append(append(b, params...), 0)
	return append(b, text...)
}

// mapKey is k's map key (appendKey).
func (k decisionKey) mapKey() string {
	var b strings.Builder
	b.Grow(len(k.db) + len(k.user) + len(k.path) + len(k.params) + len(k.text) + 4)
	for _, f := range [...]string{k.db, k.user, k.path, k.params} {
		b.WriteString(f)
		b.WriteByte(0)
	}
	b.WriteString(k.text)
	return b.String()
}

// paramsKey is the decision-key form of declared parameter types: each
// OID as 4 big-endian bytes, as a Parse message carries them.
func paramsKey(oids []uint32) string {
	if len(oids) == 0 {
		return ""
	}
	b := make([]byte, 0, 4*len(oids))
	for _, o := range oids {
		b = binary.BigEndian.AppendUint32(b, o)
	}
	return string(b)
}

// neverKey is the fingerprint key of k's statement.
func neverKey(k decisionKey, fp string) decisionKey {
	return decisionKey{db: k.db, user: k.user, path: k.path, text: "\x00" + fp}
}

// DefaultDecisionTTL is Config.DecisionTTL's default: how long a
// decision is used before the rules and the server's validation run
// again (a schema change the proxy did not see is seen within it).
const DefaultDecisionTTL = time.Minute

// decision is what the rules decided for one statement text.
type decision struct {
	changed   bool
	rewritten string
	pos       rewrite.PositionMap // rewritten -> original offsets
	explain   string
	fp        string   // the statement's fingerprint
	names     []string // relations the validated statement names (rewrite.Result.Relations)
	// replayable: the text is one statement, so a rejected simple
	// Query of it can be sent again as written.
	replayable bool
	gen        uint64    // the database's DDL generation when decided
	at         time.Time // when decided
	// verified: the upstream accepted the rewritten text once in a
	// client's session.
	verified bool
	// failed: the server rejected it (validation or a session); never
	// rewrite it again.
	failed bool
	// checks: the rewritten text holds only for executions whose
	// parameters checks ($n) pass rewrite.LikePatternSafe
	// (rewrite.Result.BindChecks; condstmt.go).
	checks []int
}

// current reports whether d may still be used at generation gen, when
// decisions live for ttl.
func (d decision) current(gen uint64, ttl time.Duration) bool {
	return d.gen == gen && (d.failed || time.Since(d.at) < ttl)
}

// decisionCache is a bounded LRU from statement text to decision, safe for
// concurrent use.
type decisionCache struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration // how long a decision lives (Config.DecisionTTL)
	ll    *list.List
	items map[string]*list.Element // by decisionKey.mapKey
}

type cacheEntry struct {
	key decisionKey
	d   decision
}

func newDecisionCache(max int, ttl time.Duration) *decisionCache {
	return &decisionCache{max: max, ttl: ttl, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *decisionCache) get(k decisionKey) (decision, bool) {
	mk := k.mapKey()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit(c.items[mk])
}

// getKey is get by map key (appendKey), without allocating.
func (c *decisionCache) getKey(key []byte) (decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hit(c.items[string(key)]) // no copy of key for the lookup
}

// hit returns e's decision and marks it used (c.mu held); e may be nil.
func (c *decisionCache) hit(e *list.Element) (decision, bool) {
	if e == nil {
		return decision{}, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).d, true
}

func (c *decisionCache) put(k decisionKey, d decision) {
	mk := k.mapKey()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[mk]; ok {
		c.ll.MoveToFront(e)
		ce := e.Value.(*cacheEntry)
		if !ce.d.current(d.gen, c.ttl) { // stale: replace
			ce.d = d
		} // else another session decided first; its entry may carry a verdict
		return
	}
	c.items[mk] = c.ll.PushFront(&cacheEntry{key: k, d: d})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key.mapKey())
	}
}

// len is the number of cached decisions.
func (c *decisionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

func (c *decisionCache) update(k decisionKey, f func(*decision)) {
	mk := k.mapKey()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[mk]; ok {
		f(&e.Value.(*cacheEntry).d)
		return
	}
	// Evicted meanwhile: a failure must still stick.
	d := decision{at: time.Now()}
	f(&d)
	if d.failed {
		c.items[mk] = c.ll.PushFront(&cacheEntry{key: k, d: d})
	}
}

func (c *decisionCache) markVerified(k decisionKey) {
	c.update(k, func(d *decision) { d.verified = true })
}
func (c *decisionCache) markFailed(k decisionKey) { c.update(k, func(d *decision) { d.failed = true }) }

// dropNamed drops the decisions of database db whose statement names one
// of names.
func (c *decisionCache) dropNamed(db string, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for mk, e := range c.items {
		ce := e.Value.(*cacheEntry)
		if ce.key.db != db {
			continue
		}
		for _, n := range ce.d.names {
			if slices.Contains(names, n) {
				c.ll.Remove(e)
				delete(c.items, mk)
				break
			}
		}
	}
}

// clear drops the decisions of database db, or every decision when all.
func (c *decisionCache) clear(db string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for mk, e := range c.items {
		if all || e.Value.(*cacheEntry).key.db == db {
			c.ll.Remove(e)
			delete(c.items, mk)
		}
	}
}
