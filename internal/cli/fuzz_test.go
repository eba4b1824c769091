package cli

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: parsing any command line never panics; the arguments it
// returns are, in order, those of the command line that are not flags nor
// flag values (so a path is never lost, nor taken for a flag's value
// unless it follows a flag that takes one), and everything after "--".
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"a b --name n --loud",
		"--name=x -- --loud -",
		"- --count 3 a",
		"--count",
		"--nope a",
		"---name x",
		"--name --loud a",
		"-loud=false a -- -- b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		fs, _ := newFlags()
		rest, err := fs.Parse(args, io.Discard)
		if err != nil {
			return
		}
		// Rebuild the expected arguments: skip flags and the values of
		// flags that take one, stop skipping at "--".
		var want []string
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				want = append(want, args[i+1:]...)
				break
			}
			if len(a) < 2 || a[0] != '-' {
				want = append(want, a)
				continue
			}
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && (name == "name" || name == "count") {
				i++ // its value
			}
		}
		if !slices.Equal(rest, want) {
			t.Fatalf("Parse(%q) arguments = %q, want %q", args, rest, want)
		}
	})
}
