package proxy

import (
	"container/list"
	"sync"
)

// decisionKey identifies a statement text in one database (catalog
// answers differ between databases).
type decisionKey struct{ db, text string }

// decision is what the rules decided for one statement text.
type decision struct {
	changed   bool
	rewritten string
	explain   string
	// verified: the upstream accepted the rewritten text once.
	verified bool
	// failed: the upstream rejected it; never rewrite it again.
	failed bool
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
	if e, ok := c.items[k]; ok { // another session decided first; its entry may carry a verdict
		c.ll.MoveToFront(e)
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
	d := decision{}
	f(&d)
	if d.failed {
		c.items[k] = c.ll.PushFront(&cacheEntry{key: k, d: d})
	}
}

func (c *decisionCache) markVerified(k decisionKey) {
	c.update(k, func(d *decision) { d.verified = true })
}
func (c *decisionCache) markFailed(k decisionKey) { c.update(k, func(d *decision) { d.failed = true }) }
