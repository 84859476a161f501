package exporter

// How the exporter serves HTTP: the listeners and the web configuration
// of prometheus/exporter-toolkit, as node_exporter and the other official
// exporters take them (--web.listen-address, --web.systemd-socket,
// --web.config.file, --web.telemetry-path; docs/metrics.md).

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
)

// DefaultTelemetryPath is where the metrics are served unless told.
const DefaultTelemetryPath = "/metrics"

// WebConfigDoc documents the web configuration file the toolkit reads.
const WebConfigDoc = "https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md"

// ErrNoSystemdSockets: socket activation was asked for, but systemd
// passed no socket.
var ErrNoSystemdSockets = errors.New("systemd passed no listening socket (LISTEN_FDS is unset or 0)")

// CheckWebConfig reads the web configuration file at path (TLS, client
// certificates, basic auth) as the toolkit will when serving, and loads
// the certificates it names: nil for "" (plain HTTP, no authentication).
// The error names path.
func CheckWebConfig(path string) error {
	if path == "" {
		return nil
	}
	err := web.Validate(path)
	switch {
	case err == nil:
		return nil
	case isBcryptError(err):
		// The toolkit hands bcrypt's error on without saying where.
		return fmt.Errorf("%s: a password of basic_auth_users is not a bcrypt hash (htpasswd -nBC 10 USER prints one): %w", path, oneLineError{err})
	}
	return fmt.Errorf("%s: %w", path, oneLineError{err})
}

// oneLineError is err on one line: YAML's errors list their lines below
// a heading ("yaml: unmarshal errors:\n  line 2: field x not found ...").
type oneLineError struct{ err error }

func (e oneLineError) Error() string {
	s := strings.ReplaceAll(e.err.Error(), "errors:\n", "errors: ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func (e oneLineError) Unwrap() error { return e.err }

// isBcryptError says whether err is one of bcrypt's about a malformed
// hash.
func isBcryptError(err error) bool {
	var prefix bcrypt.InvalidHashPrefixError
	var version bcrypt.HashVersionTooNewError
	var cost bcrypt.InvalidCostError
	return errors.Is(err, bcrypt.ErrHashTooShort) || errors.As(err, &prefix) || errors.As(err, &version) || errors.As(err, &cost)
}

// CheckTelemetryPath checks where the metrics are to be served: an
// absolute URL path that is not one of the other endpoints.
func CheckTelemetryPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q does not start with /", p)
	case p == "/" || p == "/healthz" || p == "/readyz":
		return fmt.Errorf("%q is taken by another endpoint (/, /healthz, /readyz)", p)
	case strings.ContainsAny(p, " \t\n{}"):
		return fmt.Errorf("%q holds a space or a brace", p)
	}
	return nil
}

// Listen opens a TCP listener on each address (host:port), closing those
// it opened when one fails; the error names the address.
func Listen(addrs []string) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// SystemdListeners are the listening sockets systemd passed to the
// process (socket activation: LISTEN_FDS), or ErrNoSystemdSockets.
func SystemdListeners() ([]net.Listener, error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("systemd's sockets: %w", err)
	}
	var open []net.Listener
	for _, l := range lns {
		if l != nil { // a passed descriptor that is not a socket
			open = append(open, l)
		}
	}
	if len(open) == 0 {
		return nil, ErrNoSystemdSockets
	}
	return open, nil
}
