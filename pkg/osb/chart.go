package osb

import (
	"fmt"
	"sort"

	"github.com/specsync/specsync/pkg/api"
)

// chart is a stacked bar chart of the Firestore operations (reads,
// writes, deletes) each bootstrap cost, oldest on the left, drawn as
// server-side SVG. Its numbers are written on it, so that they read
// without hovering (and on a phone, which cannot hover): each bar's total
// above it, and each part's count inside the part when the part is tall
// and wide enough for the digits. Every bar keeps a <title> with the
// whole sentence for screen readers.
type chart struct {
	Width, Height int
	Bars          []bar
	Max           int64
	Ticks         []tick
	From, To      string
	Empty         bool
}

type bar struct {
	X, W           float64
	Reads, Writes  rect
	Deletes        rect
	Title          string
	DryRun, Failed bool
	// Total is reads+writes+deletes, written at (CX, TotalY): above the
	// bar.
	Total      int64
	CX, TotalY float64
}

// rect is one part of a bar; Label, when set, is its count, written in
// its middle (LabelY).
type rect struct {
	Y, H   float64
	Label  string
	LabelY float64
}

// Room a count needs to be written inside a part (10 px text).
const (
	labelMinH     = 12
	labelCharW    = 6
	labelPaddingW = 2
)

type tick struct {
	Y     float64
	Label string
}

const (
	chartW, chartH = 640, 180
	chartLeft      = 48 // room for the y labels
	chartBottom    = 20 // room for the x labels
	chartTop       = 18 // room for the totals above the bars
)

func opsChart(ops []api.Operation) chart {
	c := chart{Width: chartW, Height: chartH}
	// Oldest first.
	sorted := append([]api.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreatedAt.Before(sorted[j].CreatedAt) })
	var keep []api.Operation
	for _, op := range sorted {
		if len(op.Results) > 0 {
			keep = append(keep, op)
		}
	}
	if len(keep) == 0 {
		c.Empty = true
		return c
	}
	for _, op := range keep {
		t := op.Firestore()
		if s := t.Reads + t.Writes + t.Deletes; s > c.Max {
			c.Max = s
		}
	}
	if c.Max == 0 {
		c.Max = 1
	}
	plotH := float64(chartH - chartBottom - chartTop)
	plotW := float64(chartW - chartLeft - 4)
	slot := plotW / float64(len(keep))
	w := slot * 0.7
	if w > 40 {
		w = 40
	}
	scale := plotH / float64(c.Max)
	base := float64(chartH - chartBottom)
	for i, op := range keep {
		t := op.Firestore()
		b := bar{X: chartLeft + float64(i)*slot + (slot-w)/2, W: w, DryRun: op.DryRun, Failed: op.State == api.Failed}
		y := base
		for _, part := range []struct {
			n int64
			r *rect
		}{{t.Reads, &b.Reads}, {t.Writes, &b.Writes}, {t.Deletes, &b.Deletes}} {
			h := float64(part.n) * scale
			y -= h
			*part.r = rect{Y: y, H: h}
			if label := fmt.Sprint(part.n); part.n > 0 && h >= labelMinH && w >= float64(len(label))*labelCharW+labelPaddingW {
				part.r.Label, part.r.LabelY = label, y+h/2
			}
		}
		b.Total, b.CX, b.TotalY = t.Reads+t.Writes+t.Deletes, b.X+w/2, y-3
		kind := "bootstrap"
		if op.DryRun {
			kind = "dry run"
		}
		b.Title = fmt.Sprintf("%s %s (%s): %d reads, %d writes, %d deletes", kind, op.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"), op.State, t.Reads, t.Writes, t.Deletes)
		c.Bars = append(c.Bars, b)
	}
	for _, f := range []float64{0, 0.5, 1} {
		v := int64(float64(c.Max) * f)
		c.Ticks = append(c.Ticks, tick{Y: base - float64(v)*scale, Label: fmt.Sprint(v)})
	}
	c.From = keep[0].CreatedAt.UTC().Format("01-02 15:04Z")
	c.To = keep[len(keep)-1].CreatedAt.UTC().Format("01-02 15:04Z")
	return c
}
