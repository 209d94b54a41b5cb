package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// command is one of gateway's subcommands: args are its own, after the
// word that names it.
type command func(ctx context.Context, args []string, out, errOut io.Writer, environ []string) error

// commands are the subcommands, by the word that names them; help is
// helpCommand, which needs the gateway's own flag set.
var commands = map[string]command{
	"doctor":      runDoctor, // doctor.go
	"healthcheck": runHealthcheck,
	"status":      runStatus, // health.go
	"usage":       runUsage,  // usage.go
	"version": func(_ context.Context, args []string, out, errOut io.Writer, _ []string) error {
		return runVersion(args, out, errOut) // version.go
	},
}

// commandNames lists the commands for messages.
const commandNames = "doctor, healthcheck, status, usage, help and version"

// runCommand runs the command named by the first argument fs (gateway's
// own flag set) left, or version for --version. The global flags given
// before the command, --config and --set, are handed to it in front of its
// own arguments, so `gateway --config x.yaml doctor` is `gateway doctor
// --config x.yaml`; given on both sides, --config after the command wins
// and the --set flags add up.
func runCommand(ctx context.Context, fs *flag.FlagSet, out, errOut io.Writer, environ []string) error {
	name, args := "version", fs.Args()
	if fs.NArg() > 0 {
		name, args = fs.Arg(0), fs.Args()[1:]
	}
	if fs.Lookup("version").Value.String() == "true" && name != "version" {
		return fmt.Errorf("--version takes no command: run gateway %s, or gateway --version alone", name)
	}
	if name == "help" {
		return helpCommand(ctx, fs, args, out, environ)
	}
	cmd, ok := commands[name]
	if !ok {
		return unknownCommand(name)
	}
	var global []string
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "config":
			global = append(global, "--config="+f.Value.String())
		case "set":
			for _, s := range *f.Value.(*stringList) {
				global = append(global, "--set="+s)
			}
		case "session":
			err = fmt.Errorf("--session chooses the conversation a piped gateway continues; it does not apply to gateway %s", name)
		case "cpuprofile", "memprofile":
			err = fmt.Errorf("--%s profiles the running gateway; it does not apply to gateway %s", f.Name, name)
		}
	})
	if err != nil {
		return err
	}
	return cmd(ctx, append(global, args...), out, errOut, environ)
}

// helpCommand is `gateway help [command]`: the usage, or the command's,
// on standard output.
func helpCommand(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer, environ []string) error {
	switch {
	case len(args) > 1:
		return fmt.Errorf("help: want one command, e.g. gateway help doctor, not %q", strings.Join(args, " "))
	case len(args) == 0 || args[0] == "help":
		fs.SetOutput(out)
		fs.Usage()
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return unknownCommand(args[0])
	}
	if err := cmd(ctx, []string{"-h"}, out, out, environ); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil
}

// commandFlags is the flag set of a command that reads the
// configuration, with its --config and --set as the gateway's own; its
// usage prints the usage line, what the command does, and the flags.
func commandFlags(name, usage, what string, errOut io.Writer) (fs *flag.FlagSet, configFile *string, sets *stringList) {
	fs = flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: "+usage)
		fmt.Fprintln(errOut, what)
		fs.PrintDefaults()
	}
	configFile = fs.String("config", "config.yaml", "configuration file (YAML), as for the gateway")
	sets = &stringList{}
	fs.Var(sets, "set", "override a config key, as for the gateway (repeatable)")
	return fs, configFile, sets
}

// unknownCommand refuses a word that names no command.
func unknownCommand(word string) error {
	hint := ""
	if ext := filepath.Ext(word); ext == ".yaml" || ext == ".yml" {
		hint = fmt.Sprintf("; to read the configuration from %s: gateway --config %s", word, word)
	}
	return fmt.Errorf("unknown command %q (the commands are %s: see gateway help%s)", word, commandNames, hint)
}

// flagError is a parse error of gateway's own flags (the flag package has
// printed it, with the usage). A flag before a command that is not one of
// gateway's own is most likely the command's: say it goes after it.
func flagError(err error, args []string) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return err
	}
	if i := slices.IndexFunc(args, func(a string) bool { _, ok := commands[a]; return ok }); i >= 0 {
		return fmt.Errorf("%w: a command's own flags go after the command (gateway %s --%s …); --config and --set may go on either side", err, args[i], strings.TrimLeft(name, "-"))
	}
	return err
}
