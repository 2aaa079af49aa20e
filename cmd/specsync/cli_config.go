package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/config"
)

const configUsage = `usage: specsync config check [--output json] FILE

Validates a registries file offline (no registry is contacted) and prints
every problem with its line: YAML syntax, unknown or mistyped fields,
names, duplicates, unset ${VAR}s, filters, auth blocks. Exit 1 if any.`

func cmdConfig(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, configUsage)
			return nil
		}
		return usageError{configUsage}
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	output := fs.String("output", "table", "table or json")
	fs.StringVar(output, "o", "table", "shorthand for --output")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{configUsage}
	}
	if *output != "table" && *output != "json" {
		return usageError{fmt.Sprintf("--output %q: want table or json", *output)}
	}
	file := pos[0]
	res := config.CheckFile(file)
	if *output == "json" {
		if err := writeJSON(stdout, res.Report(file)); err != nil {
			return err
		}
	} else {
		for _, p := range res.Problems {
			if p.Line > 0 {
				fmt.Fprintf(stdout, "%s:%d: %s\n", file, p.Line, p.Message)
			} else {
				fmt.Fprintf(stdout, "%s: %s\n", file, p.Message)
			}
		}
		if res.OK() {
			fmt.Fprintf(stdout, "%s: ok, %s (%v)\n", file, api.Count(len(res.Registries), "registry", "registries"), res.Registries)
		}
	}
	if !res.OK() {
		return withExit(ExitFailed, "%s: %s", file, api.Count(len(res.Problems), "problem", "problems"))
	}
	return nil
}
