package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func cmdCatalog(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	var common commonFlags
	common.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	st, err := store.Open(ctx, common.project, common.database)
	if err != nil {
		return err
	}
	defer st.Close()
	return printCatalog(ctx, st, stdout)
}

// printCatalog prints what the catalog serves: active specs and plans.
func printCatalog(ctx context.Context, st *store.Store, w io.Writer) error {
	recs, err := st.ActiveSpecs(ctx)
	if err != nil {
		return err
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "catalog revision %d: %s\n", rev, api.Count(len(recs), "service", "services"))
	for _, r := range recs {
		s, err := r.Spec()
		if err != nil {
			return err
		}
		plans := make([]string, len(s.Plans))
		for i, p := range s.Plans {
			plans[i] = p.Name
		}
		platforms := "-"
		if len(r.Platforms) > 0 {
			platforms = strings.Join(r.Platforms, ",")
		}
		fmt.Fprintf(w, "  %-22s %s  registry=%s plans=%s platforms=%s\n", s.Name, s.ID, r.Registry, strings.Join(plans, ","), platforms)
	}
	return nil
}
