package top

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Header holds the facts of the first line.
type Header struct {
	Host     trace.Host
	Shown    int  // groups in the table
	Total    int  // groups in the tree
	All      bool // the table shows every group, not only those with a limit
	Skipped  int  // groups that could not be read
	Interval time.Duration
	At       time.Time // time of the last reading
	Err      string    // why the last reading failed, if it did
}

// View is what the screen shows of the rows.
type View struct {
	Width, Height int // of the terminal
	Offset        int // index of the first row shown
	Sort          SortKey
	Reverse       bool
}

// Style is how a line is drawn where the terminal allows.
type Style int

const (
	Plain Style = iota
	Title       // the column titles: reverse video
	Hot         // a group throttled in the last interval: bold
)

// Line is one line of a frame.
type Line struct {
	Text  string
	Style Style
}

// column is one figure of a row.
type column struct {
	title string
	width int
	cell  func(r *Row) string
}

// gap separates columns.
const gap = "  "

// minName is the narrowest the name column gets before figures are
// dropped to make room.
const minName = 16

var columns = []column{
	{"LIMIT", 6, func(r *Row) string {
		if r.Limits.CPUs == nil {
			return "none"
		}
		return cpus(*r.Limits.CPUs)
	}},
	{"USAGE", 6, func(r *Row) string {
		if r.UsageUnknown != nil {
			return "n/a"
		}
		return ready(r, func() string { return cpus(*r.UsageCPUs) })
	}},
	{"THROTTLED", 10, func(r *Row) string {
		return ready(r, func() string { return fmt.Sprintf("%.1f%%", *r.ThrottledRatio*100) })
	}},
	{"THR s/s", 8, func(r *Row) string {
		return ready(r, func() string { return fmt.Sprintf("%.2f", *r.ThrottledPerSecond) })
	}},
	{"WORST STALL", 12, func(r *Row) string {
		return ready(r, func() string {
			if r.WorstStallNs == nil {
				return "-"
			}
			return report.Dur(*r.WorstStallNs)
		})
	}},
	{"BURSTS", 7, func(r *Row) string { return ready(r, func() string { return fmt.Sprint(r.Interval.NrBursts) }) }},
	{"BURST TIME", 11, func(r *Row) string { return ready(r, func() string { return report.Dur(r.Interval.BurstNs) }) }},
}

// dropOrder is the order in which columns (indexes into columns) give
// way on a narrow terminal: the burst figures first (together), then
// throttled time per second, then the worst stall; the limit, usage and
// throttled share stay.
var dropOrder = [][]int{{5, 6}, {3}, {4}}

// sortColumn is the column each key sorts by (-1: the name).
var sortColumn = map[SortKey]int{SortName: -1, SortLimit: 0, SortUsage: 1, SortThrottled: 2, SortStall: 4}

func ready(r *Row, f func() string) string {
	if !r.Ready() {
		return "-"
	}
	return f()
}

func cpus(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// layout is the columns that fit a width, and the width of the name.
type layout struct {
	name int
	cols []int // indexes into columns
}

// fit lays the columns out in width; width <= 0 means no limit (the
// name column is as wide as the longest name).
func fit(width int, rows []Row) layout {
	keep := make([]bool, len(columns))
	for i := range keep {
		keep[i] = true
	}
	fixed := func() int {
		n := 0
		for i, c := range columns {
			if keep[i] {
				n += len(gap) + c.width
			}
		}
		return n
	}
	var l layout
	if width <= 0 {
		l.name = len("NAME") + 2 // room for the sort mark
		for i := range rows {
			l.name = max(l.name, utf8.RuneCountInString(rows[i].Name))
		}
	} else {
		for _, d := range dropOrder {
			if width-fixed() >= minName {
				break
			}
			for _, i := range d {
				keep[i] = false
			}
		}
		l.name = max(width-fixed(), 1)
	}
	for i := range columns {
		if keep[i] {
			l.cols = append(l.cols, i)
		}
	}
	return l
}

// titleLine is the column titles, the sorted column marked with ▼
// (largest first, or Z to A) or ▲.
func (l layout) titleLine(key SortKey, reverse bool) string {
	mark := "▼"
	if (key == SortName) != reverse {
		mark = "▲"
	}
	sc, ok := sortColumn[key]
	if !ok {
		sc = -2
	}
	var b strings.Builder
	name := "NAME"
	if sc == -1 {
		name += " " + mark
	}
	b.WriteString(padRight(truncMiddle(name, l.name), l.name))
	for _, i := range l.cols {
		t := columns[i].title
		if i == sc {
			t = mark + t
		}
		b.WriteString(gap)
		b.WriteString(padLeft(t, columns[i].width))
	}
	return b.String()
}

func (l layout) rowLine(r *Row) string {
	var b strings.Builder
	b.WriteString(padRight(truncMiddle(r.Name, l.name), l.name))
	for _, i := range l.cols {
		b.WriteString(gap)
		b.WriteString(padLeft(columns[i].cell(r), columns[i].width))
	}
	return b.String()
}

// headerLine is the first line: what top is, the host, the groups, and
// the interval and time at the right edge.
func headerLine(h Header, width int) string {
	left := "cfsprobe top"
	if hl := hostLine(h.Host); hl != "" {
		left += "  " + hl
	}
	if h.All {
		left += fmt.Sprintf("  %d %s", h.Total, plural(h.Total, "group"))
	} else {
		left += fmt.Sprintf("  %d/%d %s with a CPU limit", h.Shown, h.Total, plural(h.Total, "group"))
	}
	if h.Skipped > 0 {
		left += fmt.Sprintf("  %d unreadable", h.Skipped)
	}
	if h.Err != "" {
		left += "  read failed: " + h.Err
	}
	right := "every " + h.Interval.String()
	if !h.At.IsZero() {
		right += "  " + h.At.Format("15:04:05")
	}
	if width <= 0 {
		return left + "  " + right
	}
	n := utf8.RuneCountInString(right)
	if n+2 >= width {
		return truncEnd(left, width)
	}
	left = truncEnd(left, width-n-2)
	return left + strings.Repeat(" ", width-n-utf8.RuneCountInString(left)) + right
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// Frame lays out a screen of view.Height lines: the header, the column
// titles, as many rows as fit from view.Offset on, and a footer that says
// how many more there are and the keys. It returns the offset actually
// used (kept within the rows).
func Frame(h Header, rows []Row, v View) ([]Line, int) {
	width, height := max(v.Width, 1), max(v.Height, 1)
	l := fit(width, rows)
	page := max(height-3, 0)
	off := clampOffset(v.Offset, len(rows), page)
	lines := make([]Line, 0, height)
	lines = append(lines, Line{Text: headerLine(h, width)})
	if height >= 2 {
		lines = append(lines, Line{Text: truncEnd(l.titleLine(v.Sort, v.Reverse), width), Style: Title})
	}
	end := min(off+page, len(rows))
	for i := off; i < end; i++ {
		r := &rows[i]
		st := Plain
		if r.Ready() && r.Interval.NrThrottled > 0 {
			st = Hot
		}
		// Cut only when even the narrowest layout does not fit.
		lines = append(lines, Line{Text: truncEnd(l.rowLine(r), width), Style: st})
	}
	if height >= 3 {
		for len(lines) < height-1 {
			lines = append(lines, Line{})
		}
		lines = append(lines, Line{Text: truncEnd(footer(h, len(rows), off, end, v), width-1)})
	}
	return lines[:min(len(lines), height)], off
}

// footer says what is below (and above) the screen, the order and the keys.
func footer(h Header, n, from, to int, v View) string {
	order := v.Sort.Describe(v.Reverse)
	keys := "q quit · t u s n l sort (again: reverse) · ↑↓ PgUp PgDn scroll"
	var s string
	switch {
	case n == 0 && !h.All:
		s = "no group has a CPU limit (--all shows every group)"
	case n == 0:
		s = "no groups"
	case from == 0 && to == n:
		s = fmt.Sprintf("%d rows (sorted by %s)", n, order)
	case to < n:
		s = fmt.Sprintf("%d more (sorted by %s), rows %d-%d of %d", n-to, order, from+1, to, n)
	default:
		s = fmt.Sprintf("rows %d-%d of %d (sorted by %s)", from+1, to, n, order)
	}
	return s + " · " + keys
}

func clampOffset(off, n, page int) int {
	return max(min(off, n-page), 0)
}

// WriteTable writes the header, the titles and every row, without
// escapes, for --once: width <= 0 means no limit (names in full). A
// last line says why the usage of some rows is n/a.
func WriteTable(w io.Writer, h Header, rows []Row, width int, key SortKey, reverse bool) error {
	l := fit(width, rows)
	var b bytes.Buffer
	b.WriteString(headerLine(h, width))
	b.WriteByte('\n')
	b.WriteString(strings.TrimRight(l.titleLine(key, reverse), " "))
	b.WriteByte('\n')
	for i := range rows {
		b.WriteString(strings.TrimRight(l.rowLine(&rows[i]), " "))
		b.WriteByte('\n')
	}
	if len(rows) == 0 && !h.All {
		b.WriteString("no group has a CPU limit (--all shows every group)\n")
	}
	for _, u := range usageUnknown(rows) {
		fmt.Fprintf(&b, "USAGE n/a: %s\n", u.Detail)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// usageUnknown lists the reasons why rows have no usage, each once, in
// the order of the rows.
func usageUnknown(rows []Row) []UsageUnknown {
	var out []UsageUnknown
	for i := range rows {
		if u := rows[i].UsageUnknown; u != nil && !slices.Contains(out, *u) {
			out = append(out, *u)
		}
	}
	return out
}

// WriteJSON writes the rows as an indented JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// Escape sequences of the live view (ECMA-48 and xterm's private modes).
const (
	escHome      = "\x1b[H"
	escClearEOL  = "\x1b[K"
	escClearEOS  = "\x1b[J"
	escReset     = "\x1b[m"
	escBold      = "\x1b[1m"
	escReverse   = "\x1b[7m"
	escAltScreen = "\x1b[?1049h" // alternate screen buffer (saves the cursor)
	escMainScr   = "\x1b[?1049l"
	escHideCur   = "\x1b[?25l"
	escShowCur   = "\x1b[?25h"
	escNoWrap    = "\x1b[?7l" // autowrap off: a line one cell too wide cannot scroll the screen
	escWrap      = "\x1b[?7h"
	escClear     = "\x1b[2J"
)

// appendFrame encodes lines for a terminal of the given width: the cursor
// goes home and every line overwrites the previous frame's, cleared to its
// end only where it is shorter than the screen (at the last column the
// clear would take the line's last character), so nothing is blanked
// before it is redrawn and nothing flickers. Styles are drawn when
// highlight is set.
func appendFrame(b []byte, lines []Line, width int, highlight bool) []byte {
	b = append(b, escHome...)
	for i, l := range lines {
		if i > 0 {
			b = append(b, '\r', '\n')
		}
		text := l.Text
		if l.Style == Title {
			text = padRight(text, width)
		}
		switch {
		case !highlight || l.Style == Plain:
			b = append(b, text...)
		case l.Style == Title:
			b = append(b, escReverse...)
			b = append(b, text...)
			b = append(b, escReset...)
		case l.Style == Hot:
			b = append(b, escBold...)
			b = append(b, text...)
			b = append(b, escReset...)
		}
		if utf8.RuneCountInString(text) < width {
			b = append(b, escClearEOL...)
		}
	}
	return append(b, escClearEOS...)
}

// truncMiddle shortens s to w characters, replacing its middle with "…":
// the ends of a group's name (the runtime and the container ID, the unit)
// say most.
func truncMiddle(s string, w int) string {
	n := utf8.RuneCountInString(s)
	if n <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	r := []rune(s)
	head := (w - 1) / 2
	tail := w - 1 - head
	return string(r[:head]) + "…" + string(r[n-tail:])
}

// truncEnd shortens s to w characters, ending it with "…".
func truncEnd(s string, w int) string {
	n := utf8.RuneCountInString(s)
	if n <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:w-1]) + "…"
}

func padRight(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

func padLeft(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}
