package suite

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// TermProgress draws a progress bar with an ETA on a terminal, redrawn
// in place; on anything else it writes one plain line per run.
type TermProgress struct {
	W        io.Writer
	Terminal bool
	start    time.Time
	width    int
}

func (p *TermProgress) Start(i, n int, st *Step, eta time.Duration) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	if !p.Terminal {
		fmt.Fprintf(p.W, "[%d/%d] %s ... (ETA %s)\n", i+1, n, st.Name(), eta.Round(time.Second))
		return
	}
	const barW = 24
	done := barW * i / n
	bar := strings.Repeat("█", done) + strings.Repeat("░", barW-done)
	line := fmt.Sprintf("\r%s %d/%d %s  elapsed %s  ETA %s", bar, i, n, st.Name(),
		time.Since(p.start).Round(time.Second), eta.Round(time.Second))
	p.draw(line)
}

func (p *TermProgress) Done(i, n int, st *Step, tr *trace.Trace) {
	s := tr.Summary
	msg := fmt.Sprintf("%s: %s, throttled %d/%d", st.Name(), verdictWord(tr.Scenario.Verdict), s.NrThrottled, s.NrPeriods)
	if s.LatencyNs != nil {
		msg += ", p99 " + report.Dur(s.LatencyNs.P99)
	}
	if p.Terminal {
		p.draw("\r  " + msg)
		fmt.Fprintln(p.W)
		p.width = 0
		return
	}
	fmt.Fprintf(p.W, "      %s\n", msg)
}

func (p *TermProgress) Finish() {
	if p.Terminal && p.width > 0 {
		p.draw("\r")
	}
}

// draw overwrites the current line, padding over what was there.
func (p *TermProgress) draw(line string) {
	w := len([]rune(line))
	pad := ""
	if p.width > w {
		pad = strings.Repeat(" ", p.width-w)
	}
	fmt.Fprint(p.W, line+pad)
	p.width = w
}
