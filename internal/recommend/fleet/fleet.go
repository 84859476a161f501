// Package fleet reads the exporter's series of every CPU-limited group
// of a fleet from a Prometheus server (or what speaks its HTTP API:
// Thanos, Mimir) and turns each group's into a synthetic trace and its
// minute usage averages, the input of the recommender
// (internal/recommend). docs/recommend-fleet.md describes the queries,
// the synthesis and its assumptions.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Key names a group of the fleet: a cgroup path is unique on its node
// only, so a group is its exporter's job and instance and its path.
type Key struct {
	Job, Instance, Cgroup string
}

// String is job/instance:cgroup.
func (k Key) String() string { return k.Job + "/" + k.Instance + ":" + k.Cgroup }

// Options say which server to read and what of it.
type Options struct {
	// URL is the Prometheus server's (http://host:9090; Thanos Query and
	// Mimir's Prometheus API path work too).
	URL string
	// Since is the window read, ending at End (zero: now).
	Since time.Duration
	End   time.Time
	// Selector narrows the groups: label matchers without braces, e.g.
	// `job="cfsprobe",cgroup=~"/kubepods.*"` ("": every group).
	Selector string
	// Client makes the requests (nil: http.DefaultClient's transport).
	Client *http.Client
	Synth  SynthOptions
}

// Group is one group of the fleet, read and synthesized.
type Group struct {
	Key    Key
	Series Series
	// Trace and MinuteUsage are the recommender's input (nil when Err is
	// set).
	Trace       *trace.Trace
	MinuteUsage []float64
	// Err says why the group has no trace (ErrNoDemand: the sampler saw
	// no period of it in the window).
	Err error
}

// Read reads every group's series over the window and synthesizes its
// trace, groups in key order. Errors are the server's or the options';
// a group that cannot be synthesized has its Err set instead.
func Read(ctx context.Context, opt Options) ([]Group, error) {
	series, err := Query(ctx, opt)
	if err != nil {
		return nil, err
	}
	return SynthesizeAll(series, opt.Synth), nil
}

// SynthesizeAll synthesizes each group's trace, on as many goroutines as
// Go runs at once, groups in the order of series.
func SynthesizeAll(series []Series, opt SynthOptions) []Group {
	out := make([]Group, len(series))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(series), 1)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(series); i = int(next.Add(1) - 1) {
				g := Group{Key: series[i].Key, Series: series[i]}
				g.Trace, g.MinuteUsage, g.Err = Synthesize(series[i], opt)
				out[i] = g
			}
		})
	}
	wg.Wait()
	return out
}

// ErrUnreachable is a server that did not answer: nothing listens at
// the URL, or it is not a Prometheus API.
var ErrUnreachable = errors.New("no Prometheus API answered")

// ErrRefused is a query the server refused as malformed (its bad_data):
// a selector that is not label matchers.
var ErrRefused = errors.New("the server refused the query")

// CheckOptions checks what Query needs of the options: an http(s) URL
// with a host and a positive window (the selector is the server's to
// parse: a bad one is ErrRefused). Its errors say which.
func CheckOptions(opt Options) error {
	u, err := url.Parse(opt.URL)
	switch {
	case err != nil:
		return fmt.Errorf("URL %q: %w", opt.URL, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("URL %q is not an http:// or https:// address with a host", opt.URL)
	case opt.Since <= 0:
		return fmt.Errorf("the window %v is not a positive duration", opt.Since)
	}
	return nil
}

// Query reads every group's series over the window, groups in key order:
// one instant query per figure, run at once. A server that does not
// answer is ErrUnreachable, a query it refuses ErrRefused.
func Query(ctx context.Context, opt Options) ([]Series, error) {
	if err := CheckOptions(opt); err != nil {
		return nil, err
	}
	cfg := api.Config{Address: opt.URL}
	if opt.Client != nil {
		cfg.Client = opt.Client
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", opt.URL, err)
	}
	end := opt.End
	if end.IsZero() {
		end = time.Now()
	}
	q := queries(opt.Selector, opt.Since)
	res := make([]model.Vector, len(q))
	errs := make([]error, len(q))
	a := v1.NewAPI(client)
	var wg sync.WaitGroup
	for i, text := range q {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := a.Query(ctx, text, end)
			if err != nil {
				errs[i] = queryError(opt.URL, text, err)
				return
			}
			vec, ok := v.(model.Vector)
			if !ok {
				errs[i] = fmt.Errorf("prometheus %s: query %s gave a %s, not an instant vector", opt.URL, text, v.Type())
				return
			}
			res[i] = vec
		}()
	}
	wg.Wait()
	// The queries fail alike when the server does: the first says why.
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return assemble(res, opt, end), nil
}

// queryError says why a query failed, as ErrUnreachable (no answer, or
// an answer that is not the API's), ErrRefused (bad_data) or the
// server's error.
func queryError(url, text string, err error) error {
	var ae *v1.Error
	switch {
	case errors.As(err, &ae) && ae.Type == v1.ErrBadData:
		return fmt.Errorf("%w at %s (%s): query %s", ErrRefused, url, ae.Msg, text)
	case errors.As(err, &ae) && (ae.Type == v1.ErrBadResponse || ae.Type == v1.ErrClient):
		return fmt.Errorf("%w at %s (%s)", ErrUnreachable, url, ae.Msg)
	case !errors.As(err, &ae) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w at %s (%v)", ErrUnreachable, url, err)
	}
	return fmt.Errorf("prometheus %s: query %s: %w", url, text, err)
}

// The queries, by index.
const (
	qQuota = iota
	qPeriod
	qBurst
	qPeriods
	qThrottled
	qDemand
	qDemandSum
	qDemandCount
	qPairs
	qPairsSum
	qPairsCount
	qStopped
	qStoppedSum
	qStoppedCount
	qStretches
	qCaughtUp
	qUsage
	qMinutes
	qHostCPUs
	qHostInfo
	nQueries
)

// QueryCount is how many instant queries Query runs.
const QueryCount = nQueries

// queries are the instant queries of the window (docs/recommend-fleet.md).
func queries(sel string, since time.Duration) []string {
	w := "[" + model.Duration(since).String() + "]"
	m := func(name string) string { return name + "{" + sel + "}" }
	last := func(name string) string { return "last_over_time(" + m(name) + w + ")" }
	inc := func(name string) string { return "increase(" + m(name) + w + ")" }
	// Node figures join on job and instance only.
	var usage []string
	for _, q := range UsageQuantiles {
		f := strconv.FormatFloat(q, 'g', -1, 64)
		usage = append(usage, `label_replace(quantile_over_time(`+f+`, `+m(minuteRule)+w+`), "quantile", "`+f+`", "", "")`)
	}
	q := make([]string, nQueries)
	q[qQuota] = last("cfsprobe_cpu_quota_cpus")
	q[qPeriod] = last("cfsprobe_cpu_period_seconds")
	q[qBurst] = last("cfsprobe_cpu_burst_limit_seconds")
	q[qPeriods] = inc("cfsprobe_cpu_periods_total")
	q[qThrottled] = inc("cfsprobe_cpu_throttled_periods_total")
	q[qDemand] = inc("cfsprobe_period_demand_cpus_bucket")
	q[qDemandSum] = inc("cfsprobe_period_demand_cpus_sum")
	q[qDemandCount] = inc("cfsprobe_period_demand_cpus_count")
	q[qPairs] = inc("cfsprobe_period_pair_demand_cpus_bucket")
	q[qPairsSum] = inc("cfsprobe_period_pair_demand_cpus_sum")
	q[qPairsCount] = inc("cfsprobe_period_pair_demand_cpus_count")
	q[qStopped] = inc("cfsprobe_period_stopped_cpus_bucket")
	q[qStoppedSum] = inc("cfsprobe_period_stopped_cpus_sum")
	q[qStoppedCount] = inc("cfsprobe_period_stopped_cpus_count")
	q[qStretches] = inc("cfsprobe_throttled_stretches_total")
	q[qCaughtUp] = inc("cfsprobe_throttled_stretches_caught_up_total")
	q[qUsage] = strings.Join(usage, " or ")
	q[qMinutes] = "count_over_time(" + m(minuteRule) + w + ")"
	q[qHostCPUs] = "last_over_time(cfsprobe_host_cpus" + w + ")"
	q[qHostInfo] = "last_over_time(cfsprobe_host_info" + w + ")"
	return q
}

// minuteRule is the recording rule of minute usage averages
// (deploy/prometheus/rules.yaml).
const minuteRule = "cgroup:cfsprobe_cpu_usage:rate1m"

// assemble puts the queries' results together by group: the groups are
// those with a demand histogram.
func assemble(res []model.Vector, opt Options, end time.Time) []Series {
	by := map[Key]*Series{}
	key := func(m model.Metric) Key {
		return Key{Job: string(m["job"]), Instance: string(m["instance"]), Cgroup: string(m["cgroup"])}
	}
	// The groups: those with a demand histogram.
	for _, s := range res[qDemand] {
		if k := key(s.Metric); by[k] == nil {
			by[k] = &Series{Key: k, Window: opt.Since, End: end, UsageQuantiles: map[float64]float64{},
				Query: "increase(cfsprobe_period_demand_cpus_bucket{" + selectorOf(k) + "}[" + model.Duration(opt.Since).String() + "])"}
		}
	}
	each := func(q int, f func(g *Series, s *model.Sample)) {
		for _, s := range res[q] {
			if g := by[key(s.Metric)]; g != nil {
				f(g, s)
			}
		}
	}
	// A histogram's buckets (by le), sum and count.
	histogram := func(buckets, sum, count int, of func(g *Series) *Histogram) {
		each(buckets, func(g *Series, s *model.Sample) {
			if le, err := strconv.ParseFloat(string(s.Metric["le"]), 64); err == nil {
				of(g).add(le, float64(s.Value))
			}
		})
		each(sum, func(g *Series, s *model.Sample) { of(g).Sum = float64(s.Value) })
		each(count, func(g *Series, s *model.Sample) { of(g).Count = float64(s.Value) })
	}
	each(qQuota, func(g *Series, s *model.Sample) { g.QuotaCPUs = float64(s.Value) })
	each(qPeriod, func(g *Series, s *model.Sample) { g.PeriodSeconds = float64(s.Value) })
	each(qBurst, func(g *Series, s *model.Sample) { g.BurstSeconds, g.HasBurst = float64(s.Value), true })
	each(qPeriods, func(g *Series, s *model.Sample) { g.Periods = float64(s.Value) })
	histogram(qDemand, qDemandSum, qDemandCount, func(g *Series) *Histogram { return &g.Demand })
	histogram(qPairs, qPairsSum, qPairsCount, func(g *Series) *Histogram { return &g.Pairs })
	histogram(qStopped, qStoppedSum, qStoppedCount, func(g *Series) *Histogram { return &g.Stopped })
	each(qStretches, func(g *Series, s *model.Sample) {
		g.Stretches = &trace.Stretches{Ended: int64(math.Round(float64(s.Value)))}
	})
	each(qCaughtUp, func(g *Series, s *model.Sample) {
		if g.Stretches != nil {
			g.Stretches.CaughtUp = int64(math.Round(float64(s.Value)))
		}
	})
	// Over the periods the kernel counted, as a recording's stretches
	// are over its periods (trace.Stretches.Unrelieved).
	each(qThrottled, func(g *Series, s *model.Sample) {
		if g.Stretches != nil && g.Periods > 0 {
			g.Stretches.Periods = int64(math.Round(g.Periods))
			g.Stretches.Throttled = int64(math.Round(float64(s.Value)))
		}
	})
	each(qUsage, func(g *Series, s *model.Sample) {
		if q, err := strconv.ParseFloat(string(s.Metric["quantile"]), 64); err == nil && !math.IsNaN(float64(s.Value)) {
			g.UsageQuantiles[q] = float64(s.Value)
		}
	})
	each(qMinutes, func(g *Series, s *model.Sample) { g.Minutes = float64(s.Value) })

	type node struct{ job, instance string }
	hosts := map[node]trace.Host{}
	for _, s := range res[qHostInfo] {
		mode, ctl := string(s.Metric["cgroup_mode"]), 0
		if v := strings.TrimPrefix(string(s.Metric["cpu_controller"]), "v"); v != "" {
			ctl, _ = strconv.Atoi(v)
		}
		hosts[node{string(s.Metric["job"]), string(s.Metric["instance"])}] = trace.Host{
			Hostname: string(s.Metric["instance"]), Kernel: string(s.Metric["kernel"]), CgroupMode: mode, CPUController: ctl,
		}
	}
	for _, s := range res[qHostCPUs] {
		n := node{string(s.Metric["job"]), string(s.Metric["instance"])}
		h := hosts[n]
		h.CPUs = int(s.Value)
		hosts[n] = h
	}
	out := make([]Series, 0, len(by))
	for k, g := range by {
		g.Host = hosts[node{k.Job, k.Instance}]
		g.Host.BurstSupported = g.HasBurst
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return out
}

// selectorOf is a group's label matchers.
func selectorOf(k Key) string {
	return fmt.Sprintf("job=%q,instance=%q,cgroup=%q", k.Job, k.Instance, k.Cgroup)
}
