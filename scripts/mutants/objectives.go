package main

// The mutants of the operations objectives: the feed under
// TTL, the run's kind the alerts read, the event time the freshness
// objective measures from, the status page's event run. Keyed, in a file
// of their own, so the list they join can change shape around them.
func init() {
	mutants = append(mutants,
		mutant{name: "feed: a page runs past a revision TTL deleted",
			promise: "a watcher never skips a change (the feed's 410 when history is gone)",
			file:    "pkg/osb/changes.go",
			old:     "\t\tif cs[i].Revision != q.since+1+int64(i) {",
			new:     "\t\tif false {",
			pkgs:    []string{"./pkg/osb"}},
		mutant{name: "alerts: an event run logged as a full run",
			promise: "a registry whose full runs fail alerts whatever its event runs do (the run's kind on its summary line)",
			file:    "pkg/api/runkind.go",
			old:     "\tcase targeted:\n\t\treturn KindEvent",
			new:     "\tcase targeted:\n\t\treturn KindFull",
			pkgs:    []string{"./pkg/worker"}},
		mutant{name: "freshness: an event run's commit request forgets the event's time",
			promise: "the freshness objective measures pushes from the event to the catalog",
			file:    "pkg/reconcile/run.go",
			old:     "Run: r.rec.ID, EventAt: r.eventAt}",
			new:     "Run: r.rec.ID}",
			pkgs:    []string{"./pkg/worker"}},
		mutant{name: "status: the last event run not shown",
			promise: "the status page shows each registry's last full run and last event run side by side",
			file:    "pkg/osb/status.go",
			old:     "if e := st.LastTargeted; e != nil && e.Result != \"\" {",
			new:     "if e := st.LastTargeted; false && e != nil {",
			pkgs:    []string{"./pkg/osb"}},
	)
}
