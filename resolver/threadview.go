package resolver

import (
	"cmp"
	"slices"
	"strings"

	"github.com/chibrary/chibrary/catalog"
)

// Participant is a sender of a thread's messages, as the thread page and
// /api/v1/threads/{callnumber} show it.
type Participant struct {
	// Name is the first display name the sender used in the thread, or
	// the address when there was none.
	Name string `json:"name"`
	// Address is the sender's address as the first message gave it; ""
	// for a message without one.
	Address string `json:"address,omitempty"`
	// Messages is how many of the thread's messages the sender wrote.
	Messages int `json:"messages"`
}

// participants returns the distinct senders of th's messages (by address,
// case-insensitively; by name when a message has no address), most
// messages first, then in the order they first wrote. Only th.Nodes
// counts: a truncated thread's first MaxThreadMessages.
func participants(th *catalog.Thread) []Participant {
	var out []Participant
	at := map[string]int{}
	for _, n := range th.Nodes {
		m := n.Message
		if m == nil {
			continue
		}
		key := "a:" + strings.ToLower(m.FromAddr)
		if m.FromAddr == "" {
			key = "n:" + m.FromName
		}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, Participant{Name: m.From(), Address: m.FromAddr})
		}
		out[i].Messages++
	}
	// Stable: equal counts keep the order of their first message.
	slices.SortStableFunc(out, func(a, b Participant) int { return cmp.Compare(b.Messages, a.Messages) })
	return out
}

// replies counts th's messages that answer another (a message of the
// thread, one never archived, or one removed): every message but the
// thread's starting ones.
func replies(th *catalog.Thread) int {
	n := 0
	for _, node := range th.Nodes {
		if node.Message != nil && (node.Parent >= 0 || node.MissingParent != "") {
			n++
		}
	}
	return n
}

// Thread views: the tree (replies under what they answer, the default)
// and by date (every message in the order it was written, unindented).
const (
	viewNested = ""
	viewFlat   = "flat"
)

// threadOrder returns the indexes in th.Nodes of what a thread page in
// view shows, in order: every node for the nested view; for the flat one
// the messages alone (no placeholders), oldest first.
func threadOrder(th *catalog.Thread, view string) []int {
	order := make([]int, 0, len(th.Nodes))
	for i, n := range th.Nodes {
		if view == viewNested || n.Message != nil {
			order = append(order, i)
		}
	}
	if view == viewFlat {
		slices.SortStableFunc(order, func(a, b int) int {
			return th.Nodes[a].Message.Date.Compare(th.Nodes[b].Message.Date)
		})
	}
	return order
}

// headLink is what the head of a page with a canonical link needs
// (base.html's headlink).
type headLink struct{ Title, Canonical string }

// Head is the thread page's title and canonical link.
func (v *threadView) Head() headLink {
	title := v.Thread.Subject
	if title == "" {
		title = "(no subject)"
	}
	return headLink{Title: title, Canonical: v.Canonical}
}
