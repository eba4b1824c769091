package resolver

// A list's face: its description (the operator's, else what its mail's
// List-Id says) and where to join it (its activity: chart.go).

import (
	"bufio"
	"fmt"
	"os"
	"strings"
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
