package sim

import (
	"strings"
	"testing"
)

func TestEraOfRelease(t *testing.T) {
	cases := map[string]Era{
		"3.16.0-4-amd64":       Era3_16,
		"4.14.4":               Era3_16,
		"4.17.19":              Era3_16,
		"4.18.0-80.el8.x86_64": Era4_18,
		"5.3.18":               Era4_18,
		"5.4.0-150-generic":    Era5_4,
		"5.13.0":               Era5_4,
		"5.14.0-427.el9":       Era5_14,
		"6.1.0-13-amd64":       Era5_14,
		"6.17.9":               Era5_14,
		"6.18.44-fc-v669":      Era6_18,
		"7.0":                  Era6_18,
	}
	for r, want := range cases {
		if got, err := EraOfRelease(r); err != nil || got != want {
			t.Errorf("EraOfRelease(%q) = %q, %v; want %q", r, got, err, want)
		}
	}
	for _, r := range []string{"3.10.0-1160.el7", "2.6.32", "", "six", "6", "x.1"} {
		if e, err := EraOfRelease(r); err == nil {
			t.Errorf("EraOfRelease(%q) = %q, want an error", r, e)
		}
	}
}

func TestParseEra(t *testing.T) {
	for _, e := range Eras() {
		if got, err := ParseEra(string(e)); err != nil || got != e {
			t.Errorf("ParseEra(%q) = %q, %v", e, got, err)
		}
	}
	_, err := ParseEra("4.19")
	if err == nil || !strings.Contains(err.Error(), "3.16, 4.18, 5.4, 5.14, 6.18") {
		t.Errorf("ParseEra(4.19): %v, want an error listing the eras", err)
	}
	if es := Eras(); es[0] != Era3_16 || es[len(es)-1] != Era6_18 {
		t.Errorf("Eras() = %v, want oldest first", es)
	}
}
