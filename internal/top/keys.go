package top

// Key is a key pressed in the live view: a printable character ("n",
// "q") or the name of a special key.
type Key string

// Special keys.
const (
	KeyUp     Key = "up"
	KeyDown   Key = "down"
	KeyPgUp   Key = "pgup"
	KeyPgDown Key = "pgdown"
	KeyHome   Key = "home"
	KeyEnd    Key = "end"
	KeyCtrlC  Key = "ctrl-c" // only when the terminal does not turn it into SIGINT
)

// escKeys are the sequences terminals send for the special keys: CSI
// (ESC [) in normal mode, SS3 (ESC O) in application cursor mode, and the
// VT220 editing keys.
var escKeys = map[string]Key{
	"[A": KeyUp, "OA": KeyUp,
	"[B": KeyDown, "OB": KeyDown,
	"[5~": KeyPgUp, "[6~": KeyPgDown,
	"[H": KeyHome, "OH": KeyHome, "[1~": KeyHome, "[7~": KeyHome,
	"[F": KeyEnd, "OF": KeyEnd, "[4~": KeyEnd, "[8~": KeyEnd,
}

// keyDecoder turns the bytes a terminal sends into keys. A sequence split
// across reads is kept until its end arrives.
type keyDecoder struct {
	pending []byte
}

// decode returns the keys in b (and in what was pending). Unknown escape
// sequences (function keys, mouse reports, other arrows) are skipped.
func (d *keyDecoder) decode(b []byte) []Key {
	buf := append(d.pending, b...)
	d.pending = nil
	var keys []Key
	for i := 0; i < len(buf); {
		c := buf[i]
		switch {
		case c == 0x1b:
			n, k, complete := escSeq(buf[i:])
			if !complete {
				d.pending = append([]byte(nil), buf[i:]...)
				return keys
			}
			if k != "" {
				keys = append(keys, k)
			}
			i += n
		case c == 0x03:
			keys = append(keys, KeyCtrlC)
			i++
		case c >= 0x20 && c < 0x7f:
			keys = append(keys, Key(string(rune(c))))
			i++
		default: // other control characters, and UTF-8 (no key of ours)
			i++
		}
	}
	return keys
}

// escSeq reads the escape sequence at the start of b (b[0] is ESC): its
// length, the key it names (empty if none of ours), and whether it is
// complete. ESC followed by anything but [ or O is a lone Escape (no key).
func escSeq(b []byte) (int, Key, bool) {
	if len(b) < 2 {
		return 0, "", false
	}
	switch b[1] {
	case 'O': // SS3: one final character
		if len(b) < 3 {
			return 0, "", false
		}
		return 3, escKeys[string(b[1:3])], true
	case '[': // CSI: parameters, then a final byte in 0x40..0x7e
		for j := 2; j < len(b); j++ {
			if b[j] >= 0x40 && b[j] <= 0x7e {
				return j + 1, escKeys[string(b[1:j+1])], true
			}
			if j > 16 { // not a sequence any key sends: drop it
				return j + 1, "", true
			}
		}
		return 0, "", false
	default:
		return 1, "", true
	}
}
