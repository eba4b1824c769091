package resolver

import (
	"container/list"
	"sync"
)

// textCacheBytes bounds the text the excerpt cache keeps.
const textCacheBytes = 16 << 20

// textCache keeps the text of the messages search results showed last,
// by call number, for their excerpts: a message never changes, and the
// newest messages are on the first page of most searches. Cutting an
// excerpt from kept text costs a tenth of fetching, decompressing and
// parsing the message again. Least recently used texts go first. A nil
// *textCache keeps nothing.
type textCache struct {
	mu    sync.Mutex
	ll    *list.List // of *textEntry, most recent first
	byCN  map[string]*list.Element
	bytes int
	max   int
}

type textEntry struct {
	cn, text string
	// cut: the text is the start of the message's, cut short of
	// excerptTextBytes (at excerptFirstBytes, or where the excerpt of a
	// search found what it needed).
	cut bool
}

// textEntryOverhead is about what an entry costs besides its strings.
const textEntryOverhead = 128

func newTextCache(max int) *textCache {
	return &textCache{ll: list.New(), byCN: map[string]*list.Element{}, max: max}
}

// get returns the text kept for cn, and whether it was cut short.
func (c *textCache) get(cn string) (text string, cut, ok bool) {
	if c == nil {
		return "", false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byCN[cn]
	if !ok {
		return "", false, false
	}
	c.ll.MoveToFront(e)
	t := e.Value.(*textEntry)
	return t.text, t.cut, true
}

// put keeps text for cn; cut says it is the start of a longer text. A
// longer text replaces a cut one (cut texts end where the excerpt of a
// search found its words: the longest serves the most searches).
func (c *textCache) put(cn, text string, cut bool) {
	size := len(cn) + len(text) + textEntryOverhead
	if c == nil || size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byCN[cn]; ok {
		c.ll.MoveToFront(e)
		old := e.Value.(*textEntry)
		if !old.cut || cut && len(text) <= len(old.text) {
			return
		}
		c.bytes += len(text) - len(old.text)
		old.text, old.cut = text, cut
	} else {
		c.byCN[cn] = c.ll.PushFront(&textEntry{cn: cn, text: text, cut: cut})
		c.bytes += size
	}
	for c.bytes > c.max {
		e := c.ll.Back()
		t := e.Value.(*textEntry)
		c.ll.Remove(e)
		delete(c.byCN, t.cn)
		c.bytes -= len(t.cn) + len(t.text) + textEntryOverhead
	}
}
