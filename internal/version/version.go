// Package version says which build of the programs is running, for
// --version and /api/v1/version. The toolchain records the VCS revision,
// except where it cannot (a git worktree, whose .git is a file): there
// `make build` stamps it with -ldflags -X.
package version

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Stamped by the linker where the toolchain records no VCS information.
var (
	revision     string
	revisionTime string // RFC 3339
	modified     string // "true" when the tree had uncommitted changes
)

// Info is what is known of the running build.
type Info struct {
	Program string `json:"program"`
	Version string `json:"version"` // "devel" from a source checkout
	// Revision is "" when unknown; Modified: the tree had uncommitted changes.
	Revision string    `json:"revision,omitempty"`
	Time     time.Time `json:"time,omitzero"`
	Modified bool      `json:"modified,omitempty"`
	Go       string    `json:"go"`
}

// Get returns the Info of the running program.
func Get(program string) Info {
	info := Info{Program: program, Version: "devel", Go: runtime.Version(), Revision: revision, Modified: modified == "true"}
	info.Time, _ = time.Parse(time.RFC3339, revisionTime)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the --version line, e.g.
// "importer devel (revision 0123abcd4567, 2025-01-02T03:04:05Z, modified; go1.26.0)".
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (", i.Program, i.Version)
	if i.Revision == "" {
		b.WriteString("unknown revision")
	} else {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString("revision " + rev)
		if !i.Time.IsZero() {
			b.WriteString(", " + i.Time.UTC().Format(time.RFC3339))
		}
		if i.Modified {
			b.WriteString(", modified")
		}
	}
	fmt.Fprintf(&b, "; %s)", i.Go)
	return b.String()
}

// Handler serves the Info of program as JSON (GET /api/v1/version).
func Handler(program string) http.Handler {
	body, err := json.Marshal(Get(program))
	if err != nil {
		panic(err) // a struct of strings, a time and a bool
	}
	body = append(body, '\n')
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(body)
	})
}
