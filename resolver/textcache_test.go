package resolver

import (
	"strings"
	"testing"
)

func TestTextCache(t *testing.T) {
	entry := func(text string) int { return len("cn00000x") + len(text) + textEntryOverhead }
	text := strings.Repeat("x", 100)
	c := newTextCache(3 * entry(text+"cn00000x"))
	for _, cn := range []string{"cn00000a", "cn00000b", "cn00000c"} {
		c.put(cn, text+cn, false)
	}
	if got, _, ok := c.get("cn00000a"); !ok || got != text+"cn00000a" {
		t.Fatalf("get(a) = %q, %v; want its text", got, ok)
	}
	// Over the bound: the least recently used (b, as a was just read) goes.
	c.put("cn00000d", text, false)
	for cn, want := range map[string]bool{"cn00000a": true, "cn00000b": false, "cn00000c": true, "cn00000d": true} {
		if _, _, ok := c.get(cn); ok != want {
			t.Errorf("get(%s) = %v, want %v", cn, ok, want)
		}
	}
	if c.bytes > c.max {
		t.Errorf("%d bytes kept, more than %d", c.bytes, c.max)
	}
	// Larger than the whole cache: not kept, nothing evicted.
	c.put("cn00000e", strings.Repeat("y", c.max), false)
	if _, _, ok := c.get("cn00000e"); ok || len(c.byCN) != 3 {
		t.Errorf("a text larger than the cache: kept %v, %d entries; want not kept, 3", ok, len(c.byCN))
	}
	var none *textCache
	none.put("cn00000a", text, false)
	if _, _, ok := none.get("cn00000a"); ok {
		t.Error("a nil cache keeps text")
	}
}

// A message's whole text replaces the start of it that was kept, and not
// the other way round.
func TestTextCacheCut(t *testing.T) {
	c := newTextCache(1 << 20)
	c.put("cn00000a", "start", true)
	if got, cut, ok := c.get("cn00000a"); !ok || !cut || got != "start" {
		t.Fatalf("get = %q, cut %v, %v; want the start, cut", got, cut, ok)
	}
	c.put("cn00000a", "start and the rest", false)
	if got, cut, _ := c.get("cn00000a"); cut || got != "start and the rest" {
		t.Fatalf("after the whole text: get = %q, cut %v; want the whole text", got, cut)
	}
	c.put("cn00000a", "start", true)
	if got, cut, _ := c.get("cn00000a"); cut || got != "start and the rest" {
		t.Fatalf("a cut text replaced the whole one: get = %q, cut %v", got, cut)
	}
	if want := len("cn00000a") + len("start and the rest") + textEntryOverhead; c.bytes != want {
		t.Errorf("%d bytes counted, want %d", c.bytes, want)
	}
}

// Of two cut texts the longer is kept: a search whose words are further
// in the message than the last one's cut reads further.
func TestTextCacheLongerCut(t *testing.T) {
	c := newTextCache(1 << 20)
	c.put("cn00000a", "start", true)
	c.put("cn00000a", "start and more", true)
	if got, cut, _ := c.get("cn00000a"); !cut || got != "start and more" {
		t.Fatalf("after a longer cut text: get = %q, cut %v; want it, cut", got, cut)
	}
	c.put("cn00000a", "start", true)
	if got, _, _ := c.get("cn00000a"); got != "start and more" {
		t.Fatalf("a shorter cut text replaced a longer one: get = %q", got)
	}
	if want := len("cn00000a") + len("start and more") + textEntryOverhead; c.bytes != want {
		t.Errorf("%d bytes counted, want %d", c.bytes, want)
	}
}
