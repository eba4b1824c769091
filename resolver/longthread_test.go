package resolver

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestThreadPageOutlineAndLinks: a long thread's outline is folded, so
// that its messages are not screens down, and so is it on every page
// after the first; a short one's is open on its first page. Each message
// of a thread page links its own page, its raw bytes and how to reply.
func TestThreadPageOutlineAndLinks(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	thread := func(name string, n int) []string {
		var cns []string
		for i := range n {
			raw := "From: Poster " + strconv.Itoa(i) + " <p" + strconv.Itoa(i) + "@example.org>\nSubject: Re: " + name + "\nDate: " +
				time.Date(2020, 5, 1, 0, i, 0, 0, time.UTC).Format(time.RFC1123Z) + "\nMessage-ID: <" + name + strconv.Itoa(i) + "@example.org>\n"
			if i > 0 {
				raw += "In-Reply-To: <" + name + "0@example.org>\n"
			}
			raw += "\nmessage " + strconv.Itoa(i) + "\n"
			cns = append(cns, a.put(t, []byte(raw), "l").String())
		}
		return cns
	}
	long := thread("long", messagesPerThreadPage+openOutline)
	short := thread("short", outlineFrom+1)
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	tests := []struct {
		path, outline string
	}{
		{"/t/" + long[0] + "/", `<details class="outline"><summary>Outline: who wrote what (` + strconv.Itoa(len(long)) + ` messages)</summary>`},
		{"/t/" + long[0] + "/?page=2", `<details class="outline"><summary>Outline: who wrote what (` + strconv.Itoa(len(long)) + ` messages)</summary>`},
		{"/t/" + short[0] + "/", `<details class="outline" open><summary>Outline: who wrote what</summary>`},
	}
	for _, tt := range tests {
		r := get(t, srv.URL+tt.path)
		if r.status != 200 || !strings.Contains(r.body, tt.outline) {
			t.Errorf("GET %s = %d, want the outline as %q", tt.path, r.status, tt.outline)
		}
	}
	r := get(t, srv.URL+"/t/"+short[0]+"/")
	for _, cn := range short {
		want := `<footer class="tlinks"><a href="/` + cn + `">permalink</a> <a href="/` + cn + `/raw">raw</a> <a href="/` + cn + `#reply">reply</a></footer>`
		if !strings.Contains(r.body, want) {
			t.Errorf("the thread page lacks the links of %s: %q", cn, want)
		}
	}
	if err := unsafeHTML(r.body); err != nil {
		t.Error(err)
	}
}
