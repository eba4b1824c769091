package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/chibrary/chibrary/internal/version"
)

// A FlagSet holds a command's flags and its help. Flags may come anywhere
// among the arguments, until "--". Each flag may name an environment
// variable, which the command line overrides. Every FlagSet has --help and
// --version.
type FlagSet struct {
	fs      *flag.FlagSet
	program string // for --version: the program's name
	text    string // the help's text: synopsis, description, examples
	env     map[string]string
	set     map[string]bool
	version bool
}

// NewFlagSet returns the flags of the command name ("resolver get"), whose
// --help prints text, then the flags.
func NewFlagSet(name, text string) *FlagSet {
	f := &FlagSet{
		fs:      flag.NewFlagSet(name, flag.ContinueOnError),
		program: strings.Fields(name)[0],
		text:    text,
		env:     map[string]string{},
		set:     map[string]bool{},
	}
	f.fs.SetOutput(io.Discard) // errors are reported once, by ExitStatus
	f.fs.Usage = func() {}
	f.fs.BoolVar(&f.version, "version", false, "print the version and exit")
	return f
}

func (f *FlagSet) fallback(name, env string) {
	if env != "" {
		f.env[name] = env
	}
}

// String defines a string flag with the environment variable env ("" for
// none) as fallback.
func (f *FlagSet) String(p *string, name, value, env, usage string) {
	f.fs.StringVar(p, name, value, usage)
	f.fallback(name, env)
}

// Bool defines a boolean flag (see String).
func (f *FlagSet) Bool(p *bool, name string, value bool, env, usage string) {
	f.fs.BoolVar(p, name, value, usage)
	f.fallback(name, env)
}

// Int defines an integer flag (see String).
func (f *FlagSet) Int(p *int, name string, value int, env, usage string) {
	f.fs.IntVar(p, name, value, usage)
	f.fallback(name, env)
}

// Duration defines a duration flag (see String).
func (f *FlagSet) Duration(p *time.Duration, name string, value time.Duration, env, usage string) {
	f.fs.DurationVar(p, name, value, usage)
	f.fallback(name, env)
}

// Var defines a flag of any flag.Value (see String).
func (f *FlagSet) Var(v flag.Value, name, env, usage string) {
	f.fs.Var(v, name, usage)
	f.fallback(name, env)
}

// IsSet reports whether the flag was given, or its environment variable.
func (f *FlagSet) IsSet(name string) bool { return f.set[name] }

// Parse returns the arguments that are not flags. Errors are usage errors;
// after --help or --version it returns flag.ErrHelp.
func (f *FlagSet) Parse(args []string, stdout io.Writer) ([]string, error) {
	flags, rest := f.split(args)
	if err := f.fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.PrintHelp(stdout)
			return nil, err
		}
		// Package flag names flags with one dash; the help uses two.
		msg := strings.NewReplacer(": -", ": --", "flag -", "flag --").Replace(err.Error())
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			msg = "unknown flag --" + name
			if near := f.nearest(name); near != "" {
				msg += " (did you mean --" + near + "?)"
			}
		}
		return nil, fmt.Errorf("%w: %s", ErrUsage, msg)
	}
	if f.version {
		fmt.Fprintln(stdout, version.Get(f.program))
		return nil, flag.ErrHelp
	}
	f.fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	for _, name := range sortedKeys(f.env) {
		variable := f.env[name]
		if f.set[name] {
			continue
		}
		v, ok := os.LookupEnv(variable)
		if !ok || v == "" {
			continue
		}
		if f.fs.Lookup(name) == nil {
			panic("cli: env fallback for unknown flag " + name) // programming error
		}
		if err := f.fs.Set(name, v); err != nil {
			return nil, fmt.Errorf("%w: $%s: %v", ErrUsage, variable, err)
		}
		f.set[name] = true
	}
	return rest, nil
}

// split separates the flags (with their values) from the other arguments;
// an unknown flag is passed on for Parse to refuse.
func (f *FlagSet) split(args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(rest, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		fl := f.fs.Lookup(name)
		if fl == nil || isBool(fl) || i+1 == len(args) {
			continue
		}
		i++
		flags = append(flags, args[i])
	}
	return flags, rest
}

// nearest returns the defined flag that name is a typo of, or "".
func (f *FlagSet) nearest(name string) string {
	best, bestD := "", 3
	f.fs.VisitAll(func(fl *flag.Flag) {
		if d := distance(name, fl.Name); d < bestD || d == bestD && best != "" && fl.Name < best {
			best, bestD = fl.Name, d
		}
	})
	if bestD > 2 || bestD >= len(name) {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

func isBool(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// NoArgs is a usage error for arguments a command does not take.
func NoArgs(args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q", args[0])
	}
	return nil
}

// PrintHelp writes the text, then every flag with its default and variable.
func (f *FlagSet) PrintHelp(w io.Writer) {
	fmt.Fprintln(w, strings.TrimSpace(f.text))
	fmt.Fprintln(w, "\nFlags (before or after the arguments; -- ends them):")
	f.fs.VisitAll(func(fl *flag.Flag) {
		name, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(w, "  --%s", fl.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZero(fl.DefValue) {
			fmt.Fprintf(w, " (default %q)", fl.DefValue)
		}
		if v, ok := f.env[fl.Name]; ok {
			fmt.Fprintf(w, " [$%s]", v)
		}
		fmt.Fprintln(w)
	})
}

// isZero reports a default not worth showing.
func isZero(def string) bool {
	switch def {
	case "", "false", "0", "0s":
		return true
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
