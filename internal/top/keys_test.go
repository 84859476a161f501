package top

import (
	"slices"
	"testing"
)

func TestKeyDecoder(t *testing.T) {
	cases := []struct {
		name   string
		chunks []string
		want   []Key
	}{
		{"letters", []string{"tnq"}, []Key{"t", "n", "q"}},
		{"arrows CSI", []string{"\x1b[A\x1b[B"}, []Key{KeyUp, KeyDown}},
		{"arrows SS3", []string{"\x1bOA\x1bOB"}, []Key{KeyUp, KeyDown}},
		{"pages", []string{"\x1b[5~\x1b[6~"}, []Key{KeyPgUp, KeyPgDown}},
		{"home end", []string{"\x1b[H\x1b[F\x1b[1~\x1b[4~\x1bOH\x1bOF\x1b[7~\x1b[8~"},
			[]Key{KeyHome, KeyEnd, KeyHome, KeyEnd, KeyHome, KeyEnd, KeyHome, KeyEnd}},
		{"split sequence", []string{"\x1b", "[", "6", "~n"}, []Key{KeyPgDown, "n"}},
		{"unknown sequences skipped", []string{"\x1b[15~\x1b[1;5C\x1b[Cs"}, []Key{"s"}},
		{"lone escape", []string{"\x1bq"}, []Key{"q"}},
		{"ctrl-c", []string{"\x03"}, []Key{KeyCtrlC}},
		{"controls and utf-8 ignored", []string{"\r\n\x7fé l"}, []Key{" ", "l"}},
		// Nothing a key sends: its first bytes are dropped rather than
		// held forever waiting for a final byte.
		{"overlong CSI", []string{"\x1b[111111111111111111112u"}, []Key{"1", "1", "1", "1", "2", "u"}},
	}
	for _, tc := range cases {
		var d keyDecoder
		var got []Key
		for _, c := range tc.chunks {
			got = append(got, d.decode([]byte(c))...)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Any bytes, in any chunks: no panic, every key is a printable character
// or a special key, and nothing is held back beyond one unfinished
// sequence.
func FuzzKeyDecoder(f *testing.F) {
	f.Add([]byte("tnq\x1b[A\x1b[6~\x1bOH"), 3)
	f.Add([]byte("\x1b[1;5C\x1b"), 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		var d keyDecoder
		if split < 0 {
			split = -split
		}
		step := split%7 + 1
		for i := 0; i < len(b); i += step {
			for _, k := range d.decode(b[i:min(i+step, len(b))]) {
				if len(k) == 0 {
					t.Fatalf("empty key from %q", b)
				}
				if len(k) == 1 && (k[0] < 0x20 || k[0] >= 0x7f) {
					t.Fatalf("control character %q as a key from %q", k, b)
				}
			}
			if len(d.pending) > 18 || (len(d.pending) > 0 && d.pending[0] != 0x1b) {
				t.Fatalf("pending %q after %q", d.pending, b[:min(i+step, len(b))])
			}
		}
	})
}
