package proxy

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// decisionKey identifies a statement text in one context: database,
// user, the session's search_path setting ("" for the default, see
// setPath) and the parameter types the client declared. A key whose
// text starts with NUL holds a statement fingerprint instead
// (neverKey): the "never rewrite" verdicts.
type decisionKey struct{ db, user, path, params, text string }

// neverKey is the fingerprint key of k's statement.
func neverKey(k decisionKey, fp string) decisionKey {
	return decisionKey{db: k.db, user: k.user, path: k.path, text: "\x00" + fp}
}

// decisionTTL is how long a decision is used before the rules and the
// server's validation run again (DDL run outside the proxy is seen
// within it).
const decisionTTL = time.Minute

// decision is what the rules decided for one statement text.
type decision struct {
	changed   bool
	rewritten string
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
}

// current reports whether d may still be used at generation gen.
func (d decision) current(gen uint64) bool {
	return d.gen == gen && (d.failed || time.Since(d.at) < decisionTTL)
}

// decisionCache is a bounded LRU from statement text to decision, safe for
// concurrent use.
type decisionCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[decisionKey]*list.Element
}

type cacheEntry struct {
	key decisionKey
	d   decision
}

func newDecisionCache(max int) *decisionCache {
	return &decisionCache{max: max, ll: list.New(), items: map[decisionKey]*list.Element{}}
}

func (c *decisionCache) get(k decisionKey) (decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).d, true
	}
	return decision{}, false
}

func (c *decisionCache) put(k decisionKey, d decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		ce := e.Value.(*cacheEntry)
		if !ce.d.current(d.gen) { // stale: replace
			ce.d = d
		} // else another session decided first; its entry may carry a verdict
		return
	}
	c.items[k] = c.ll.PushFront(&cacheEntry{key: k, d: d})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key)
	}
}

// len is the number of cached decisions.
func (c *decisionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

func (c *decisionCache) update(k decisionKey, f func(*decision)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		f(&e.Value.(*cacheEntry).d)
		return
	}
	// Evicted meanwhile: a failure must still stick.
	d := decision{at: time.Now()}
	f(&d)
	if d.failed {
		c.items[k] = c.ll.PushFront(&cacheEntry{key: k, d: d})
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
	for k, e := range c.items {
		if k.db != db {
			continue
		}
		for _, n := range e.Value.(*cacheEntry).d.names {
			if slices.Contains(names, n) {
				c.ll.Remove(e)
				delete(c.items, k)
				break
			}
		}
	}
}

// clear drops every decision of database db.
func (c *decisionCache) clear(db string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k.db == db {
			c.ll.Remove(e)
			delete(c.items, k)
		}
	}
}
