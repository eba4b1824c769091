package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/chibrary/chibrary/internal/version"
)

// RunFunc is what a program or one of its commands runs: its arguments
// (without the program and command names) and its standard streams.
type RunFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// Command is a subcommand of a program ("resolver get").
type Command struct {
	Name string
	Run  RunFunc
}

// Commands is a program made of subcommands.
type Commands struct {
	Program, Text string // Text: the synopsis of every command, examples
	List          []Command
	// Default runs when the first argument names no command, and then
	// answers --help too.
	Default string
}

// Run runs the command that the first argument names. The command must come
// first, as with git and go: only its flag set knows which flags take a
// value, so "--token-file bump" names a file, never the command. Without
// Default, a command named later is a usage error that shows the command
// line put in order.
func (c Commands) Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if cmd := c.find(args[0]); cmd != nil {
			return c.run(ctx, cmd, args[1:], stdin, stdout, stderr)
		}
		if args[0] == "help" && len(args) == 2 {
			if cmd := c.find(args[1]); cmd != nil {
				return c.run(ctx, cmd, []string{"--help"}, stdin, stdout, stderr)
			}
			return Usagef("unknown command %q: want %s", args[1], c.names())
		}
	}
	if c.Default != "" {
		if len(args) == 1 && args[0] == "help" {
			args = []string{"--help"}
		}
		err := c.find(c.Default).Run(ctx, args, stdin, stdout, stderr)
		if errors.Is(err, ErrUsage) {
			if name, line := c.commandFirst(args); name != "" {
				err = fmt.Errorf("%w (if %q is meant as the command, it comes first: %s)", err, name, line)
			}
		}
		return err
	}
	if len(args) == 0 {
		return Usagef("missing command: %s", c.names())
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, strings.TrimSpace(c.Text))
		return flag.ErrHelp
	case "-version", "--version":
		fmt.Fprintln(stdout, version.Get(c.Program))
		return flag.ErrHelp
	}
	if strings.HasPrefix(args[0], "-") {
		if _, line := c.commandFirst(args); line != "" {
			return Usagef("the command comes first, before its flags: %s", line)
		}
		return Usagef("missing command (%s) before %s", c.names(), args[0])
	}
	return Usagef("unknown command %q: want %s", args[0], c.names())
}

func (c Commands) find(name string) *Command {
	for i := range c.List {
		if c.List[i].Name == name {
			return &c.List[i]
		}
	}
	return nil
}

// run marks cmd's usage errors as the command's (see Message).
func (c Commands) run(ctx context.Context, cmd *Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := cmd.Run(ctx, args, stdin, stdout, stderr)
	if errors.Is(err, ErrUsage) {
		var cu commandUsage
		if !errors.As(err, &cu) {
			err = commandUsage{c.Program + " " + cmd.Name, err}
		}
	}
	return err
}

func (c Commands) names() string {
	var names []string
	for _, cmd := range c.List {
		names = append(names, cmd.Name)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// commandFirst returns the first later argument naming a command, and the
// command line that puts it first.
func (c Commands) commandFirst(args []string) (name, line string) {
	for i, a := range args {
		if a == "--" {
			break
		}
		if i == 0 || c.find(a) == nil {
			continue
		}
		words := []string{c.Program, a}
		for j, b := range args {
			if j != i {
				words = append(words, shellQuote(b))
			}
		}
		return a, strings.Join(words, " ")
	}
	return "", ""
}

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandUsage is a usage error of one command, whose help is its own.
type commandUsage struct {
	command string // "resolver get"
	error
}

func (e commandUsage) Unwrap() error { return e.error }
