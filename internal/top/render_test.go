package top

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

var testHost = trace.Host{Hostname: "node-7", Kernel: "6.1.0-31-amd64", CgroupMode: "v1", CPUController: 1, CPUs: 32}

// fleetPaths are the kinds of groups a node has, for realistic names of
// every length.
func fleetPath(i int, rnd func(int) int) string {
	hex := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "%08x", uint32(rnd(1<<31))*2654435761)
		}
		return b.String()[:n]
	}
	uid := func() string {
		h := hex(32)
		return h[:8] + "_" + h[8:12] + "_" + h[12:16] + "_" + h[16:20] + "_" + h[20:]
	}
	switch i % 6 {
	case 0, 1:
		return fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope", uid(), hex(64))
	case 2:
		return fmt.Sprintf("/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope", uid(), hex(64))
	case 3:
		return fmt.Sprintf("/system.slice/docker-%s.scope", hex(64))
	case 4:
		return fmt.Sprintf("/system.slice/batch-worker-%03d-with-a-rather-long-descriptive-unit-name.service", i)
	default:
		return fmt.Sprintf("/cfsprobe/run-%d-%s", 4000+i, hex(8))
	}
}

// fleet is a model of n groups read twice a second apart: varied limits,
// usage, throttling and bursts; every tenth group appeared between the
// readings (no figures yet).
func fleet(n int) *Model {
	seed := uint64(42)
	rnd := func(k int) int {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int(seed % uint64(k))
	}
	m := NewModel()
	type g struct {
		path string
		l    cgroup.Limits
		s0   cgroup.Stat
		s1   cgroup.Stat
		new  bool
		// the longest stall the sampler measured; nil: still learning
		stall *int64
	}
	gs := make([]g, n)
	for i := range gs {
		period := 100 * time.Millisecond
		quota := time.Duration(1+rnd(400)) * 5 * time.Millisecond // 0.05 to 20 CPUs
		l := cgroup.Limits{Quota: quota, Period: period}
		if i%17 == 0 {
			l.Burst = quota / 2
		}
		s0 := cgroup.Stat{UsageNs: int64(rnd(1 << 40)), NrPeriods: int64(rnd(1 << 20)), NrThrottled: int64(rnd(1 << 10)), ThrottledNs: int64(rnd(1 << 36))}
		s1 := s0
		use := float64(rnd(1000)) / 1000 * 1.2 * l.CPUs() // up to 1.2 times the limit
		s1.UsageNs += int64(use * 1e9)
		if rnd(5) > 0 {
			s1.NrPeriods += 10
		}
		if use > 0.8*l.CPUs() && s1.NrPeriods > s0.NrPeriods {
			thr := int64(1 + rnd(10))
			s1.NrThrottled += thr
			s1.ThrottledNs += thr * int64(1+rnd(100)) * ms * int64(1+rnd(3))
		}
		if l.Burst > 0 && rnd(2) == 0 {
			s1.NrBursts = s0.NrBursts + int64(1+rnd(5))
			s1.BurstNs = s0.BurstNs + int64(rnd(50))*ms
		}
		gs[i] = g{path: fleetPath(i, rnd), l: l, s0: s0, s1: s1, new: i%10 == 9}
		if i%7 != 3 {
			var stall int64
			if thr := s1.NrThrottled - s0.NrThrottled; thr > 0 {
				stall = (s1.ThrottledNs - s0.ThrottledNs) / thr / int64(1+i%3) // on 1 to 3 CPUs
			}
			gs[i].stall = &stall
		}
	}
	var first, second Snapshot
	for _, x := range gs {
		if !x.new {
			first.Readings = append(first.Readings, reading(x.path, x.l, 0, x.s0))
		}
		r := reading(x.path, x.l, time.Second, x.s1)
		r.MaxStallNs = x.stall
		second.Readings = append(second.Readings, r)
	}
	first.Total, first.At = 3*n, t0
	second.Total, second.At = 3*n+4, t0.Add(time.Second)
	m.Update(first)
	m.Update(second)
	return m
}

func frameText(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// 500 groups on a 120x40 terminal: the first screen sorted by throttled,
// and the last one sorted by name after End.
func TestFrameGolden500Rows(t *testing.T) {
	m := fleet(500)
	if m.Len() != 500 {
		t.Fatalf("fleet has %d groups", m.Len())
	}
	o := Options{Interval: time.Second, Host: testHost}
	h := HeaderOf(m, o)
	cases := []struct {
		name string
		view View
	}{
		{"500-rows-120x40.txt", View{Width: 120, Height: 40, Sort: SortThrottled}},
		{"500-rows-120x40-end-by-name.txt", View{Width: 120, Height: 40, Offset: 1 << 20, Sort: SortName}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows := m.Rows(tc.view.Sort, tc.view.Reverse)
			lines, off := Frame(h, rows, tc.view)
			if len(lines) != 40 {
				t.Errorf("%d lines, want 40", len(lines))
			}
			for i, l := range lines {
				if n := utf8.RuneCountInString(l.Text); n > 120 {
					t.Errorf("line %d is %d wide: %q", i, n, l.Text)
				}
			}
			if tc.view.Offset > 0 && off != 500-37 {
				t.Errorf("offset %d after End, want %d", off, 500-37)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name), []byte(frameText(lines)))
		})
	}
}

// Every line fits any width, down to a few columns; figures give way to
// the name in a fixed order.
func TestFrameFitsEveryWidth(t *testing.T) {
	m := fleet(50)
	h := HeaderOf(m, Options{Interval: time.Second, Host: testHost})
	rows := m.Rows(SortThrottled, false)
	for w := 1; w <= 200; w++ {
		for _, hgt := range []int{1, 2, 3, 4, 10} {
			lines, _ := Frame(h, rows, View{Width: w, Height: hgt, Sort: SortThrottled})
			if len(lines) != hgt {
				t.Fatalf("%dx%d: %d lines", w, hgt, len(lines))
			}
			for i, l := range lines {
				if n := utf8.RuneCountInString(l.Text); n > w {
					t.Fatalf("%dx%d: line %d is %d wide: %q", w, hgt, i, n, l.Text)
				}
			}
		}
	}
	titles := func(w int) string {
		lines, _ := Frame(h, rows, View{Width: w, Height: 5, Sort: SortThrottled})
		return lines[1].Text
	}
	if s := titles(120); !strings.Contains(s, "BURST TIME") {
		t.Errorf("120 columns: no burst time: %q", s)
	}
	if s := titles(80); strings.Contains(s, "BURST") || !strings.Contains(s, "WORST STALL") {
		t.Errorf("80 columns: want the stall but no burst columns: %q", s)
	}
	if s := titles(60); !strings.Contains(s, "LIMIT") || !strings.Contains(s, "USAGE") || !strings.Contains(s, "THROTTLED") {
		t.Errorf("60 columns: limit, usage and throttled must stay: %q", s)
	}
}

func TestFrameFooter(t *testing.T) {
	m := fleet(100)
	h := HeaderOf(m, Options{Interval: time.Second, Host: testHost})
	rows := m.Rows(SortUsage, false)
	foot := func(v View) string {
		v.Width, v.Height = 200, 23 // 20 rows
		lines, _ := Frame(h, rows, v)
		return lines[len(lines)-1].Text
	}
	for _, tc := range []struct {
		view View
		want string
	}{
		{View{Sort: SortUsage}, "80 more (sorted by usage), rows 1-20 of 100"},
		{View{Sort: SortUsage, Offset: 30}, "50 more (sorted by usage), rows 31-50 of 100"},
		{View{Sort: SortUsage, Offset: 95}, "rows 81-100 of 100 (sorted by usage)"},
		{View{Sort: SortName, Reverse: true}, "(sorted by name, reversed)"},
	} {
		if got := foot(tc.view); !strings.HasPrefix(got, tc.want) && !strings.Contains(got, tc.want) {
			t.Errorf("offset %d: footer %q, want %q", tc.view.Offset, got, tc.want)
		}
	}
	lines, _ := Frame(Header{Host: testHost, Interval: time.Second}, nil, View{Width: 120, Height: 10, Sort: SortThrottled})
	if f := lines[9].Text; !strings.Contains(f, "no group has a CPU limit (--all shows every group)") {
		t.Errorf("empty table: footer %q", f)
	}
}

func TestHeaderLine(t *testing.T) {
	h := Header{Host: testHost, Shown: 3, Total: 41, Interval: time.Second, At: time.Date(2026, 1, 2, 14, 3, 22, 0, time.Local)}
	got := headerLine(h, 120)
	for _, want := range []string{"cfsprobe top", "node-7", "Linux 6.1.0-31-amd64", "cgroup v1", "32 CPUs", "3/41 groups with a CPU limit", "every 1s  14:03:22"} {
		if !strings.Contains(got, want) {
			t.Errorf("header %q lacks %q", got, want)
		}
	}
	if n := utf8.RuneCountInString(got); n != 120 || !strings.HasSuffix(got, "14:03:22") {
		t.Errorf("header is %d wide, the time not at the right edge: %q", n, got)
	}
	h.All, h.Skipped = true, 2
	if got := headerLine(h, 0); !strings.Contains(got, "41 groups") || !strings.Contains(got, "2 unreadable") {
		t.Errorf("--all header %q", got)
	}
	h.Total = 1
	if got := headerLine(h, 0); !strings.Contains(got, " 1 group ") {
		t.Errorf("one group: %q", got)
	}
	hybrid := testHost
	hybrid.CgroupMode = "hybrid"
	if got := hostLine(hybrid); !strings.Contains(got, "cgroup hybrid (cpu v1)") {
		t.Errorf("hybrid: %q", got)
	}
	// Narrow: the time stays, the rest is cut.
	if got := headerLine(h, 30); utf8.RuneCountInString(got) != 30 || !strings.HasSuffix(got, "14:03:22") || !strings.Contains(got, "…") {
		t.Errorf("30 columns: %q", got)
	}
}

func TestTruncMiddle(t *testing.T) {
	cases := []struct {
		in   string
		w    int
		want string
	}{
		{"nginx.service", 20, "nginx.service"},
		{"nginx.service", 13, "nginx.service"},
		{"nginx.service", 12, "nginx…ervice"},
		{"pod 1b2c3d4e/containerd 4f5e6a7b8c9d", 20, "pod 1b2c3…5e6a7b8c9d"},
		{"abcdef", 1, "…"},
		{"abcdef", 2, "…f"},
		{"abcdef", 0, ""},
		{"ünïcödé-nämé", 7, "ünï…ämé"},
	}
	for _, tc := range cases {
		got := truncMiddle(tc.in, tc.w)
		if got != tc.want {
			t.Errorf("truncMiddle(%q, %d) = %q, want %q", tc.in, tc.w, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > max(tc.w, 0) {
			t.Errorf("truncMiddle(%q, %d) is %d wide", tc.in, tc.w, n)
		}
	}
	if got := truncEnd("abcdef", 4); got != "abc…" {
		t.Errorf("truncEnd = %q", got)
	}
}

// The frame's escapes: cursor home, lines cleared to their end only when
// shorter than the screen, titles in reverse video and throttled rows in
// bold when highlighting, no newline after the last line (it would
// scroll), the rest of the screen cleared.
func TestAppendFrame(t *testing.T) {
	lines := []Line{
		{Text: "header"},
		{Text: "TITLES", Style: Title},
		{Text: "hot row", Style: Hot},
		{Text: "0123456789"}, // full width
		{Text: "footer"},
	}
	got := string(appendFrame(nil, lines, 10, true))
	want := "\x1b[H" +
		"header\x1b[K\r\n" +
		"\x1b[7mTITLES    \x1b[m\r\n" +
		"\x1b[1mhot row\x1b[m\x1b[K\r\n" +
		"0123456789\r\n" +
		"footer\x1b[K" +
		"\x1b[J"
	if got != want {
		t.Errorf("frame:\n got %q\nwant %q", got, want)
	}
	plain := string(appendFrame(nil, lines, 10, false))
	if strings.Contains(plain, "\x1b[1m") || strings.Contains(plain, "\x1b[7m") {
		t.Errorf("styles without highlighting: %q", plain)
	}
}

func TestFrameMarksThrottledRowsHot(t *testing.T) {
	m := fleet(60)
	rows := m.Rows(SortThrottled, false)
	lines, _ := Frame(HeaderOf(m, Options{Interval: time.Second}), rows, View{Width: 120, Height: 63, Sort: SortThrottled})
	for i, r := range rows {
		hot := r.Ready() && r.Interval.NrThrottled > 0
		if got := lines[2+i].Style == Hot; got != hot {
			t.Errorf("row %d (%s, throttled %v): hot=%v", i, r.Name, r.Interval, got)
		}
	}
}

func TestWriteTableAndJSON(t *testing.T) {
	m := fleet(20)
	rows := m.Rows(SortThrottled, false)
	var b bytes.Buffer
	if err := WriteTable(&b, HeaderOf(m, Options{Interval: time.Second, Host: testHost}), rows, 0, SortThrottled, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 22 {
		t.Fatalf("%d lines, want header, titles and 20 rows:\n%s", len(lines), b.String())
	}
	if strings.Contains(b.String(), "\x1b") || strings.Contains(b.String(), "…") {
		t.Errorf("--once table without a width has escapes or truncated names:\n%s", b.String())
	}
	for i, r := range rows {
		if !strings.HasPrefix(lines[2+i], r.Name+" ") {
			t.Errorf("line %d %q does not start with the full name %q", 2+i, lines[2+i], r.Name)
		}
	}

	b.Reset()
	if err := WriteJSON(&b, nil); err != nil || strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("no rows: %q %v", b.String(), err)
	}
}
