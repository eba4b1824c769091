// Command testsummary reads `go test -json` on standard input and writes
// what `go test` would have written, then one line per reason tests were
// skipped, so that tests that did not run are not invisible, and last the
// first lines of what each failed test said (t.Error, t.Log), so that the
// end of a long log, which is what a CI page keeps, names the failure. A
// failed package also shows the output of its tests that never ended (a
// timeout's panic, os.Exit), which go test -json gives no fail event. It
// exits 1 when anything failed or it read no result at all.
//
//	go test -json ./... | go run ./internal/tools/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// failure is a failed test and the first lines of its messages.
type failure struct {
	pkg, test string
	said      []string
}

// The first line of a t.Log or t.Error message; the lines it continues
// on are indented further, without a file name.
var message = regexp.MustCompile(`^ +[\w./-]+\.go:\d+: `)

const (
	maxSaid     = 20  // messages kept per failed test
	maxSaidLine = 240 // bytes kept of each
)

// skipped is a reason tests were skipped, in one package.
type skipped struct {
	pkg, reason string
	tests       []string
}

type state struct {
	w      io.Writer
	output map[string][]string // package + "\x00" + test -> lines
	// running are the tests of each package that have output and no
	// result yet, in the order they started.
	running map[string][]string
	skips   []*skipped
	fails   []failure
	failed  bool
	results int
}

// summarize copies r's results to w as described in the package doc, and
// reports whether anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	s := &state{w: w, output: map[string][]string{}, running: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // not an event: pass it on
			continue
		}
		s.handle(e)
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("cannot read go test's output: %w", err)
	}
	s.report()
	if s.results == 0 {
		return true, fmt.Errorf("no test result read (did go test run?)")
	}
	return s.failed, nil
}

func (s *state) handle(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
	case "build-fail":
		s.failed = true
	case "output":
		if _, ok := s.output[key]; !ok && e.Test != "" {
			s.running[e.Package] = append(s.running[e.Package], e.Test)
		}
		s.output[key] = append(s.output[key], e.Output)
	case "pass":
		s.results++
		if e.Test == "" { // the package: its ok line
			s.printPackage(key, false)
		}
		delete(s.output, key)
	case "skip":
		s.results++
		if e.Test == "" { // a package without tests: its "?" line
			s.printPackage(key, false)
		} else {
			s.skip(e.Package, e.Test, s.output[key])
		}
		delete(s.output, key)
	case "fail":
		s.results++
		s.failed = true
		if e.Test == "" {
			s.printUnfinished(e.Package)
			s.printPackage(key, true)
		} else {
			fmt.Fprint(s.w, strings.Join(s.output[key], ""))
			s.fail(e.Package, e.Test, s.output[key])
		}
		delete(s.output, key)
	}
	if e.Test == "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail") {
		delete(s.running, e.Package)
	}
}

// printUnfinished prints the output of the tests of a failed package that
// have no result: the binary stopped inside them, and that output is all
// there is to say why.
func (s *state) printUnfinished(pkg string) {
	for _, test := range s.running[pkg] {
		key := pkg + "\x00" + test
		lines, ok := s.output[key]
		if !ok {
			continue // it ended
		}
		fmt.Fprint(s.w, strings.Join(lines, ""))
		if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			fmt.Fprintln(s.w)
		}
		fmt.Fprintf(s.w, "--- FAIL: %s (did not end: the test binary stopped while it ran)\n", test)
		delete(s.output, key)
	}
}

// printPackage prints the package-level lines: all of them when it
// failed, else without the bare "PASS" that go test leaves out.
func (s *state) printPackage(key string, failed bool) {
	for _, l := range s.output[key] {
		if !failed && (l == "PASS\n" || l == "testing: warning: no tests to run\n") {
			continue
		}
		fmt.Fprint(s.w, l)
	}
}

// skip records a skipped test: its reason is the last line it logged,
// which is t.Skip's message.
func (s *state) skip(pkg, test string, lines []string) {
	reason := "(no reason given)"
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			reason = l
			break
		}
	}
	for _, sk := range s.skips {
		if sk.pkg == pkg && sk.reason == reason {
			sk.tests = append(sk.tests, test)
			return
		}
	}
	s.skips = append(s.skips, &skipped{pkg: pkg, reason: reason, tests: []string{test}})
}

// fail records a failed test with the first lines of its messages.
func (s *state) fail(pkg, test string, lines []string) {
	f := failure{pkg: pkg, test: test}
	for _, l := range lines {
		if !message.MatchString(l) {
			continue
		}
		if len(f.said) == maxSaid {
			f.said = append(f.said, "...")
			break
		}
		l = strings.TrimSpace(l)
		if len(l) > maxSaidLine {
			l = l[:maxSaidLine] + "..."
		}
		f.said = append(f.said, l)
	}
	s.fails = append(s.fails, f)
}

// report prints the skipped tests, one line per package and reason, then
// the failed tests with what they said.
func (s *state) report() {
	s.reportSkips()
	if len(s.fails) == 0 {
		return
	}
	fmt.Fprintf(s.w, "\nfailed (the first lines each test logged; its whole output is above):\n")
	for _, f := range s.fails {
		fmt.Fprintf(s.w, "  %s: %s\n", f.pkg, f.test)
		for _, l := range f.said {
			fmt.Fprintf(s.w, "      %s\n", l)
		}
	}
}

func (s *state) reportSkips() {
	n := 0
	for _, sk := range s.skips {
		n += len(sk.tests)
	}
	if n == 0 {
		fmt.Fprintln(s.w, "\nno test was skipped")
		return
	}
	tests := "tests"
	if n == 1 {
		tests = "test"
	}
	fmt.Fprintf(s.w, "\n%d %s skipped (these did not run):\n", n, tests)
	slices.SortStableFunc(s.skips, func(a, b *skipped) int { return strings.Compare(a.pkg, b.pkg) })
	for _, sk := range s.skips {
		names := sk.tests
		more := ""
		if len(names) > 3 {
			more = fmt.Sprintf(" and %d more", len(names)-3)
			names = names[:3]
		}
		fmt.Fprintf(s.w, "  %s: %s%s: %s\n", sk.pkg, strings.Join(names, ", "), more, sk.reason)
	}
}
