package catalog

import (
	"cmp"
	"slices"
	"time"
)

// Node is one place in a thread's tree: a message, or a placeholder for a
// message that others name but the archive does not have.
type Node struct {
	// Message is the message here, or nil for a placeholder.
	Message *Message `json:"message,omitempty"`
	// MessageID is a placeholder's Message-ID.
	MessageID string `json:"message_id,omitempty"`
	// Depth is 0 for a root.
	Depth int `json:"depth"`
	// Parent is the index of the parent node in Thread.Nodes, -1 for a root.
	Parent int `json:"parent"`
	// Children are the indexes of the replies, oldest first.
	Children []int `json:"children,omitempty"`
	// MissingParent is set on a message whose parent (the last Message-ID
	// it names) was never archived in this list: that Message-ID.
	MissingParent string `json:"missing_parent,omitempty"`
	// Removed is set on a placeholder of a message that was archived and
	// then removed, and on a message whose MissingParent was.
	Removed *Removed `json:"removed,omitempty"`
}

// container is a node of JWZ's algorithm while the tree is built.
type container struct {
	msg      *Message
	idx      int // of msg in the messages given to buildTree
	id       string
	parent   *container
	children []*container
	first    *Message // the earliest message in the subtree, for ordering
	// link orders the link to parent among all links made (the later
	// one of a loop is undone); mark is used by the loop search.
	link int
	mark int
}

// treeBuilder builds a thread's tree; steps counts the parent links it
// follows, which tests hold to a number linear in its input.
type treeBuilder struct {
	byID  map[string]*container
	steps int
}

func newTreeBuilder() *treeBuilder { return &treeBuilder{byID: map[string]*container{}} }

func (b *treeBuilder) get(id string) *container {
	c := b.byID[id]
	if c == nil {
		c = &container{id: id}
		b.byID[id] = c
	}
	return c
}

// buildTree arranges a thread's messages (oldest first) as JWZ does, given
// their references (refs[i] for msgs[i], parent last), and returns the
// nodes depth first, replies oldest first. Placeholders of the IDs in keep
// (removed messages) keep their place: among their siblings by the date
// keep gives (by their first reply's when zero); others are pruned as JWZ
// prunes.
func buildTree(msgs []*Message, refs [][]string, keep map[string]time.Time) []Node {
	return newTreeBuilder().build(msgs, refs, keep)
}

// build is buildTree. Every link is made once and loops are undone after,
// so the work is linear however the references name each other.
func (b *treeBuilder) build(msgs []*Message, refs [][]string, keep map[string]time.Time) []Node {
	own := make([]*container, len(msgs))
	var all []*container
	for i, m := range msgs {
		var c *container
		if m.MessageID != "" {
			if c = b.get(m.MessageID); c.msg != nil {
				// Several messages share this Message-ID: the first keeps
				// it; the others stand beside it, under their own parents.
				c = &container{id: m.MessageID}
			}
		} else {
			c = &container{}
		}
		c.msg, c.idx = m, i
		own[i] = c
		all = append(all, c)
	}
	// JWZ step 1, in the messages' order. A message's parent is its last
	// reference (step 1C); a message without references, and a
	// placeholder, take the first parent that another message's
	// References give them (step 1A: links made before are kept); a
	// message's own references, read before it, do not bind it.
	links := 0
	link := func(c, p *container) {
		c.parent, c.link = p, links
		links++
	}
	for i := range msgs {
		var prev *container
		for _, id := range refs[i] {
			c := b.get(id)
			if prev != nil && c.parent == nil && c != prev && (c.msg == nil || c.idx < i && len(refs[c.idx]) == 0) {
				link(c, prev)
			}
			prev = c
		}
		if c := own[i]; prev != nil && c != prev {
			link(c, prev)
		}
	}
	for _, c := range b.byID {
		if c.msg == nil {
			all = append(all, c)
			// A removed message sorts by its own date, not its replies'.
			if d, ok := keep[c.id]; ok && !d.IsZero() {
				c.first = &Message{Date: d}
			}
		}
	}
	b.breakLoops(all)
	for _, c := range all {
		if c.parent != nil {
			c.parent.children = append(c.parent.children, c)
		}
	}
	var roots []*container
	for _, c := range all {
		if c.parent == nil {
			roots = append(roots, c)
		}
	}
	roots = prune(roots, keep)
	for _, r := range roots {
		setFirst(r)
	}
	slices.SortFunc(roots, byFirst)
	// Messages joined by subject hang under the message they quote, else
	// under the thread's first message.
	if len(roots) > 1 && roots[0].msg != nil {
		main := roots[0]
		byRow := map[int64]*container{}
		for _, c := range own {
			byRow[c.msg.id] = c
		}
		var rest []*container
		for _, r := range roots[1:] {
			if r.msg != nil && (len(refs[r.idx]) == 0 || r.msg.Joined != JoinedByID) {
				p := main
				if q := byRow[r.msg.quotes]; q != nil && !under(q, r) {
					p = q
				}
				r.parent = p
				p.children = append(p.children, r)
				continue
			}
			rest = append(rest, r)
		}
		roots = append([]*container{main}, rest...)
	}

	isArchived := map[string]bool{}
	for _, m := range msgs {
		if m.MessageID != "" {
			isArchived[m.MessageID] = true
		}
	}
	var nodes []Node
	var walk func(c *container, depth, parent int)
	walk = func(c *container, depth, parent int) {
		i := len(nodes)
		n := Node{Message: c.msg, Depth: depth, Parent: parent}
		if c.msg == nil {
			n.MessageID = c.id
		} else if r := refs[c.idx]; len(r) > 0 && !isArchived[r[len(r)-1]] && c.msg.Joined == JoinedByID {
			// (A message joined by subject is where its subject puts it.)
			n.MissingParent = r[len(r)-1]
		}
		nodes = append(nodes, n)
		if parent >= 0 {
			nodes[parent].Children = append(nodes[parent].Children, i)
		}
		kids := slices.Clone(c.children)
		for _, k := range kids {
			setFirst(k)
		}
		slices.SortFunc(kids, byFirst)
		for _, k := range kids {
			walk(k, depth+1, i)
		}
	}
	for _, r := range roots {
		walk(r, 0, -1)
	}
	return nodes
}

// under reports whether c is r or below it.
func under(c, r *container) bool {
	for x := c; x != nil; x = x.parent {
		if x == r {
			return true
		}
	}
	return false
}

// breakLoops undoes, in every loop of parent links (broken or hostile
// References), the link made last, which JWZ's step 1A would not have
// made. Each chain of parents is followed once.
func (b *treeBuilder) breakLoops(all []*container) {
	for i, start := range all {
		stamp := i + 1
		c := start
		for c != nil && c.mark == 0 {
			c.mark = stamp
			c = c.parent
			b.steps++
		}
		if c == nil || c.mark != stamp {
			continue // reached a root, or a chain seen before
		}
		// c is on a loop met in this walk: find its last link.
		last := c
		for x := c.parent; x != c; x = x.parent {
			if x.link > last.link {
				last = x
			}
			b.steps++
		}
		last.parent = nil
	}
}

// prune removes placeholders without replies, and replaces a placeholder
// by its replies where it has one, or is not a root (JWZ step 4): a reader
// needs one only to see several messages answer the same missing one.
func prune(cs []*container, keep map[string]time.Time) []*container {
	var out []*container
	for _, c := range cs {
		c.children = prune(c.children, keep)
		for _, k := range c.children {
			k.parent = c
		}
		switch {
		case c.msg != nil, len(c.children) > 0 && kept(keep, c.id):
			out = append(out, c)
		case len(c.children) == 0:
		case len(c.children) == 1 || c.parent != nil:
			for _, k := range c.children {
				k.parent = c.parent
			}
			out = append(out, c.children...)
		default:
			out = append(out, c)
		}
	}
	return out
}

func kept(keep map[string]time.Time, id string) bool {
	_, ok := keep[id]
	return ok
}

// setFirst records the earliest message of c's subtree.
func setFirst(c *container) *Message {
	if c.first != nil {
		return c.first
	}
	c.first = c.msg
	for _, k := range c.children {
		if f := setFirst(k); c.first == nil || (f != nil && earlier(f, c.first)) {
			c.first = f
		}
	}
	return c.first
}

func earlier(a, b *Message) bool {
	return a.Date.Before(b.Date) || a.Date.Equal(b.Date) && a.id < b.id
}

func byFirst(a, b *container) int {
	fa, fb := setFirst(a), setFirst(b)
	switch {
	case fa == nil || fb == nil:
		return 0
	case earlier(fa, fb):
		return -1
	case earlier(fb, fa):
		return 1
	}
	return cmp.Compare(a.id, b.id)
}
