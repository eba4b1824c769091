package catalog

import (
	"cmp"
	"slices"
)

// Node is one place in a thread's tree: a message, or a placeholder for a
// message that others name but the archive does not have.
type Node struct {
	// Message is the message here, or nil for a placeholder.
	Message *Message `json:"message,omitempty"`
	// MessageID is the placeholder's Message-ID (the message's own is in
	// Message).
	MessageID string `json:"message_id,omitempty"`
	// Depth is 0 for a root.
	Depth int `json:"depth"`
	// Parent is the index of the parent node in Thread.Nodes, -1 for a
	// root.
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
}

// maxDepthWalk bounds the walks up a chain of parents; a thread deeper
// than this is cut there rather than walked forever.
const maxDepthWalk = 100000

// isAncestor reports whether a is b or one of b's ancestors.
func isAncestor(a, b *container) bool {
	for i := 0; b != nil && i < maxDepthWalk; i++ {
		if a == b {
			return true
		}
		b = b.parent
	}
	return false
}

func (c *container) setParent(p *container) {
	if c.parent != nil {
		c.parent.children = slices.DeleteFunc(c.parent.children, func(x *container) bool { return x == c })
	}
	c.parent = p
	if p != nil {
		p.children = append(p.children, c)
	}
}

// buildTree arranges a thread's messages (oldest first) as JWZ does,
// given each message's references (refs[i] for msgs[i], parent last), and
// returns the nodes in reading order: depth first, replies oldest first.
// The placeholders of the Message-IDs keep names stay where their replies
// put them, like messages (a message removed from the archive keeps its
// place); other placeholders are pruned as JWZ prunes them.
func buildTree(msgs []*Message, refs [][]string, keep map[string]bool) []Node {
	byID := map[string]*container{}
	get := func(id string) *container {
		c := byID[id]
		if c == nil {
			c = &container{id: id}
			byID[id] = c
		}
		return c
	}
	own := make([]*container, len(msgs))
	var all []*container
	for i, m := range msgs {
		var c *container
		if m.MessageID != "" {
			if c = get(m.MessageID); c.msg != nil {
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
	for i := range msgs {
		// Link the references in their order, keeping links made before
		// and never making a loop (JWZ step 1A).
		var prev *container
		for _, id := range refs[i] {
			c := get(id)
			if prev != nil && c.parent == nil && !isAncestor(c, prev) {
				c.setParent(prev)
			}
			prev = c
		}
		// The message's own parent is its last reference, which overrides
		// a link made by another message's References (step 1C).
		c := own[i]
		switch {
		case prev == nil:
			c.setParent(nil)
		case !isAncestor(c, prev):
			c.setParent(prev)
		}
	}
	for _, c := range byID {
		if c.msg == nil {
			all = append(all, c)
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
	// Messages joined by subject (no references at all) hang under the
	// thread's first message.
	if len(roots) > 1 && roots[0].msg != nil {
		main := roots[0]
		var rest []*container
		for _, r := range roots[1:] {
			if r.msg != nil && len(refs[r.idx]) == 0 {
				r.setParent(main)
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
		} else if r := refs[c.idx]; len(r) > 0 && !isArchived[r[len(r)-1]] {
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

// prune removes placeholders without replies, and replaces a placeholder
// by its replies where it has only one, or where it is not a root (JWZ
// step 4): a reader needs a placeholder only to see that several messages
// answer the same missing one.
func prune(cs []*container, keep map[string]bool) []*container {
	var out []*container
	for _, c := range cs {
		c.children = prune(c.children, keep)
		for _, k := range c.children {
			k.parent = c
		}
		switch {
		case c.msg != nil, keep[c.id] && len(c.children) > 0:
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
