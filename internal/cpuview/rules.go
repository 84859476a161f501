package cpuview

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rounding turns a fractional CPU count into a whole number of threads.
type Rounding string

// The rules runtimes use. Floor and Nearest never give less than 1.
const (
	Ceil    Rounding = "ceil"
	Floor   Rounding = "floor"
	Nearest Rounding = "nearest"
)

// Roundings lists the rules in the order they are shown.
var Roundings = []Rounding{Ceil, Floor, Nearest}

// ParseRounding accepts ceil, floor or nearest.
func ParseRounding(s string) (Rounding, error) {
	for _, r := range Roundings {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("rounding %q: use ceil, floor or nearest", s)
}

// Runtimes says which runtimes derive their thread count from the CPU
// quota with each rule, and which ignore cgroups ("none": they count the
// online CPUs).
var Runtimes = map[string][]string{
	string(Ceil):    {"JVM", ".NET", "Go 1.25+ (at least 2; own group only)"},
	string(Floor):   {"automaxprocs", "Rust", "libuv (Node.js)"},
	string(Nearest): {"coreutils nproc (versions that read the quota)"},
	"none":          {"glibc", "nginx", "C++ hardware_concurrency", "Python os.cpu_count"},
}

// RuleResult is the thread count one rule gives for a view.
type RuleResult struct {
	Rule     string   `json:"rule"`
	Threads  int      `json:"threads"`
	Runtimes []string `json:"runtimes"`
}

// Recommendation is the thread count cfsprobe advises, and why.
type Recommendation struct {
	Threads int    `json:"threads"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason"`
}

// Threads is the number of threads rule r gives: the tightest quota in
// CPUs rounded (never less than 1), and never more than the usable CPUs.
func (v *View) Threads(r Rounding) int {
	n := v.UsableCPUs
	if v.periodNs > 0 {
		if t := roundQuota(v.quotaNs, v.periodNs, r); t < n {
			n = t
		}
	}
	return max(n, 1)
}

// roundQuota rounds quota/period to a whole number of CPUs, at least 1.
func roundQuota(q, p int64, r Rounding) int {
	var n int64
	switch r {
	case Ceil:
		n = q / p
		if q%p != 0 {
			n++
		}
	case Nearest: // half rounds up, as 0.5 CPUs is one CPU's worth of work half the time
		n = q / p
		if 2*(q%p) >= p {
			n++
		}
	default:
		n = q / p
	}
	return int(max(n, 1))
}

func (v *View) rules() []RuleResult {
	out := make([]RuleResult, 0, 4)
	for _, r := range Roundings {
		out = append(out, RuleResult{Rule: string(r), Threads: v.Threads(r), Runtimes: Runtimes[string(r)]})
	}
	none := v.Online.Count
	if none == 0 {
		none = v.UsableCPUs
	}
	return append(out, RuleResult{Rule: "none", Threads: none, Runtimes: Runtimes["none"]})
}

// recommend: floor, at least 1. With no more busy threads than the quota
// has whole CPUs, the group cannot use more than its quota within a
// period, so no thread is stopped until the next one.
func (v *View) recommend() Recommendation {
	n := v.Threads(Floor)
	rec := Recommendation{Threads: n, Rule: string(Floor)}
	if v.LimitedBy != "quota" {
		where := map[string]string{"online": "online", "affinity": "its affinity", "cpuset": "its cpuset"}[v.LimitedBy]
		cpus := fmt.Sprintf("%d %s (%s)", v.UsableCPUs, plural(v.UsableCPUs, "CPU"), where)
		if v.QuotaCPUs == nil {
			rec.Reason = fmt.Sprintf("no CPU quota: the process may run on %s, one thread each", cpus)
		} else {
			rec.Reason = fmt.Sprintf("the tightest quota, %s, is not below the %s the process may run on: one thread each", cpusText(*v.QuotaCPUs), cpus)
		}
		return rec
	}
	q := cpusText(*v.QuotaCPUs)
	period := fmtDur(v.periodNs)
	switch {
	case v.quotaNs < v.periodNs:
		stall := fmtDur(v.periodNs - v.quotaNs)
		rec.Reason = fmt.Sprintf("a quota of %s is less than one CPU: one thread is the fewest, and while it is busy it still runs out of quota and waits up to %s of every %s period; raise the quota to 1 CPU if it must not stall", q, stall, period)
	case v.quotaNs%v.periodNs == 0:
		use := "threads use"
		if n == 1 {
			use = "thread uses"
		}
		rec.Reason = fmt.Sprintf("the quota is %s: %d busy %s all of it and none waits for the next period", q, n, use)
	default:
		rec.Reason = fmt.Sprintf("with %d busy %s for a quota of %s the group cannot use more than its quota in a period, so no thread waits for the next period", n, plural(n, "thread"), q)
		frac := float64(v.quotaNs%v.periodNs) / float64(v.periodNs)
		if c := v.Threads(Ceil); frac >= 0.5 && c > n {
			rec.Reason += fmt.Sprintf("; the %s CPU left over stays idle: ceil (%d threads) would use it, at the cost of being throttled whenever every thread is busy", fmtCPUs(frac), c)
		}
	}
	return rec
}

// fmtCPUs prints a CPU count with up to 3 decimals: 0.5, 1, 1.333.
func fmtCPUs(c float64) string {
	s := strconv.FormatFloat(c, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// cpusText is fmtCPUs with its unit: 1 CPU, 1.5 CPUs.
func cpusText(c float64) string {
	if c == 1 {
		return "1 CPU"
	}
	return fmtCPUs(c) + " CPUs"
}

// fmtDur prints a duration exactly, as the kernel's microseconds allow:
// 100ms, 12.345ms, 1.5s.
func fmtDur(ns int64) string { return time.Duration(ns).String() }
