package resolver

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestPatchVersions: a patch's page links its other versions and says
// when a newer one was posted; its JSON lists them; a message that is not
// a patch says nothing of versions.
func TestPatchVersions(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	patch := func(id, subject, date string) string {
		return a.put(t, []byte("From: Dev Eloper <dev@example.org>\nSubject: "+subject+"\nMessage-ID: <"+id+"@example.org>\nDate: "+date+"\n\n---\n a.c | 1 +\n"), "l").String()
	}
	v1 := patch("v1", "[PATCH 1/2] MIPS: fix the TLB flush", "Mon, 1 Jan 2024 10:00:00 +0000")
	v2 := patch("v2", "[PATCH v2 1/3] MIPS: fix the TLB flush", "Mon, 8 Jan 2024 10:00:00 +0000")
	v3 := patch("v3", "[PATCH v3 1/3] MIPS: fix the TLB flush", "Mon, 15 Jan 2024 10:00:00 +0000")
	reply := a.put(t, []byte("From: R <r@example.org>\nSubject: Re: [PATCH v3 1/3] MIPS: fix the TLB flush\nMessage-ID: <r@example.org>\nIn-Reply-To: <v3@example.org>\nDate: Tue, 16 Jan 2024 10:00:00 +0000\n\nAcked.\n"), "l").String()
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})

	r := get(t, srv.URL+"/"+v2)
	for _, want := range []string{
		`<strong>A newer version of this patch was posted:</strong> <a href="/` + v3 + `">v3</a>, 2024-01-15`,
		`<div class="versions"><p>Versions of this patch:</p><ul><li><a href="/` + v1 + `">v1</a> <span class="meta">2024-01-01</span></li>`,
		`<li><span aria-current="page">v2 (this one)</span></li><li><a href="/` + v3 + `">v3</a>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /%s: no %q in\n%s", v2, want, r.body)
		}
	}
	r = get(t, srv.URL+"/"+v3)
	if strings.Contains(r.body, "A newer version") || !strings.Contains(r.body, `<li><span aria-current="page">v3 (this one)</span></li></ul></div>`) {
		t.Errorf("GET /%s (the newest): want no newer version and itself last:\n%s", v3, r.body)
	}
	if r := get(t, srv.URL+"/"+reply); strings.Contains(r.body, "Versions of this patch") {
		t.Errorf("GET /%s (a reply) speaks of versions", reply)
	}

	var out struct {
		PatchVersion int `json:"patch_version"`
		Versions     []struct {
			CallNumber string `json:"callnumber"`
			Version    int    `json:"version"`
		} `json:"versions"`
	}
	r = get(t, srv.URL+"/api/v1/messages/"+v1)
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatal(err)
	}
	if out.PatchVersion != 1 || len(out.Versions) != 2 || out.Versions[0].CallNumber != v2 || out.Versions[0].Version != 2 || out.Versions[1].CallNumber != v3 {
		t.Errorf("GET /api/v1/messages/%s: patch_version %d, versions %+v; want 1, then v2 %s and v3 %s", v1, out.PatchVersion, out.Versions, v2, v3)
	}
	r = get(t, srv.URL+"/api/v1/messages/"+reply)
	if strings.Contains(r.body, `"versions"`) || strings.Contains(r.body, `"patch_version"`) {
		t.Errorf("GET /api/v1/messages/%s (a reply) = %s; want no versions", reply, r.body)
	}
}

// TestSeriesDiffstat: fixtures/changeid. A cover letter's page lists the
// versions of its series (linked by b4's change-id, its subject changed)
// with what each changes, summed over its patches; its JSON too. A patch
// of the series speaks of the patch's versions.
func TestSeriesDiffstat(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	cns := map[string]string{}
	for _, raw := range readMboxFile(t, filepath.Join("..", "fixtures", "changeid", "series.mbox")) {
		meta, _ := mailmsg.Parse(raw)
		cns[strings.TrimSuffix(meta.MessageID, "@example.org")] = a.put(t, raw, "linux-mips").String()
	}
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	v1, v2 := cns["ralink-v1-0"], cns["ralink-v2-0"]
	r := get(t, srv.URL+"/"+v1)
	for _, want := range []string{
		`<strong>A newer version of this series was posted:</strong> <a href="/` + v2 + `">v2</a>, 2024-01-24`,
		`<div class="versions"><p>Versions of this series:</p><ul><li><span aria-current="page">v1 (this one)</span> <span class="meta">1 file changed, 1 insertion(&#43;), 1 deletion(-)</span></li><li><a href="/` + v2 + `">v2</a> <span class="meta">2024-01-24: 2 patches, 2 files changed, 8 insertions(&#43;), 2 deletions(-)</span></li></ul></div>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /%s: no %q in\n%s", v1, want, r.body)
		}
	}
	if r := get(t, srv.URL+"/"+cns["ralink-v1-1"]); !strings.Contains(r.body, `A newer version of this patch was posted`) || !strings.Contains(r.body, `Versions of this patch:`) {
		t.Errorf("GET /%s (a patch of the series): want the patch's versions\n%s", cns["ralink-v1-1"], r.body)
	}
	r = get(t, srv.URL+"/api/v1/messages/"+v1)
	for _, want := range []string{
		`"versions":[{"callnumber":"` + v2 + `","version":2,"subject":"[PATCH v2 0/3] MIPS: ralink: MT7621 timer and clock fixes","date":"2024-01-24T10:00:00Z","diffstat":{"patches":2,"files":2,"insertions":8,"deletions":2}}]`,
		`"diffstat":{"patches":1,"files":1,"insertions":1,"deletions":1}`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /api/v1/messages/%s: no %q in\n%s", v1, want, r.body)
		}
	}
}
