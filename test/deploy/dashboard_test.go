package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const dashboardFile = "deploy/grafana/cfsprobe-dashboard.json"

// dashboard mirrors the parts of Grafana's dashboard model the file uses;
// decoding it strictly catches misspelt and misplaced keys. Panel options
// differ by panel type and stay free-form.
type dashboard struct {
	ID                   *int     `json:"id"`
	UID                  string   `json:"uid"`
	Title                string   `json:"title"`
	Description          string   `json:"description"`
	Tags                 []string `json:"tags"`
	Editable             bool     `json:"editable"`
	GraphTooltip         int      `json:"graphTooltip"`
	SchemaVersion        int      `json:"schemaVersion"`
	Version              int      `json:"version"`
	Refresh              string   `json:"refresh"`
	Time                 struct{ From, To string }
	Timepicker           map[string]any `json:"timepicker"`
	Timezone             string         `json:"timezone"`
	FiscalYearStartMonth int            `json:"fiscalYearStartMonth"`
	LiveNow              bool           `json:"liveNow"`
	WeekStart            string         `json:"weekStart"`
	Links                []struct {
		Title       string `json:"title"`
		Type        string `json:"type"`
		URL         string `json:"url"`
		TargetBlank bool   `json:"targetBlank"`
		Icon        string `json:"icon"`
		Tooltip     string `json:"tooltip"`
	} `json:"links"`
	Annotations struct {
		List []map[string]any `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Datasource *datasourceRef `json:"datasource,omitempty"`
	Query      string         `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Refresh    int            `json:"refresh,omitempty"`
	Sort       int            `json:"sort,omitempty"`
	IncludeAll bool           `json:"includeAll"`
	Multi      bool           `json:"multi"`
	AllValue   string         `json:"allValue,omitempty"`
	Current    map[string]any `json:"current"`
	Hide       int            `json:"hide"`
	Options    []struct {
		Selected bool   `json:"selected"`
		Text     string `json:"text"`
		Value    string `json:"value"`
	} `json:"options"`
	Regex string `json:"regex,omitempty"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Datasource  *datasourceRef `json:"datasource,omitempty"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Collapsed   bool     `json:"collapsed,omitempty"`
	Panels      []panel  `json:"panels,omitempty"`
	Targets     []target `json:"targets,omitempty"`
	FieldConfig *struct {
		Defaults struct {
			Unit       string         `json:"unit,omitempty"`
			Min        *float64       `json:"min,omitempty"`
			Max        *float64       `json:"max,omitempty"`
			Custom     map[string]any `json:"custom,omitempty"`
			Thresholds *struct {
				Mode  string `json:"mode"`
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds,omitempty"`
		} `json:"defaults"`
		Overrides []map[string]any `json:"overrides"`
	} `json:"fieldConfig,omitempty"`
	Options         map[string]any `json:"options,omitempty"`
	Transformations []struct {
		ID      string         `json:"id"`
		Options map[string]any `json:"options"`
	} `json:"transformations,omitempty"`
}

type target struct {
	RefID        string         `json:"refId"`
	Datasource   *datasourceRef `json:"datasource,omitempty"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Format       string         `json:"format,omitempty"`
	Range        bool           `json:"range"`
	Instant      bool           `json:"instant"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := decodeJSONStrict(readFile(t, dashboardFile), &d, dashboardFile); err != nil {
		t.Fatal(err)
	}
	return d
}

var grafanaVarRE = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// substitute replaces Grafana's variables with values of the right kind:
// intervals for the interval variables, a custom variable's current value,
// ".*" for the others (they appear in regex matchers).
func substitute(expr string, vars map[string]variable) (string, []string) {
	var unknown []string
	out := grafanaVarRE.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVarRE.FindStringSubmatch(m)
		name := sm[1] + sm[2]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		if v.Type == "custom" {
			if s, ok := v.Current["value"].(string); ok {
				return s
			}
		}
		return ".*"
	})
	return out, unknown
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// The dashboard decodes, its layout is sound, every query parses and reads
// only documented metrics.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	doc := loadMetricsDoc(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want at least 36", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title")
	}
	if d.ID != nil {
		t.Errorf("id must be null in a file meant for import")
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		if _, dup := vars[v.Name]; dup {
			t.Errorf("variable %s defined twice", v.Name)
		}
		vars[v.Name] = v
	}
	for _, want := range []string{"datasource", "node", "instance", "kind"} {
		if _, ok := vars[want]; !ok {
			t.Errorf("no %s variable", want)
		}
	}
	for _, v := range d.Templating.List {
		where := fmt.Sprintf("%s: variable %s", dashboardFile, v.Name)
		switch v.Type {
		case "datasource":
			if v.Query != "prometheus" {
				t.Errorf("%s: a data source variable of type %q, want prometheus", where, v.Query)
			}
		case "custom":
			if cur, _ := v.Current["value"].(string); !slices.Contains(strings.Split(v.Query, ","), cur) {
				t.Errorf("%s: current value %q is not one of %q", where, cur, v.Query)
			}
		case "query":
			checkDatasource(t, where, v.Datasource)
			m := labelValuesRE.FindStringSubmatch(v.Query)
			if m == nil {
				t.Errorf("%s: query %q is not label_values(selector, label)", where, v.Query)
				continue
			}
			expr, unknown := substitute(m[1], vars)
			if len(unknown) > 0 {
				t.Errorf("%s: unknown variables %v", where, unknown)
			}
			e, err := promql(expr)
			if err != nil {
				t.Errorf("%s: selector does not parse: %v", where, err)
				continue
			}
			doc.checkExpr(t, where, e)
			for _, s := range selectors(e) {
				if dm, ok := doc.lookup(s.Name); ok {
					doc.checkLabels(t, where, dm, s.Name, []string{m[2]}, "lists values of")
				}
			}
			if v.Multi && v.AllValue != ".*" {
				t.Errorf("%s: a multi-value variable needs allValue .* (All must also match series without the label)", where)
			}
		default:
			t.Errorf("%s: unexpected variable type %q", where, v.Type)
		}
	}

	ids := map[int]bool{}
	var walk func([]panel)
	queries := 0
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("%s: panel %d %q", dashboardFile, p.ID, p.Title)
			if p.ID <= 0 || ids[p.ID] {
				t.Errorf("%s: panel ids are positive and unique", where)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v does not fit the 24-column grid", where, g)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if !strings.Contains(p.Title, "$") && p.Description == "" {
				t.Errorf("%s: no description (say what the panel shows and when to worry)", where)
			}
			if _, unknown := substitute(p.Title, vars); len(unknown) > 0 {
				t.Errorf("%s: title uses unknown variables %v", where, unknown)
			}
			checkDatasource(t, where, p.Datasource)
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				twhere := fmt.Sprintf("%s: target %s", where, tg.RefID)
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refIds are set and unique", twhere)
				}
				refs[tg.RefID] = true
				checkDatasource(t, twhere, tg.Datasource)
				expr, unknown := substitute(tg.Expr, vars)
				if len(unknown) > 0 {
					t.Errorf("%s: unknown variables %v", twhere, unknown)
				}
				e, err := promql(expr)
				if err != nil {
					t.Errorf("%s: expr does not parse: %v\n%s", twhere, err, tg.Expr)
					continue
				}
				queries++
				doc.checkExpr(t, twhere, e)
				if p.Type == "heatmap" {
					if tg.Format != "heatmap" || !strings.Contains(tg.Expr, "_bucket") || !strings.Contains(tg.Expr, "by (le)") {
						t.Errorf("%s: a heatmap reads a histogram's buckets summed by (le), in heatmap format", twhere)
					}
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatalf("%s: no queries", dashboardFile)
	}

	// The panels the dashboard is for.
	var types []string
	var all strings.Builder
	for _, p := range flatten(d.Panels) {
		types = append(types, p.Type)
		for _, tg := range p.Targets {
			all.WriteString(tg.Expr + "\n")
		}
	}
	for _, want := range []string{"cfsprobe_period_usage_ratio_bucket", "cfsprobe_stall_seconds_bucket",
		"cfsprobe_throttled_under_quota_periods_total", "cfsprobe_cpu_throttled_periods_total",
		"cfsprobe_scrape_duration_seconds", "cfsprobe_sampler_groups", "cfsprobe_read_errors_total", "topk("} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("%s: no panel reads %s", dashboardFile, want)
		}
	}
	if n := strings.Count(strings.Join(types, " "), "heatmap"); n < 2 {
		t.Errorf("%s: %d heatmaps, want the usage and stall distributions", dashboardFile, n)
	}
}

func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

func checkDatasource(t *testing.T, where string, ds *datasourceRef) {
	t.Helper()
	if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
		t.Errorf("%s: datasource %+v, want the ${datasource} variable (type prometheus)", where, ds)
	}
}
