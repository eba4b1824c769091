package resolver

// A list's face: its description (the operator's, else what its mail's
// List-Id says) and where to join it (its activity: chart.go).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/store"
)

// describe gives l the operator's description, if there is one
// (Options.ListDescriptions).
func (s *Server) describe(l *catalog.List) {
	if d := s.opts.ListDescriptions[l.Name]; d != "" {
		l.Description = d
	}
}

// recentDays is the span of a list's recent activity, today (UTC)
// included: HyperKitty's "participants" and "discussions" of the last 30
// days.
const recentDays = 30

// recent is a list's activity in its last recentDays days.
type recent struct {
	catalog.Activity
	Since string `json:"since"` // the first day, yyyy-mm-dd
}

// recentSpan is the last recentDays days at now, whole UTC days: the
// counts change once a day, not with every request (a cached page says
// them until the day ends, see cachedIn).
func recentSpan(now time.Time) (since, until time.Time) {
	y, m, d := now.UTC().Date()
	until = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	return until.AddDate(0, 0, -recentDays), until
}

// recentOf returns list's activity of the last recentDays days, gen
// being the catalog's generation (catalog.Generation, read by the caller
// once for all the lists of a page). It is counted once a list, day and
// catalog generation: the front page, which is not cached (it says the
// store's count), shows every list's, and counting them all for every
// reader cost up to 2,000 rows a list.
func (s *Server) recentOf(ctx context.Context, c *catalog.Catalog, gen, list string) (*recent, error) {
	since, until := recentSpan(s.opts.Now())
	key := gen + " " + since.Format(time.DateOnly)
	if r := s.recents.get(list, key); r != nil {
		return r, nil
	}
	a, err := c.Activity(ctx, list, since, until)
	if err != nil {
		return nil, err
	}
	r := &recent{Activity: a, Since: since.Format(time.DateOnly)}
	s.recents.put(list, key, r)
	return r, nil
}

// recentCache keeps the last recentOf of each list, with the catalog
// generation and day it was counted for. One entry a list: its size is
// the catalog's number of lists.
type recentCache struct {
	mu sync.Mutex
	m  map[string]recentEntry
}

type recentEntry struct {
	key string
	r   *recent
}

func (rc *recentCache) get(list, key string) *recent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if e, ok := rc.m[list]; ok && e.key == key {
		return e.r
	}
	return nil
}

func (rc *recentCache) put(list, key string, r *recent) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.m == nil {
		rc.m = map[string]recentEntry{}
	}
	rc.m[list] = recentEntry{key, r}
}

// ReadListDescriptions reads an operator's file of list descriptions: a
// line per list, its name, blanks, then what it is about:
//
//	# lists.txt
//	linux-mips   The Linux port to MIPS processors: patches and discussion
//	cake         Bufferbloat's CAKE queue discipline
//
// Blank lines and lines that start with # are skipped. A description is
// at most catalog.MaxListDescription bytes of UTF-8.
func ReadListDescriptions(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the list descriptions: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, desc, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '\t'); i >= 0 {
			name, desc = name[:i], name[i+1:]+" "+desc
		}
		desc = strings.Join(strings.Fields(desc), " ")
		switch {
		case store.ListName(name) != name:
			return nil, fmt.Errorf("%s:%d: %q is not a list's name (letters, digits, '.', '_' and '-', lower-case)", path, n, name)
		case desc == "":
			return nil, fmt.Errorf("%s:%d: list %s has no description after its name", path, n, name)
		case !utf8.ValidString(desc) || len(desc) > catalog.MaxListDescription:
			return nil, fmt.Errorf("%s:%d: the description of %s is not UTF-8 text of at most %d bytes", path, n, name, catalog.MaxListDescription)
		case out[name] != "":
			return nil, fmt.Errorf("%s:%d: list %s is described twice", path, n, name)
		}
		out[name] = desc
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read the list descriptions: %s: %w", path, err)
	}
	return out, nil
}
