package cli

import (
	"context"
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
	// Program is the program's name, Text its help (the synopsis of
	// every command, examples).
	Program, Text string
	List          []Command
	// Default, if set, is the command run when the arguments name none
	// (e.g. coordinator's serve); it then answers --help too.
	Default string
}

// Run runs the command the arguments name: the first argument, or, since
// flags may come first, the first argument that is a command's name after
// flags. --help (or "help") without a command prints Text, --version the
// version.
func (c Commands) Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	find := func(name string) *Command {
		for i := range c.List {
			if c.List[i].Name == name {
				return &c.List[i]
			}
		}
		return nil
	}
	for i, a := range args {
		if cmd := find(a); cmd != nil {
			rest := append(append([]string{}, args[:i]...), args[i+1:]...)
			return cmd.Run(ctx, rest, stdin, stdout, stderr)
		}
		if i == 0 && !strings.HasPrefix(a, "-") || a == "--" {
			break // the first argument is no command, and not a flag
		}
	}
	if c.Default != "" {
		return find(c.Default).Run(ctx, args, stdin, stdout, stderr)
	}
	var names []string
	for _, cmd := range c.List {
		names = append(names, cmd.Name)
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return Usagef("missing command: %s", want)
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
		return Usagef("missing command (%s) before or after %s", want, args[0])
	}
	return Usagef("unknown command %q: want %s", args[0], want)
}
